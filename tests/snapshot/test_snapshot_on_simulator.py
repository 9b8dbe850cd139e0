"""
The snapshot on the SQL Server simulator, through pyodbc with FreeTDS and Driver 18, with concurrent writers.

The proof of consistency: snapshot, then the change windows after its LSN, applied in order
(pure-Python apply of the manifests, snapshot_replay.py) equal a copy of the table taken after
the writers stopped. The Spark test (test_snapshot_spark.py) applies them with the merge job.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from snapshot_replay import read_window
from snapshot_source import (
    ConcurrentWriter,
    SourceDb,
    fresh_copy,
    history_until,
    interrupted_snapshot,
    replay,
    seed,
    snapshot_rows,
    windows_after,
)

from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.hooks.consistent_point import ConsistentRead
from airflow_provider_sqlserver_cdc.hooks.snapshot_errors import (
    SnapshotIsolationNotAllowedError,
    SnapshotLockTimeoutError,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.snapshot.progress import PROGRESS_NAME
from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_capture_instance

# Every test runs with FreeTDS and with Microsoft's ODBC Driver 18 (the driver production users run).
pytestmark = pytest.mark.usefixtures("odbc_driver")


def test_snapshot_and_later_windows_equal_the_source_while_a_writer_runs(source, tmp_path):
    workload = seed(source)
    hook = source.hook()
    database = source.name
    instances = [hook.get_capture_instance(t.capture_instance) for t in source.sample.tables]
    results = {}
    with ConcurrentWriter(source, workload) as writer:
        writer.wait_for_commits(3)
        for instance in instances:
            # small chunks, and writes committed between every two chunks
            results[instance.name] = snapshot_capture_instance(
                hook,
                instance,
                output=WindowOutput(str(tmp_path / "staging"), database, batch_size=10),
                chunk_rows=25,
                on_chunk=lambda progress: writer.wait_for_commits(2),
            )
        writer.wait_for_commits(3)
    assert writer.error is None, writer.error
    source.capture()
    changed_after_snapshot = 0
    for instance in instances:
        result = results[instance.name]
        assert result.chunks_read > 2 or instance.name == "dbo_type_zoo"
        snapshot_dir = Path(result.extract.window_uri)
        manifest, rows = read_window(snapshot_dir)
        lsn = Lsn.from_hex(manifest["to_lsn"])
        assert manifest["kind"] == "snapshot" and manifest["mode"] == "snapshot"
        assert {r["__$operation"] for r in rows} <= {2}
        assert {r["__$start_lsn"] for r in rows} <= {lsn.value}
        assert not (snapshot_dir.parent / PROGRESS_NAME).exists()
        keys = manifest["key_columns"]
        snapshot_keys = [tuple(r[k] for k in keys) for r in rows]
        assert snapshot_keys == sorted(snapshot_keys), "chunks are read in key order without overlap"
        assert len(set(snapshot_keys)) == len(snapshot_keys)
        # point in time: the copy is exactly the table rebuilt from every change up to its LSN
        history = history_until(hook, instance, lsn, tmp_path / "history", database)
        assert snapshot_rows(snapshot_dir) == history, instance.name
        windows = windows_after(hook, instance, lsn, tmp_path / "staging", database)
        window_manifest, window_rows = read_window(windows[0])
        assert all(Lsn(r["__$start_lsn"]) > lsn for r in window_rows)
        changed_after_snapshot += window_manifest["row_count"]
        expected = fresh_copy(hook, instance, tmp_path / "final", database)
        assert replay(snapshot_dir, windows) == expected, instance.name
        model = workload.model[f"{instance.source_schema}.{instance.source_table}"]
        assert set(expected) == set(model), "the final copy holds the workload's rows"
    assert changed_after_snapshot > 0, "the writer changed the tables after the snapshots"


def test_the_table_lock_waits_for_an_open_writer_and_the_snapshot_includes_its_commit(source, tmp_path):
    seed(source, rows=10)
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_orders")
    writer = source.connect(autocommit=False)
    writer.cursor().execute(
        "UPDATE dbo.orders SET status = N'held' WHERE order_id = (SELECT MIN(order_id) FROM dbo.orders)"
    )
    outcome = {}

    def take():
        outcome["result"] = snapshot_capture_instance(
            hook,
            instance,
            output=WindowOutput(str(tmp_path), source.name),
            read=ConsistentRead(lock_timeout_s=20),
        )

    thread = threading.Thread(target=take)
    thread.start()
    time.sleep(1.0)
    assert thread.is_alive(), "the snapshot must wait for the writer's open transaction"
    writer.commit()
    thread.join(20)
    writer.close()
    result = outcome["result"]
    manifest, rows = read_window(result.extract.window_uri)
    assert "held" in {r["status"] for r in rows}
    source.capture()
    change_lsn = (
        source.admin.cursor().execute("SELECT MAX(__$start_lsn) FROM cdc.dbo_orders_CT").fetchone()[0]
    )
    assert Lsn(change_lsn) < Lsn.from_hex(manifest["to_lsn"])


def test_a_writer_open_longer_than_lock_timeout_fails_the_snapshot_cleanly(source, tmp_path):
    seed(source, rows=5)
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_orders")
    writer = source.connect(autocommit=False)
    writer.cursor().execute("DELETE FROM dbo.orders WHERE order_id = (SELECT MIN(order_id) FROM dbo.orders)")
    try:
        with pytest.raises(SnapshotLockTimeoutError, match=r"dbo\.orders.*0\.5 s"):
            snapshot_capture_instance(
                hook,
                instance,
                output=WindowOutput(str(tmp_path), source.name),
                read=ConsistentRead(lock_timeout_s=0.5),
            )
    finally:
        writer.rollback()
        writer.close()
    assert not (tmp_path / "dbo_orders").exists() or not list(
        (tmp_path / "dbo_orders").rglob("_manifest.json")
    )
    # nothing is left locked: a writer can go on
    other = source.connect()
    other.cursor().execute(
        "UPDATE dbo.orders SET status = N'x' WHERE order_id = (SELECT MIN(order_id) FROM dbo.orders)"
    )
    other.close()


def test_without_snapshot_isolation_the_error_says_what_to_do_or_the_table_lock_fallback_copies(
    sqlserver_simulator, monkeypatch, tmp_path
):
    db = SourceDb(sqlserver_simulator, monkeypatch, snapshot_isolation=False)
    try:
        seed(db, rows=30)
        hook = db.hook()
        instance = hook.get_capture_instance("dbo_orders")
        with pytest.raises(SnapshotIsolationNotAllowedError, match="ALLOW_SNAPSHOT_ISOLATION ON"):
            snapshot_capture_instance(hook, instance, output=WindowOutput(str(tmp_path), db.name))
        result = snapshot_capture_instance(
            hook,
            instance,
            output=WindowOutput(str(tmp_path), db.name),
            read=ConsistentRead(allow_table_lock_fallback=True),
            chunk_rows=7,
        )
        assert result.progress.method == "table_lock"
        assert result.manifest.row_count == 30 and result.chunks_read == 5
    finally:
        db.close()


def test_a_failed_snapshot_resumes_with_the_same_lsn_and_still_ends_equal_to_the_source(source, tmp_path):
    workload = seed(source, rows=100)
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_order_lines")
    base = tmp_path / "staging"

    progress = interrupted_snapshot(hook, instance, base, source.name, chunk_rows=20, after_chunks=3)
    assert progress is not None and len(progress.chunks) == 3 and not progress.finished
    first_lsn = progress.snapshot_lsn
    # the table changes between the failure and the retry, in read and unread key ranges
    conn = source.connect()
    workload.run(conn, transactions=40)
    conn.close()
    result = snapshot_capture_instance(
        hook, instance, output=WindowOutput(str(base), source.name), chunk_rows=20
    )
    assert result.resumed_chunks == 3
    assert result.progress.snapshot_lsn == first_lsn
    assert len(result.progress.read_lsns) == 2 and Lsn.from_hex(result.progress.read_lsns[1]) > Lsn.from_hex(
        first_lsn
    )
    xcom = result.change_window("key").to_xcom()
    assert xcom["to_lsn"] == first_lsn and xcom["consistent_after_lsn"] == result.progress.read_lsns[1]
    source.capture()
    windows = windows_after(hook, instance, Lsn.from_hex(first_lsn), base, source.name)
    assert replay(Path(result.extract.window_uri), windows) == fresh_copy(
        hook, instance, tmp_path / "final", source.name
    )


def test_a_failed_snapshot_starts_over_when_cleanup_removed_changes_after_its_lsn(source, tmp_path):
    workload = seed(source, rows=60)
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_orders")
    base = tmp_path / "staging"
    old = interrupted_snapshot(hook, instance, base, source.name, chunk_rows=20)
    conn = source.connect()
    workload.run(conn, transactions=20)
    conn.close()
    source.capture()
    max_lsn = source.admin.cursor().execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0]
    source.execute(
        "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', @low_water_mark = ?", max_lsn
    )
    assert hook.get_min_lsn("dbo_orders") > Lsn.from_hex(old.snapshot_lsn)
    result = snapshot_capture_instance(
        hook, instance, output=WindowOutput(str(base), source.name), chunk_rows=20
    )
    assert result.resumed_chunks == 0
    assert Lsn.from_hex(result.progress.snapshot_lsn) > Lsn.from_hex(old.snapshot_lsn)
    assert not (base / instance.name / old.window_dir).exists()
    assert result.manifest.row_count == len(workload.model["dbo.orders"])


def test_a_login_without_view_server_state_gets_a_permission_error_naming_the_grant(
    source, monkeypatch, tmp_path
):
    from airflow_provider_sqlserver_cdc.hooks.snapshot_errors import SnapshotPermissionError
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook

    seed(source, rows=5)
    instance = source.hook().get_capture_instance("dbo_orders")
    source.execute("CREATE LOGIN snap_reader WITH PASSWORD = 'R3ader!pw'")
    source.execute("CREATE USER snap_reader FOR LOGIN snap_reader")
    source.execute("ALTER ROLE db_owner ADD MEMBER snap_reader")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SNAP_READER",
        source.simulator.airflow_connection(source.name, login="snap_reader", password="R3ader!pw"),
    )
    with pytest.raises(SnapshotPermissionError, match="GRANT VIEW SERVER STATE"):
        snapshot_capture_instance(
            SqlServerCdcHook("snap_reader"), instance, output=WindowOutput(str(tmp_path), source.name)
        )


def test_keyset_chunks_over_text_datetime2_and_guid_keys_read_every_row_once(source, tmp_path):
    """Chunk boundaries on a case-insensitive nvarchar, a datetime2(7) read as text and a uniqueidentifier."""
    import datetime as dt
    import uuid

    source.execute(f"USE [{source.name}]")
    source.execute(
        "CREATE TABLE dbo.odd_keys (name nvarchar(20) NOT NULL, at datetime2(7) NOT NULL, "
        "tag uniqueidentifier NOT NULL, payload int NULL, CONSTRAINT pk_odd_keys PRIMARY KEY (name, at, tag))"
    )
    source.execute(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'odd_keys', @role_name = NULL"
    )
    names = ["a", "B", "b ", "Ä", "z", "Zz", "ß"]
    rows = []
    for i in range(60):
        at = dt.datetime(2024, 1, 1, 0, 0, 0) + dt.timedelta(microseconds=(i % 4) * 7, seconds=i % 3)
        rows.append(
            (
                names[i % len(names)],
                f"{at:%Y-%m-%d %H:%M:%S}.{at.microsecond:06d}1",
                str(uuid.UUID(int=(i * 7919) << 64 | i)),
                i,
            )
        )
    conn = source.connect()
    cursor = conn.cursor()
    for row in rows:
        cursor.execute(
            "INSERT INTO dbo.odd_keys VALUES (?, CAST(? AS datetime2(7)), CAST(? AS uniqueidentifier), ?)",
            *row,
        )
    conn.close()
    source.capture()
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_odd_keys")
    chunked = snapshot_capture_instance(
        hook, instance, output=WindowOutput(str(tmp_path / "a"), source.name, batch_size=3), chunk_rows=7
    )
    assert chunked.chunks_read >= 9
    _, chunked_rows = read_window(chunked.extract.window_uri)
    keys = [(r["name"], r["at"], r["tag"]) for r in chunked_rows]
    assert len(keys) == len(set(keys)) == len(rows)
    assert sorted(r["payload"] for r in chunked_rows) == list(range(60))
    whole = snapshot_capture_instance(
        hook, instance, output=WindowOutput(str(tmp_path / "b"), source.name), chunk_rows=1000
    )
    _, whole_rows = read_window(whole.extract.window_uri)
    assert [r["payload"] for r in chunked_rows] == [r["payload"] for r in whole_rows], (
        "same order as ORDER BY"
    )


def test_a_captured_column_dropped_from_the_table_gives_an_actionable_error(source, tmp_path):
    from airflow_provider_sqlserver_cdc.hooks.snapshot_errors import SnapshotError

    seed(source, rows=5)
    source.execute(f"USE [{source.name}]")
    source.execute("ALTER TABLE dbo.orders DROP COLUMN discount")
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_orders")
    assert "discount" in [c.name for c in instance.columns]  # CDC keeps the column in the instance
    with pytest.raises(SnapshotError, match=r"discount.*new capture instance|new capture instance") as caught:
        snapshot_capture_instance(hook, instance, output=WindowOutput(str(tmp_path), source.name))
    assert "dbo.orders" in str(caught.value) and "sys.sp_cdc_enable_table" in str(caught.value)


def test_resume_false_discards_the_unfinished_snapshot(source, tmp_path):
    seed(source, rows=50)
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_orders")
    base = tmp_path / "staging"
    old = interrupted_snapshot(hook, instance, base, source.name, chunk_rows=10)
    assert (base / instance.name / old.window_dir / "part-00000.parquet").is_file()
    result = snapshot_capture_instance(
        hook, instance, output=WindowOutput(str(base), source.name), resume=False
    )
    assert result.resumed_chunks == 0 and result.progress.snapshot_lsn != old.snapshot_lsn
    assert not (base / instance.name / old.window_dir).exists()
    assert sorted(p.name for p in (base / instance.name).iterdir()) == [result.progress.window_dir]


def test_the_table_lock_method_makes_writers_wait_for_the_whole_copy(source, tmp_path):
    import pyodbc

    seed(source, rows=30)
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_orders")
    some_id = source.connect().cursor().execute("SELECT MAX(order_id) FROM dbo.orders").fetchone()[0]
    blocked = []

    def try_to_write(progress):
        writer = source.connect()
        cursor = writer.cursor()
        cursor.execute("SET LOCK_TIMEOUT 200")
        try:
            cursor.execute("UPDATE dbo.orders SET status = N'late' WHERE order_id = ?", some_id)
            blocked.append(False)
        except pyodbc.Error as err:
            blocked.append("1222" in str(err))
        finally:
            writer.close()

    result = snapshot_capture_instance(
        hook,
        instance,
        output=WindowOutput(str(tmp_path), source.name),
        read=ConsistentRead(method="table_lock"),
        chunk_rows=10,
        on_chunk=try_to_write,
    )
    assert result.progress.method == "table_lock" and result.lock_held_s is not None
    assert blocked == [True] * result.chunks_read
    after = source.connect()
    after.cursor().execute("UPDATE dbo.orders SET status = N'late' WHERE order_id = ?", some_id)
    after.close()


def test_an_empty_table_gives_an_empty_snapshot_window(source, tmp_path):
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_orders")
    result = snapshot_capture_instance(
        hook, instance, output=WindowOutput(str(tmp_path), source.name), chunk_rows=10
    )
    manifest, rows = read_window(result.extract.window_uri)
    assert rows == [] and manifest["files"] == [] and manifest["row_count"] == 0
    assert manifest["kind"] == "snapshot" and manifest["to_lsn"] == result.progress.snapshot_lsn
    assert result.chunks_read == 1
