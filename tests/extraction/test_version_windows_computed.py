"""Change Tracking reads computed columns from the table itself: their real values reach the windows (issue 36).

Unlike CDC, which captures a computed column as NULL, a Change Tracking window joins CHANGETABLE to
the source table, so a computed column holds the row's value (docs/operations.md, "Computed columns").
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_sqlserver_cdc.extraction.version_windows import VersionWindow, extract_version_window
from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook
from airflow_provider_sqlserver_cdc.snapshot.version_copy import snapshot_tracked_tables
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.window.manifest import WindowManifest
from sqlserver_cdc_simulator.connections import mssql_connection_json

CONN = "ct_computed"


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    sqlserver_simulator.clock.set(dt.datetime(2026, 1, 1, 9, 0, tzinfo=dt.UTC), frozen=True)
    sqlserver_simulator.execute("CREATE DATABASE ctcalc")
    sqlserver_simulator.execute(
        "ALTER DATABASE ctcalc SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 1 DAYS, AUTO_CLEANUP = ON);"
        "ALTER DATABASE ctcalc SET ALLOW_SNAPSHOT_ISOLATION ON"
    )
    sqlserver_simulator.execute(
        "CREATE TABLE dbo.lines (id int NOT NULL PRIMARY KEY, qty int NULL, price decimal(9,2) NULL, "
        "total AS (qty * price), total_kept AS (qty * price) PERSISTED);"
        "ALTER TABLE dbo.lines ENABLE CHANGE_TRACKING;"
        "INSERT INTO dbo.lines (id, qty, price) VALUES (1, 2, 3.50), (2, 1, 10)",
        "ctcalc",
    )
    monkeypatch.setenv(
        connection_variable(CONN),
        mssql_connection_json(
            sqlserver_simulator.host, sqlserver_simulator.port, "sa", sqlserver_simulator.password, "ctcalc"
        ),
    )
    return sqlserver_simulator


def _rows(window_uri: str) -> list[dict]:
    manifest = WindowManifest.from_json(Path(window_uri, "_manifest.json").read_text())
    return [row for f in manifest.files for row in pq.read_table(f"{window_uri}/{f.path}").to_pylist()]


def test_change_tracking_windows_carry_computed_values(source, tmp_path):
    hook = ChangeTrackingHook(CONN)
    [snap] = snapshot_tracked_tables(hook, ["dbo.lines"], conn_id=CONN, base_uri=str(tmp_path))
    assert {r["id"]: (r["total"], r["total_kept"]) for r in _rows(snap.window_uri)} == {
        1: (Decimal("7.0000"), Decimal("7.0000")),
        2: (Decimal("10.0000"), Decimal("10.0000")),
    }
    source.execute("UPDATE dbo.lines SET qty = 4 WHERE id = 1", "ctcalc")
    table = hook.get_tracked_table("dbo.lines")
    result, empty = extract_version_window(
        hook, table, VersionWindow(1, None, "watermark"), base_uri=str(tmp_path), database="ctcalc"
    )
    assert not empty
    assert [(r["id"], r["total"], r["total_kept"]) for r in _rows(result.window_uri)] == [
        (1, Decimal("14.0000"), Decimal("14.0000"))
    ]
