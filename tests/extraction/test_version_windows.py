"""Change Tracking windows end to end against the simulator over pyodbc + FreeTDS: hook, snapshot, extraction."""

from __future__ import annotations

import datetime as dt
import json
import logging

import pytest
from change_tracking_source import tracked_database, window_rows

from airflow_provider_sqlserver_cdc.extraction.version_windows import (
    VersionWindow,
    extract_version_window,
    extract_version_windows,
    plan_version_window,
)
from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.hooks.change_tracking import (
    ChangeTrackingHook,
    ChangeTrackingNotEnabledError,
    ChangeTrackingRetentionError,
    lsn_version,
    version_lsn,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.snapshot.version_copy import snapshot_tracked_tables

CONN = "ct_src"
# The tracked table and its first rows.
TABLES = (
    "CREATE TABLE dbo.orders (order_id int NOT NULL PRIMARY KEY, customer nvarchar(40) NULL, "
    "amount decimal(12,2) NULL, placed datetime2(7) NULL);"
    "ALTER TABLE dbo.orders ENABLE CHANGE_TRACKING;"
    "INSERT INTO dbo.orders VALUES (1, N'ann', 10.50, '2026-01-01 10:00:00.1234567'), (2, N'bob', 20, NULL)"
)


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    """A database ``ctshop`` with change tracking, snapshot isolation and a tracked ``dbo.orders``."""
    return tracked_database(sqlserver_simulator, monkeypatch, CONN, "ctshop", TABLES)


def test_version_positions_encode_as_lsns_that_sort_like_versions():
    assert version_lsn(1234).hex == "0x000000000000000004D2"
    assert lsn_version(Lsn.from_hex("0x000000000000000004D2")) == 1234
    assert version_lsn(9) < version_lsn(10) < version_lsn(2**62)


def test_tracked_table_metadata(source):
    hook = ChangeTrackingHook(CONN)
    table = hook.get_tracked_table("dbo.orders")
    assert (table.name, table.key_columns) == ("dbo_orders", ("order_id",))
    assert [c.name for c in table.columns] == ["order_id", "customer", "amount", "placed"]
    assert hook.current_version() == 1
    source.execute("CREATE TABLE dbo.plain (id int PRIMARY KEY)", "ctshop")
    with pytest.raises(
        ChangeTrackingNotEnabledError, match=r"ALTER TABLE \[dbo\]\.\[plain\] ENABLE CHANGE_TRACKING"
    ):
        hook.get_tracked_table("dbo.plain")


def test_snapshot_then_change_windows(source, tmp_path):
    hook = ChangeTrackingHook(CONN)
    [snap] = snapshot_tracked_tables(hook, ["dbo.orders"], conn_id=CONN, base_uri=str(tmp_path))
    assert (snap.kind, snap.to_position) == ("snapshot", version_lsn(1).hex)
    assert sorted(r["order_id"] for r in window_rows(snap.window_uri)) == [1, 2]
    source.execute(
        "UPDATE dbo.orders SET amount = 11 WHERE order_id = 1;"
        "DELETE FROM dbo.orders WHERE order_id = 2;"
        "INSERT INTO dbo.orders VALUES (3, N'cy', 30, NULL);"
        "UPDATE dbo.orders SET order_id = 4 WHERE order_id = 3",
        "ctshop",
    )
    table = hook.get_tracked_table("dbo.orders")
    result, empty = extract_version_window(
        hook, table, VersionWindow(1, None, "watermark"), WindowOutput(str(tmp_path), "ctshop")
    )
    assert not empty
    m = result.manifest
    assert (m.from_lsn, m.to_lsn) == (version_lsn(2).hex, version_lsn(5).hex)
    rows = {r["order_id"]: r for r in window_rows(result.window_uri)}
    assert {k: (r["__$operation"], lsn_version(Lsn(r["__$start_lsn"]))) for k, r in rows.items()} == {
        1: (4, 2),
        2: (1, 3),
        3: (1, 5),
        4: (2, 5),
    }
    assert rows[1]["amount"] == 11 and rows[2]["customer"] is None  # a delete carries only its key
    assert m.operation_counts == {"delete": 2, "insert": 1, "update_before": 0, "update_after": 1}
    again, empty = extract_version_window(
        hook, table, VersionWindow(5, None, "watermark"), WindowOutput(str(tmp_path), "ctshop")
    )
    assert empty and again.manifest.row_count == 0 and again.manifest.to_lsn == version_lsn(5).hex


def test_retention_gap_fails_loudly_naming_the_table_and_the_remedy(source, tmp_path):
    source.clock.set(dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC), frozen=True)
    source.execute("UPDATE dbo.orders SET amount = 1 WHERE order_id = 1", "ctshop")  # v2
    source.clock.advance(dt.timedelta(days=2))
    source.execute("UPDATE dbo.orders SET amount = 2 WHERE order_id = 1", "ctshop")  # v3; v1, v2 expire
    hook = ChangeTrackingHook(CONN)
    table = hook.get_tracked_table("dbo.orders")
    with pytest.raises(ChangeTrackingRetentionError) as excinfo:
        extract_version_window(
            hook, table, VersionWindow(1, None, "watermark"), WindowOutput(str(tmp_path), "ctshop")
        )
    text = str(excinfo.value)
    assert "dbo.orders" in text and "below CHANGE_TRACKING_MIN_VALID_VERSION 2" in text
    assert '"resnapshot": ["dbo_orders"]' in text and "auto_resnapshot" in text


