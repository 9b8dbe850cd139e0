"""
A Change Tracking source database on the simulator for the version-window tests, and reading their windows.

Importable from any test module by its name (``tests/`` is on ``sys.path`` through its ``conftest.py``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.window.manifest import WindowManifest
from sqlserver_cdc_simulator.connections import mssql_connection_json

START = dt.datetime(2026, 1, 1, 9, 0, tzinfo=dt.UTC)


def tracked_database(
    simulator: Any, monkeypatch: pytest.MonkeyPatch, conn_id: str, database: str, tables_sql: str
) -> Any:
    """
    Create ``database`` with change tracking (one day's retention) and snapshot isolation, run
    ``tables_sql`` in it (its tables, ``ENABLE CHANGE_TRACKING``, first rows) with the clock frozen
    at :data:`START`, and point the Airflow connection ``conn_id`` at it. Return the simulator.
    """
    simulator.clock.set(START, frozen=True)
    simulator.execute(f"CREATE DATABASE {database}")
    simulator.execute(
        f"ALTER DATABASE {database} SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 1 DAYS, AUTO_CLEANUP = ON);"
        f"ALTER DATABASE {database} SET ALLOW_SNAPSHOT_ISOLATION ON"
    )
    simulator.execute(tables_sql, database)
    monkeypatch.setenv(
        connection_variable(conn_id),
        mssql_connection_json(simulator.host, simulator.port, "sa", simulator.password, database),
    )
    return simulator


def read_window(window_uri: str) -> tuple[WindowManifest, list[dict]]:
    """The manifest of a written window and the rows of all its Parquet files, in the manifest's order."""
    manifest = WindowManifest.from_json(Path(window_uri, "_manifest.json").read_text())
    rows = [row for f in manifest.files for row in pq.read_table(f"{window_uri}/{f.path}").to_pylist()]
    return manifest, rows


def window_rows(window_uri: str) -> list[dict]:
    """The rows of a written window (:func:`read_window`)."""
    return read_window(window_uri)[1]
