"""
Support of the snapshot tests on the simulator: a sample source database with an Airflow
connection for the hook, a concurrent writer, window extraction after a snapshot, and replay.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.fs as pafs
import pyodbc
import pytest
from snapshot_replay import ReplayTarget, read_window

from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_window
from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.snapshot.progress import SnapshotProgress, read_progress
from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_capture_instance
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.window.planning import plan_windows
from sqlserver_cdc_simulator.workload import SampleDatabase, Workload

_names = itertools.count(1)


class SourceDb:
    """A sample database on the simulator, with an Airflow connection for the hook."""

    def __init__(self, simulator, monkeypatch, *, snapshot_isolation: bool = True) -> None:
        self.simulator = simulator
        self.name = f"snap_{next(_names)}_{int(time.time() * 1000) % 100000}"
        self.admin = pyodbc.connect(simulator.odbc_connection_string(), autocommit=True)
        self.sample = SampleDatabase.create(
            self.admin, database=self.name, allow_snapshot_isolation=snapshot_isolation
        )
        self.conn_id = f"snapsim{next(_names)}"
        monkeypatch.setenv(connection_variable(self.conn_id), simulator.airflow_connection(self.name))

    def connect(self, *, autocommit: bool = True) -> pyodbc.Connection:
        return pyodbc.connect(
            self.simulator.odbc_connection_string(database=self.name), autocommit=autocommit
        )

    def execute(self, sql: str, *params) -> None:
        cursor = self.admin.cursor()
        cursor.execute(sql, *params)
        while cursor.nextset():
            pass
        cursor.close()

    def capture(self) -> None:
        self.simulator.run_capture_scan(self.name)

    def hook(self) -> SqlServerCdcHook:
        return SqlServerCdcHook(self.conn_id)

    def close(self) -> None:
        self.admin.close()


def seed(db: SourceDb, rows: int = 120, seed_value: int = 3) -> Workload:
    workload = Workload(seed=seed_value, tables=db.sample.tables)
    conn = db.connect()
    for table in db.sample.tables:
        workload.insert_rows(conn, table.qualified_name, rows)
    conn.close()
    db.capture()
    return workload


def windows_after(
    hook: SqlServerCdcHook, instance, snapshot_lsn: Lsn, base: Path, database: str
) -> list[Path]:
    """Extract the change window after the snapshot LSN (watermark mode) and return its directory."""
    tz = hook.get_server_time_zone()
    (window,) = plan_windows(
        hook, [instance], mode="watermark", tz=tz, watermarks={instance.name: snapshot_lsn}
    )
    result = extract_window(hook, instance, window, base_uri=str(base), tz=tz, database=database)
    return [Path(result.window_uri)]


def replay(snapshot_dir: Path, window_dirs: list[Path]) -> dict:
    target = ReplayTarget()
    target.apply(snapshot_dir)
    for window in window_dirs:
        target.apply(window)
    return target.rows()


def fresh_copy(hook, instance, base: Path, database: str) -> dict:
    """A copy taken with no writer running: the source's current rows as the snapshot reads them."""
    result = snapshot_capture_instance(
        hook, instance, output=WindowOutput(str(base), database), chunk_rows=10_000
    )
    manifest, rows = read_window(result.extract.window_uri)
    keys = manifest["key_columns"]
    return {tuple(r[k] for k in keys): {k: v for k, v in r.items() if not k.startswith("__$")} for r in rows}


def interrupted_snapshot(
    hook,
    instance,
    base: Path,
    database: str,
    *,
    chunk_rows: int,
    after_chunks: int = 1,
    each_chunk: Callable[[SnapshotProgress], None] | None = None,
) -> SnapshotProgress | None:
    """Run a snapshot that fails after ``after_chunks`` chunks (a lost worker); return its progress file."""

    def on_chunk(progress: SnapshotProgress) -> None:
        if each_chunk is not None:
            each_chunk(progress)
        if len(progress.chunks) == after_chunks:
            raise RuntimeError("worker lost")

    with pytest.raises(RuntimeError, match="worker lost"):
        snapshot_capture_instance(
            hook, instance, output=WindowOutput(str(base), database), chunk_rows=chunk_rows, on_chunk=on_chunk
        )
    return read_progress(pafs.LocalFileSystem(), str(base / instance.name))


class StopWriter(Exception):
    pass


class ConcurrentWriter:
    """Run the seeded workload on its own connection until stopped; ``wait_for_commits`` syncs with it."""

    def __init__(self, db: SourceDb, workload: Workload) -> None:
        self.conn = db.connect()
        self.workload = workload
        self.stop = threading.Event()
        self.committed = 0
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_commit(self, stats) -> None:
        with self.cond:
            self.committed += 1
            self.cond.notify_all()
        if self.stop.is_set():
            raise StopWriter

    def _run(self) -> None:
        try:
            self.workload.run(self.conn, duration=120, on_commit=self._on_commit)
        except StopWriter:
            pass
        except BaseException as err:  # reported by the test
            self.error = err

    def wait_for_commits(self, count: int, timeout: float = 20) -> None:
        with self.cond:
            target = self.committed + count
            assert self.cond.wait_for(lambda: self.committed >= target or self.error is not None, timeout)

    def __enter__(self) -> ConcurrentWriter:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)
        self.conn.close()


def history_until(hook: SqlServerCdcHook, instance, lsn: Lsn, base: Path, database: str) -> dict:
    """The table's rows at ``lsn`` rebuilt from CDC alone: every change from the instance's start up to ``lsn``."""
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow

    tz = hook.get_server_time_zone()
    window = LsnWindow(instance.name, hook.get_min_lsn(instance.name), lsn, "interval")
    result = extract_window(hook, instance, window, base_uri=str(base), tz=tz, database=database)
    target = ReplayTarget()
    target.apply(result.window_uri)
    return target.rows()


def snapshot_rows(window_dir) -> dict:
    """The rows of a snapshot window by key, without the CDC metadata columns."""
    manifest, rows = read_window(window_dir)
    keys = manifest["key_columns"]
    return {tuple(r[k] for k in keys): {k: v for k, v in r.items() if not k.startswith("__$")} for r in rows}