def test_interval_windows_map_the_data_interval_through_the_commit_table(source, tmp_path, monkeypatch):
    clock = source.clock
    clock.set(dt.datetime(2026, 1, 1, 10, 30, tzinfo=dt.UTC), frozen=True)
    source.execute("UPDATE dbo.orders SET amount = 5 WHERE order_id = 1", "ctshop")  # v2 at 10:30
    clock.set(dt.datetime(2026, 1, 1, 11, 30, tzinfo=dt.UTC), frozen=True)
    source.execute("UPDATE dbo.orders SET amount = 6 WHERE order_id = 2", "ctshop")  # v3 at 11:30
    hook = ChangeTrackingHook(CONN)
    table = hook.get_tracked_table("dbo.orders")
    start = dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC)

    def planned(watermark: int | None, hours: int = 0) -> tuple[int, int | None, str]:
        begin = start + dt.timedelta(hours=hours)
        w = plan_version_window(
            hook,
            table,
            mode="interval",
            watermark_version=watermark,
            data_interval_start=begin,
            data_interval_end=begin + dt.timedelta(hours=1),
        )
        return w.last_version, w.stop_version, w.mode

    assert planned(watermark=None) == (1, 2, "interval")
    # A window starts at the watermark: missed versions are taken in (v2 of 10:00-11:00 in 11:00-12:00) ...
    assert planned(watermark=1, hours=1) == (1, 3, "interval")
    # ... and an interval the target holds (a re-run, an older interval backfilled) is an empty window,
    # read from no version below the watermark (which retention may have cleaned up).
    assert planned(watermark=3) == (3, 3, "interval")
    # a login without VIEW SERVER STATE cannot read the commit table: the window is watermark-based
    monkeypatch.setattr(ChangeTrackingHook, "version_at", lambda self, when: None)
    assert planned(watermark=1) == (1, None, "watermark")


def test_extract_version_windows_continues_after_the_stored_watermark(source, tmp_path, monkeypatch):
    key = f"sqlserver_cdc__{CONN}__ctshop__dbo_orders"
    monkeypatch.setenv(f"AIRFLOW_VAR_{key.upper()}", json.dumps({"lsn": version_lsn(1).hex}))
    source.execute("INSERT INTO dbo.orders VALUES (9, N'z', 1, NULL)", "ctshop")
    [window] = extract_version_windows(
        ChangeTrackingHook(CONN),
        ["dbo.orders"],
        conn_id=CONN,
        base_uri=str(tmp_path),
        window_mode="watermark",
    )
    assert (window.from_position, window.to_position, window.row_count) == (
        version_lsn(2).hex,
        version_lsn(2).hex,
        1,
    )
    assert window.state_key == key


