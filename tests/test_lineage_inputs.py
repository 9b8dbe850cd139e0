"""Source tables reach Airflow's hook-lineage collector as inputs with the microsoft-mssql asset URI (lineage_inputs.py)."""

from __future__ import annotations

import logging

import pytest
from airflow.sdk.lineage import HookLineageCollector

from airflow_provider_sqlserver_cdc.lineage_inputs import report_source_inputs
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

LSN1, LSN2 = f"0x{1:020X}", f"0x{2:020X}"


def window(table: str, server: str = "db.example:14330") -> ChangeWindow:
    source = {"server": server, "database": "shop", "schema": "dbo", "table": table}
    return ChangeWindow(
        f"dbo_{table}", source, "changes", "interval", LSN1, LSN2, f"/s/{table}", f"/s/{table}/m", "k"
    )


class SourceHook:  # the lineage context: any hook object (the collector keys entries by its id)
    pass


def test_each_source_table_is_an_input_asset_of_the_task_once():
    collector = HookLineageCollector()
    hook = SourceHook()
    windows = [window("orders"), window("orders"), window("customers"), window("lines", server="")]
    uris = report_source_inputs(hook, windows, collector)
    assert uris == ["mssql://db.example:14330/shop/dbo/orders", "mssql://db.example:14330/shop/dbo/customers"]
    collected = collector.collected_assets.inputs
    assert [i.asset.uri for i in collected] == uris
    assert all(i.context is hook for i in collected)


def test_a_collector_failure_does_not_fail_the_task(caplog: pytest.LogCaptureFixture):
    class Broken:
        def add_input_asset(self, **kwargs):
            raise RuntimeError("reader down")

    with caplog.at_level(logging.WARNING):
        assert report_source_inputs(SourceHook(), [window("orders")], Broken()) == [
            "mssql://db.example:14330/shop/dbo/orders"
        ]
    assert "reader down" in caplog.text
