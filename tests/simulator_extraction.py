"""Extract ``dbo_orders`` of connection ``sim`` (the simulator) for a data interval, by the library itself;
the ``shop`` database those tests start from."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from server_clock import ZONE, local, utc

from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_windows
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase


def extract(tmp_path: Path, start: dt.datetime | None = None, end: dt.datetime | None = None, **options):
    """
    The windows of ``dbo_orders`` for ``[start, end)``, by default 10:00-11:00 server time, under ``tmp_path/lake``.

    :param options: further keyword arguments of ``extract_windows``.
    """
    hook = SqlServerCdcHook("sim")
    try:
        return extract_windows(
            hook,
            ["dbo_orders"],
            conn_id="sim",
            base_uri=str(tmp_path / "lake"),
            data_interval_start=start or utc(10, 0),
            data_interval_end=end or utc(11, 0),
            **options,
        )
    finally:
        hook.close()


def orders_source(simulator: Any, monkeypatch: pytest.MonkeyPatch) -> ClockedCdcDatabase:
    """
    Database ``shop`` on the server clock from 09:00 with ``dbo.orders (order_id, note)`` captured,
    snapshot isolation allowed at 09:01, and connection ``sim`` pointing at it.
    """
    monkeypatch.setenv("AIRFLOW_CONN_SIM", simulator.airflow_connection("shop"))
    tables = {"orders": "order_id int NOT NULL PRIMARY KEY, note nvarchar(20) NULL"}
    db = ClockedCdcDatabase(simulator, "shop", tables, time_zone=ZONE, start=local(9, 0))
    db.commit_at(local(9, 1), ("ALTER DATABASE shop SET ALLOW_SNAPSHOT_ISOLATION ON",))
    return db