class _TaskInstance:
    """What the plan operator pushes to: Airflow's task instance in a real run (XComs kept here)."""

    def __init__(self) -> None:
        self.xcom: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcom[key] = value


def _plan(auto_resnapshot: bool, conf: dict | None = None) -> tuple[list[dict], dict]:
    from types import SimpleNamespace

    from airflow_provider_sqlserver_cdc.operators.change_tracking import ChangeTrackingLoadPlanOperator

    operator = ChangeTrackingLoadPlanOperator(
        task_id="ct_plan", tables=["dbo.orders"], sqlserver_cdc_conn_id=CONN, auto_resnapshot=auto_resnapshot
    )
    ti = _TaskInstance()
    decisions = operator.execute({"ti": ti, "dag_run": SimpleNamespace(conf=conf or {})})
    return decisions, ti.xcom


def test_load_plan_snapshots_new_tables_fails_on_a_retention_gap_or_resnapshots_when_asked(
    source, monkeypatch
):
    decisions, xcom = _plan(auto_resnapshot=False)
    assert xcom == {"snapshot": ["dbo.orders"], "extract": []} and "no watermark" in decisions[0]["reason"]
    key = f"AIRFLOW_VAR_SQLSERVER_CDC__{CONN.upper()}__CTSHOP__DBO_ORDERS"
    monkeypatch.setenv(key, json.dumps({"lsn": version_lsn(1).hex}))
    assert _plan(auto_resnapshot=False)[1] == {"snapshot": [], "extract": ["dbo.orders"]}
    assert _plan(False, {"resnapshot": ["dbo_orders"]})[1] == {"snapshot": ["dbo.orders"], "extract": []}
    source.execute("UPDATE dbo.orders SET amount = 1 WHERE order_id = 1", "ctshop")  # v2 at 09:00
    source.clock.advance(dt.timedelta(days=1, minutes=1))
    source.execute("UPDATE dbo.orders SET amount = 2 WHERE order_id = 1", "ctshop")  # v3; v1, v2 expire
    with pytest.raises(ChangeTrackingRetentionError, match=r"dbo\.orders .*version 1 is below"):
        _plan(auto_resnapshot=False)
    decisions, xcom = _plan(auto_resnapshot=True)
    assert xcom == {"snapshot": ["dbo.orders"], "extract": []} and "retention gap" in decisions[0]["reason"]


def _positions(window_uri: str) -> list[tuple[int, int, str | None, str | None]]:
    """(order_id, version, channel, note) of every row of a window, sorted."""
    return sorted(
        (r["order_id"], lsn_version(Lsn(r["__$start_lsn"])), r.get("channel"), r.get("note"))
        for r in window_rows(window_uri)
    )


