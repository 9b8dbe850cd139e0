"""The sample CDC database and the seeded workload, through pyodbc + FreeTDS against the simulator."""

from __future__ import annotations

import datetime as dt
import os
import struct
import subprocess
import sys
import uuid
from typing import Any

import pyodbc
import pytest

from sqlserver_cdc_simulator.workload import (
    SAMPLE_TABLES,
    STATEMENT_KINDS,
    SampleDatabase,
    Workload,
    WorkloadMix,
    main,
    read_all_changes,
    replay_changes,
)

SQL_SS_TIMESTAMPOFFSET = -155


def _datetimeoffset(raw: bytes) -> dt.datetime:
    year, month, day, hour, minute, second, nanos, tz_hour, tz_minute = struct.unpack("<6hI2h", raw)
    tz = dt.timezone(dt.timedelta(hours=tz_hour, minutes=tz_minute))
    return dt.datetime(year, month, day, hour, minute, second, nanos // 1000, tzinfo=tz)


@pytest.fixture
def conn(sqlserver_simulator: Any) -> Any:
    connection = pyodbc.connect(sqlserver_simulator.odbc_connection_string(), autocommit=True)
    connection.add_output_converter(SQL_SS_TIMESTAMPOFFSET, _datetimeoffset)
    yield connection
    connection.close()


@pytest.fixture
def sample(conn: Any) -> SampleDatabase:
    return SampleDatabase.create(conn, database=f"wl_{uuid.uuid4().hex[:8]}")


def _table_rows(conn: Any, table: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    names = [c.name for c in table.writable_columns]
    cursor = conn.cursor()
    cursor.execute(f"SELECT {', '.join(f'[{n}]' for n in names)} FROM {table.quoted_name}")
    rows = {}
    for record in cursor.fetchall():
        row = dict(zip(names, record, strict=True))
        rows[tuple(row[k] for k in table.key)] = row
    cursor.close()
    return rows


def test_sample_database_has_every_table_tracked_with_its_types(conn, sample):
    cursor = conn.cursor()
    tracked = {
        r[0]: r[1]
        for r in cursor.execute(
            "SELECT name, is_tracked_by_cdc FROM sys.tables WHERE schema_id = 1"
        ).fetchall()
    }
    assert {t.name for t in SAMPLE_TABLES} <= set(tracked)
    assert all(tracked[t.name] for t in SAMPLE_TABLES)
    instances = [r[0] for r in cursor.execute("SELECT capture_instance FROM cdc.change_tables").fetchall()]
    assert sorted(instances) == sorted(t.capture_instance for t in SAMPLE_TABLES)
    types = {
        r[0]: r[1]
        for r in cursor.execute(
            "SELECT c.name, ty.name FROM sys.columns c JOIN sys.types ty ON ty.user_type_id = c.user_type_id "
            "WHERE c.object_id = OBJECT_ID('dbo.type_zoo')"
        ).fetchall()
    }
    assert types["c_datetimeoffset"] == "datetimeoffset" and types["c_rowversion"] == "timestamp"
    assert len(types) == len(SAMPLE_TABLES[3].columns)


def test_sample_database_allows_snapshot_isolation(sqlserver_simulator, sample):
    reader = pyodbc.connect(sqlserver_simulator.odbc_connection_string(sample.database), autocommit=False)
    cursor = reader.cursor()
    state = cursor.execute(
        "SELECT snapshot_isolation_state FROM sys.databases WHERE name = ?", sample.database
    ).fetchone()[0]
    assert state == 1
    cursor.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    assert cursor.execute("SELECT COUNT(*) FROM dbo.customers").fetchone()[0] == 0  # error 3952 if OFF
    reader.rollback()
    reader.close()


def test_sample_database_can_leave_snapshot_isolation_off(conn):
    sample = SampleDatabase.create(
        conn, database="wl_no_snapshot", enable_cdc=False, allow_snapshot_isolation=False
    )
    state = conn.execute("SELECT snapshot_isolation_state FROM sys.databases WHERE name = ?", sample.database)
    assert state.fetchone()[0] == 0


def test_workload_model_matches_the_tables(conn, sample):
    workload = Workload(seed=11)
    for table in SAMPLE_TABLES:
        workload.insert_rows(conn, table.qualified_name, 20)
    stats = workload.run(conn, transactions=150)
    assert stats.transactions + stats.rolled_back == 150
    assert all(stats.rows[kind] for kind in STATEMENT_KINDS), stats
    for table in SAMPLE_TABLES:
        assert _table_rows(conn, table) == workload.model[table.qualified_name], table.qualified_name


def test_the_same_seed_draws_the_same_workload(conn):
    results = []
    for _ in range(2):
        SampleDatabase.create(conn, database="wl_same_seed", enable_cdc=False)
        workload = Workload(seed=5, mix=WorkloadMix(rollback_ratio=0.2))
        stats = workload.run(conn, transactions=60)
        results.append((stats.transactions, stats.rolled_back, stats.rows, workload.model))
    assert results[0] == results[1]


def test_replaying_the_captured_changes_rebuilds_the_tables(conn, sample, sqlserver_simulator):
    workload = Workload(seed=23)
    stats = workload.run(conn, transactions=200)
    sqlserver_simulator.run_capture_scan(sample.database)
    cursor = conn.cursor()
    high = cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0]
    for table in SAMPLE_TABLES:
        replica = replay_changes(table, read_all_changes(cursor, table, high=high))
        assert replica == workload.model[table.qualified_name], table.qualified_name
    assert stats.rows["key_update"] > 0


def test_command_line_creates_and_runs(sqlserver_simulator, capsys):
    odbc = sqlserver_simulator.odbc_connection_string()
    assert main(["--odbc", odbc, "create", "--database", "wl_cli", "--initial-rows", "5"]) == 0
    assert main(["--odbc", odbc, "run", "--database", "wl_cli", "--transactions", "20", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "created database wl_cli" in out and "transactions committed" in out
    with pyodbc.connect(odbc, autocommit=True) as check:
        count = check.cursor().execute("SELECT COUNT(*) FROM wl_cli.dbo.orders").fetchone()[0]
    assert count >= 1


def test_command_line_runs_as_a_module(sqlserver_simulator):
    env = {**os.environ, "SQLSERVER_CDC_ODBC": sqlserver_simulator.odbc_connection_string()}
    module = [sys.executable, "-m", "sqlserver_cdc_simulator.workload"]
    for args in (
        ["create", "--database", "wl_module"],
        ["run", "--database", "wl_module", "--transactions", "3"],
    ):
        done = subprocess.run([*module, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert "transactions committed" in done.stdout


def test_rate_paces_the_transactions(conn, sample):
    stats = Workload(seed=2).run(conn, transactions=10, rate=20)
    assert stats.transactions + stats.rolled_back == 10
    assert stats.seconds >= 9 / 20  # the tenth transaction starts 0.45 s after the first
    timed = Workload(seed=2).run(conn, duration=0.3)
    assert 0.3 <= timed.seconds < 5 and timed.transactions + timed.rolled_back >= 1


def test_replay_applies_inserts_updates_and_deletes_in_order():
    orders = SAMPLE_TABLES[1]
    names = [c.name for c in orders.writable_columns]

    def change(operation: int, order_id: int, status: str) -> tuple[Any, ...]:
        row = dict.fromkeys(names) | {"order_id": order_id, "status": status}
        return (b"lsn", b"seq", operation, *(row[n] for n in names))

    changes = [change(2, 1, "new"), change(2, 2, "new"), change(4, 1, "paid"), change(1, 2, "new")]
    replica = replay_changes(orders, changes)
    assert list(replica) == [(1,)] and replica[(1,)]["status"] == "paid"


def test_unknown_table_names_the_known_ones(conn):
    with pytest.raises(KeyError, match="dbo.nope is not one of the tables.*dbo.orders"):
        Workload(seed=1).insert_rows(conn, "dbo.nope", 1)
