"""Computed columns in the hook's column metadata (issue 36, item 3), against the simulator through pyodbc.

CDC captures a computed column as NULL (MicrosoftDocs/sql-docs,
docs/relational-databases/track-changes/track-data-changes-sql-server.md, "Data Type Considerations
for Change Data Capture"), so the hook leaves computed columns out of an instance's columns and says so.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_sqlserver_cdc.capture_instance import require_key_columns
from airflow_provider_sqlserver_cdc.errors import NoKeyColumnsError
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.window.planning import LsnWindow


@pytest.fixture
def hook(sqlserver_simulator, monkeypatch):
    cur = sqlserver_simulator.connect().cursor()
    for sql in (
        "CREATE DATABASE shop",
        "USE shop",
        "EXEC sys.sp_cdc_enable_db",
        "CREATE TABLE dbo.lines (id int NOT NULL PRIMARY KEY, qty int NULL, price decimal(9,2) NULL, "
        "total AS (qty * price), total_kept AS (qty * price) PERSISTED)",
        "CREATE TABLE dbo.codes (n int NOT NULL, code AS (n * 10) PERSISTED NOT NULL PRIMARY KEY, label varchar(9))",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'lines', @role_name = NULL",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'codes', @role_name = NULL",
        "INSERT INTO dbo.lines (id, qty, price) VALUES (1, 2, 3.50)",
        "UPDATE dbo.lines SET qty = 3 WHERE id = 1",
    ):
        cur.execute(sql)
    sqlserver_simulator.run_capture_scan("shop")
    conn = {
        "conn_type": "mssql",
        "host": sqlserver_simulator.host,
        "port": sqlserver_simulator.port,
        "login": sqlserver_simulator.user,
        "password": sqlserver_simulator.password,
        "schema": "shop",
        "extra": {"driver": "FreeTDS"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_SIM", json.dumps(conn))
    h = SqlServerCdcHook("sim")
    yield h
    h.close()


def test_computed_columns_are_left_out_and_logged(hook, capsys):
    lines = hook.get_capture_instance("dbo_lines")
    assert [c.name for c in lines.columns] == ["id", "qty", "price"]
    assert lines.computed_columns == ("total", "total_kept")
    assert lines.key_columns == ("id",)
    assert [c.name for c in hook.get_captured_columns("dbo_lines", with_computed=True)][3:] == [
        "total",
        "total_kept",
    ]
    said = capsys.readouterr().out  # Airflow's structured log writes to stdout
    assert (
        "dbo_lines (source dbo.lines): computed columns total, total_kept are left out of the target" in said
    )
    # the source's computed columns are no schema drift: they are never replicated from CDC
    assert [c.name for c in hook.get_source_columns("dbo_lines")] == ["id", "qty", "price"]


def test_change_rows_carry_no_computed_column(hook):
    lines = hook.get_capture_instance("dbo_lines")
    window = LsnWindow("dbo_lines", hook.get_min_lsn("dbo_lines"), hook.get_max_lsn(), "watermark")
    batches = list(hook.stream_changes(lines, window, tz=hook.get_server_time_zone()))
    names = batches[0].schema.names
    assert "total" not in names and "total_kept" not in names
    assert [r["qty"] for b in batches for r in b.to_pylist()] == [2, 2, 3]


def test_a_computed_key_is_refused_with_the_remedy(hook):
    codes = hook.get_capture_instance("dbo_codes")
    assert codes.computed_key_columns == ("code",)
    assert codes.key_columns == ()
    with pytest.raises(NoKeyColumnsError, match=r"dbo_codes.*code, a computed column.*@index_name"):
        require_key_columns([codes])


def test_snapshot_and_extract_refuse_a_computed_key(hook, monkeypatch, tmp_path):
    """The snapshot refuses a computed key; the capture instances the extract loads name their computed columns."""
    from airflow_provider_sqlserver_cdc import state
    from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_windows

    class Variables:  # no Airflow metadata DB here: no lineage Variable is stored
        get = staticmethod(lambda key, default=None: default)

    monkeypatch.setattr(state, "_variable", lambda: Variables)
    with pytest.raises(NoKeyColumnsError, match=r"dbo_codes.*code, a computed column"):
        snapshot_windows(hook, ["dbo_codes"], conn_id="sim", base_uri=str(tmp_path))
    with pytest.raises(NoKeyColumnsError, match=r"dbo_codes.*code, a computed column"):
        require_key_columns(hook.get_named_capture_instances(["dbo_codes"]))
    assert hook.get_named_capture_instances(["dbo_lines"])[0].computed_columns == ("total", "total_kept")