def test_added_columns_reread_the_rows_that_hold_a_value_in_them(source, tmp_path, caplog):
    hook = ChangeTrackingHook(CONN)
    snapshot_tracked_tables(hook, ["dbo.orders"], conn_id=CONN, base_uri=str(tmp_path))  # v1, columns before
    # Every existing row gets 'web' (NOT NULL DEFAULT); `note` stays NULL in rows nobody changes.
    source.execute(
        "ALTER TABLE dbo.orders ADD channel varchar(10) NOT NULL DEFAULT 'web', note nvarchar(20) NULL;"
        "UPDATE dbo.orders SET note = N'new', channel = 'app' WHERE order_id = 2;"  # v2
        "INSERT INTO dbo.orders (order_id, customer) VALUES (3, N'cy')",  # v3
        "ctshop",
    )
    table = hook.get_tracked_table("dbo.orders")  # every window reads the column list afresh
    log = logging.getLogger("ct-test")
    with caplog.at_level(logging.WARNING, logger="ct-test"):
        result, _ = extract_version_window(
            hook,
            table,
            VersionWindow(1, None, "watermark"),
            WindowOutput(str(tmp_path), "ctshop", log=log),
        )
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "added channel varchar; added note nvarchar" in warning
    assert "3 row(s) that hold a value in channel, note were re-read" in warning
    assert [c["name"] for c in result.manifest.columns][-2:] == ["channel", "note"]
    # The changed keys at their versions, and every row re-read at the window's stop version (3):
    # order 1 never changed since the DDL and gets its 'web'; the merge keeps each key's newest position.
    assert _positions(result.window_uri) == [
        (1, 3, "web", None),
        (2, 2, "app", "new"),
        (2, 3, "app", "new"),
        (3, 3, "web", None),
        (3, 3, "web", None),
    ]
    assert result.manifest.operation_counts == {
        "delete": 0,
        "insert": 1,
        "update_before": 0,
        "update_after": 4,
    }

    # The next window compares with this one: no change, nothing re-read.
    source.execute("UPDATE dbo.orders SET note = N'x' WHERE order_id = 1", "ctshop")  # v4
    table = hook.get_tracked_table("dbo.orders")
    following, _ = extract_version_window(
        hook, table, VersionWindow(3, None, "watermark"), WindowOutput(str(tmp_path), "ctshop")
    )
    assert _positions(following.window_uri) == [(1, 4, "web", "x")]


def test_a_column_added_without_a_version_is_taken_in_by_the_next_window_that_has_one(source, tmp_path):
    hook = ChangeTrackingHook(CONN)
    snapshot_tracked_tables(hook, ["dbo.orders"], conn_id=CONN, base_uri=str(tmp_path))  # v1
    source.execute("ALTER TABLE dbo.orders ADD channel varchar(10) NOT NULL DEFAULT 'web'", "ctshop")
    table = hook.get_tracked_table("dbo.orders")
    # No DML since the DDL: an empty window (the merge skips it), which must not hide the change.
    quiet, empty = extract_version_window(
        hook, table, VersionWindow(1, None, "watermark"), WindowOutput(str(tmp_path), "ctshop")
    )
    assert empty and [c["name"] for c in quiet.manifest.columns][-1] == "channel"
    source.execute("UPDATE dbo.orders SET amount = 5 WHERE order_id = 2", "ctshop")  # v2
    result, _ = extract_version_window(
        hook, table, VersionWindow(1, None, "watermark"), WindowOutput(str(tmp_path), "ctshop")
    )
    assert [(k, v, c) for k, v, c, _ in _positions(result.window_uri)] == [
        (1, 2, "web"),
        (2, 2, "web"),
        (2, 2, "web"),
    ]


def test_version_sensor_waits_for_a_secondary_behind_the_watermark_and_for_the_interval_end(
    source, monkeypatch
):
    from airflow_provider_sqlserver_cdc.sensors.change_tracking import ChangeTrackingVersionSensor

    def sensor(mode: str) -> ChangeTrackingVersionSensor:
        return ChangeTrackingVersionSensor(
            task_id="ct_wait", capture_instance="dbo.orders", sqlserver_cdc_conn_id=CONN, window_mode=mode
        )

    end = dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC)  # the server clock shows 09:00
    assert not sensor("interval").poke({"data_interval_end": end})
    assert sensor("interval").poke({"data_interval_end": end - dt.timedelta(hours=1)})
    key = f"AIRFLOW_VAR_SQLSERVER_CDC__{CONN.upper()}__CTSHOP__DBO_ORDERS"
    monkeypatch.setenv(key, json.dumps({"lsn": version_lsn(7).hex}))  # the current version is 1
    assert not sensor("watermark").poke({})
    monkeypatch.setenv(key, json.dumps({"lsn": version_lsn(1).hex}))
    assert sensor("watermark").poke({})
    source.execute(
        "ALTER TABLE dbo.orders DISABLE CHANGE_TRACKING; ALTER DATABASE ctshop SET CHANGE_TRACKING = OFF",
        "ctshop",
    )
    with pytest.raises(ChangeTrackingNotEnabledError, match="SET CHANGE_TRACKING = ON"):
        sensor("watermark").poke({})
