"""The merge job's handling of a ``repair`` window (no Spark needed): never skipped, no applied range, no hard deletes."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.job import _pending
from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan
from airflow_provider_sqlserver_cdc.spark.merge.targets.base import ranges_after
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import Window
from airflow_provider_sqlserver_cdc.window.manifest import REPAIR, WindowManifest, zero_operation_counts


def window(kind: str, low: int, high: int) -> Window:
    manifest = WindowManifest(
        kind=kind,
        capture_instance="dbo_orders",
        source={"server": "s", "database": "d", "schema": "dbo", "table": "orders"},
        from_lsn=Lsn.from_int(low).hex,
        to_lsn=Lsn.from_int(high).hex,
        from_time=None,
        to_time=None,
        mode="snapshot",
        row_filter_option="all",
        key_columns=["order_id"],
        columns=[{"name": "order_id", "sql_type": "bigint"}],
        files=[],
        row_count=0,
        operation_counts=zero_operation_counts(),
    )
    return Window(f"/w/{kind}_{low}/_manifest.json", manifest)


def test_a_repair_inside_the_applied_ranges_is_merged_and_records_no_range():
    applied = {"dbo_orders": [(0, 500)]}
    repair, change = window(REPAIR, 300, 300), window("changes", 100, 200)
    plan = TargetPlan("lake.cdc.orders", windows=[repair, change], applied=applied)
    assert _pending(plan, hard=False) == [repair]  # the change window is applied already; the repair is not
    assert plan.skipped == [change]
    assert ranges_after(applied, [repair]) == applied
    assert ranges_after(applied, [repair, window("changes", 501, 600)]) == {"dbo_orders": [(0, 600)]}


def test_hard_deletes_refuse_a_repair():
    plan = TargetPlan(
        "lake.cdc.orders", windows=[window(REPAIR, 300, 300)], applied={"dbo_orders": [(0, 500)]}
    )
    with pytest.raises(MergeJobError, match="reconcile repair.*--delete-mode soft"):
        _pending(plan, hard=True)
