"""Drive the example DAGs end to end against an in-process simulator whose clock the test controls.

The simulator runs in the test process (the ``sqlserver_simulator`` fixture), so the test moves
the server clock, runs capture scans and starts/stops the capture job. Each DAG run is a real
``dag.test()`` in its own process (testing/dag_runs.py through tests/e2e/run_dag_process.py), like a
worker, forked from a warm server that has imported Airflow once (warm_dag_runs.py): it reaches the
simulator over TDS with pyodbc + FreeTDS, and runs spark-submit for the merge. Nothing of the
pipeline is mocked.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warm_dag_runs import RUNNER, WarmDagRunner

from airflow_provider_sqlserver_cdc.state import Watermark
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.testing.dag_runs import DagTestRun, run_dag_test
from airflow_provider_sqlserver_cdc.testing.example_dag_environment import example_dag_environment
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key
from sqlserver_cdc_simulator.workload.odbc_client import execute_statements

REPO = Path(__file__).resolve().parents[2]
DAGS_FOLDER = REPO / "dags"
INTERVAL_DAG = "sqlserver_cdc_to_iceberg"
WATERMARK_DAG = "sqlserver_cdc_to_iceberg_watermark"
CAPTURE_INSTANCES = ("dbo_customers", "dbo_orders", "dbo_order_lines", "dbo_type_zoo")
NAMESPACE = "lake.cdc"
SERVER_TIME_ZONE = "Asia/Kolkata"  # +05:30: windows must be converted from server local time
MINUTE = dt.timedelta(minutes=1)


@dataclass
class PipelineHarness:
    """
    One replication set-up: a simulator database, an Airflow connection, staging and warehouse dirs.

    :param simulator: the ``sqlserver_simulator`` fixture value.
    :param root: a fresh directory for staging, warehouse and logs.
    :param conn_id: a connection id unique to the test (watermark Variables are keyed by it).
    :param database: the sample database.
    :param first_interval: the start of interval 0 (see :meth:`start_intervals`).
    """

    simulator: Any
    root: Path
    conn_id: str
    database: str = "cdc_sample"
    first_interval: dt.datetime | None = None
    env: dict[str, str] = field(default_factory=dict)
    staging: Path = field(init=False)  # where the windows go
    warehouse: Path = field(init=False)  # the Hadoop catalog ``lake`` of the Iceberg targets

    def __post_init__(self) -> None:
        self.staging, self.warehouse = self.root / "staging", self.root / "warehouse"
        connection = connection_variable(self.conn_id)
        self.env = {
            **os.environ,
            connection: self.simulator.airflow_connection(self.database),
            **example_dag_environment(
                conn_id=self.conn_id,
                staging=self.staging,
                warehouse=self.warehouse,
                poke_interval_seconds=1,
                sensor_timeout_seconds=90,
                retry_delay_seconds=1,
            ),
        }
        # The hook of the comparison (in this process) finds the connection the same way.
        os.environ[connection] = self.env[connection]
        (self.root / "logs").mkdir(parents=True, exist_ok=True)

    # ----------------------------------------------------------------- the source

    def connect(self) -> Any:
        """A new autocommit pyodbc connection to the sample database."""
        import pyodbc

        return pyodbc.connect(self.simulator.odbc_connection_string(database=self.database), autocommit=True)

    def create_cdc_database(self) -> Any:
        """Create the sample database with snapshot isolation allowed and CDC enabled; connect to it."""
        admin = self.simulator.connect()
        try:
            execute_statements(admin, f"CREATE DATABASE [{self.database}]")
        finally:
            admin.close()
        conn = self.connect()
        execute_statements(
            conn,
            f"ALTER DATABASE [{self.database}] SET ALLOW_SNAPSHOT_ISOLATION ON",
            "EXEC sys.sp_cdc_enable_db",
        )
        return conn

    def create_cdc_table(self, *statements: str) -> Any:
        """Create the sample database (:meth:`create_cdc_database`) and run ``statements`` in it (a table,
        CDC enabled on it, its first rows); stop the capture job and capture them. Return the connection."""
        conn = self.create_cdc_database()
        execute_statements(conn, *statements)
        self.set_capture_job(running=False)
        self.capture()
        return conn

    def capture(self) -> None:
        """
        Run two cycles of the capture job synchronously, as the Agent's job would on its own.

        The first reads every committed transaction into the change tables; the second finds the
        log quiet and writes the ``cdc.lsn_time_mapping`` row that carries the high-water mark's
        time up to the server clock (without it the sensor cannot tell that an interval is complete).
        """
        self.simulator.run_capture_scan(self.database)
        self.simulator.run_capture_scan(self.database)

    def set_capture_job(self, running: bool) -> None:
        """Start (Agent up) or stop (Agent down) the database's capture job."""
        conn = self.connect()
        try:
            cursor = conn.cursor()
            cursor.execute("EXEC sys.sp_cdc_start_job" if running else "EXEC sys.sp_cdc_stop_job")
            while cursor.nextset():
                pass
        finally:
            conn.close()

    def set_server_time(self, utc: dt.datetime) -> None:
        """Move the server clock to ``utc`` (it keeps running from there)."""
        self.simulator.clock.set(utc)

    # ----------------------------------------------------------------- minutely intervals in the past

    def start_intervals(self, hours_ago: float) -> None:
        """Put the server in SERVER_TIME_ZONE; interval 0 starts on the whole minute ``hours_ago`` back."""
        self.simulator.clock.set_timezone(SERVER_TIME_ZONE)
        now = dt.datetime.now(dt.UTC)
        self.first_interval = (now - dt.timedelta(hours=hours_ago)).replace(second=0, microsecond=0)

    def start_with_sample_source(self, hours_ago: float, workload: Any, initial_rows: int) -> Any:
        """:meth:`start_intervals`, then create the sample source half a minute before interval 0
        (:func:`create_sample_source`); return its connection for the workload."""
        self.start_intervals(hours_ago)
        self.set_server_time(self.interval_start(0) - dt.timedelta(seconds=30))
        return create_sample_source(self, workload, initial_rows)

    def interval_start(self, k: int) -> dt.datetime:
        """The start of interval ``k`` (UTC); interval ``k`` ends where ``k + 1`` starts."""
        assert self.first_interval is not None, "call start_intervals() first"
        return self.first_interval + k * MINUTE

    def write_interval(self, k: int, workload: Any, conn: Any, transactions: int) -> None:
        """Run ``transactions`` random transactions one second into interval ``k`` (some key updates or deletes)."""
        self.set_server_time(self.interval_start(k) + dt.timedelta(seconds=1))
        stats = workload.run(conn, transactions)
        assert stats.transactions > 0 and stats.rows["key_update"] + stats.rows["delete"] > 0, stats

    def close_interval(self, k: int, *, capture: bool = True) -> None:
        """Move the clock one second past interval ``k``; with ``capture``, the capture job reads it."""
        self.set_server_time(self.interval_start(k + 1) + dt.timedelta(seconds=1))
        if capture:
            self.capture()

    # ----------------------------------------------------------------- the pipeline

    def run(
        self,
        logical_date: dt.datetime,
        *,
        dag_id: str = INTERVAL_DAG,
        kill_extract_of: str | None = None,
        env: dict[str, str] | None = None,
    ) -> DagTestRun:
        """Run a DAG once for ``logical_date`` (minutely: the interval ending then) in its own process.

        :param env: environment variables to set for this run only (e.g. ``SQLSERVER_CDC_ON_GAP``).
        """
        logs = self.root / "logs"
        log_name = f"{dag_id}-{logical_date:%H%M}-{len(list(logs.iterdir())):02d}.log"
        run_env = {**self.env, **(env or {}), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER)}
        warm = WarmDagRunner.shared({**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER)})
        return run_dag_test(
            dag_id,
            dags_folder=DAGS_FOLDER,
            env=run_env,
            logical_date=logical_date,
            log_path=logs / log_name,
            cwd=self.root,
            runner=warm.runner if warm.serves(run_env) else (sys.executable, str(RUNNER)),
            runner_args=("--kill-extract-of", kill_extract_of) if kill_extract_of else (),
        )

    def run_watermark_dag_twice(
        self, make_changes: Callable[[], None], env: dict[str, str] | None = None
    ) -> tuple[DagTestRun, DagTestRun]:
        """Run the watermark DAG (the first run snapshots), ``make_changes()``, capture them, run it again.

        Both runs must succeed. The window does not depend on the run's data interval: the logical
        dates are an hour back and 15 minutes apart (one interval of the DAG's schedule).
        """
        logical_date = an_hour_ago()
        runs = []
        for k, before in enumerate((lambda: None, make_changes)):
            before()
            if k:
                self.capture()
            run = self.run(logical_date + k * dt.timedelta(minutes=15), dag_id=WATERMARK_DAG, env=env)
            assert run.state == "success", run.output[-6000:]
            runs.append(run)
        return runs[0], runs[1]

    def watermarks(self) -> dict[str, str | None]:
        """The watermark LSN of every capture instance (None when not stored)."""
        from airflow.models.variable import Variable

        marks: dict[str, str | None] = {}
        for name in CAPTURE_INSTANCES:
            key = watermark_key(self.conn_id, self.database, name)
            raw = Variable.get(key, default_var=None)
            marks[name] = None if raw is None else Watermark.from_json(raw, key=key).lsn
        return marks

    def applied_range_counts(self) -> dict[str, int]:
        """How many applied LSN ranges each watermark Variable mirrors (one when every window continued the last)."""
        from airflow.models.variable import Variable

        counts = {}
        for name in CAPTURE_INSTANCES:
            key = watermark_key(self.conn_id, self.database, name)
            counts[name] = len(Watermark.from_json(Variable.get(key), key=key).ranges)
        return counts

    def target_snapshot_ids(self) -> dict[str, int | None]:
        """The current Iceberg snapshot id of every target table (from the Hadoop catalog's metadata)."""
        ids: dict[str, int | None] = {}
        for name in CAPTURE_INSTANCES:
            metadata_dir = self.warehouse / "cdc" / name / "metadata"
            hint = metadata_dir / "version-hint.text"
            if not hint.exists():
                ids[name] = None
                continue
            metadata = json.loads((metadata_dir / f"v{hint.read_text().strip()}.metadata.json").read_text())
            ids[name] = metadata.get("current-snapshot-id")
        return ids

    def compare(self, spark: Any) -> list[Any]:
        """Compare every source table with its target (the same check ``make demo`` prints)."""
        from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
        from airflow_provider_sqlserver_cdc.testing.replication_check import compare_replicated_tables

        hook = SqlServerCdcHook(self.conn_id)
        try:
            return compare_replicated_tables(spark, hook, CAPTURE_INSTANCES, NAMESPACE)
        finally:
            hook.close()

    def window_dirs(self, capture_instance: str) -> list[Path]:
        """The window directories written for one capture instance."""
        return sorted(p for p in (self.staging / capture_instance).iterdir() if p.is_dir())


def table_list_variable(dag_id: str, tables: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The environment variable of the Variable ``<dag_id>__tables``: the DAG replicates only ``tables``."""
    return {f"AIRFLOW_VAR_{dag_id.upper()}__TABLES": json.dumps(list(tables))}


def an_hour_ago() -> dt.datetime:
    """The whole minute an hour back (UTC): a logical date of the watermark DAG whose run is due."""
    return (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).replace(second=0, microsecond=0)


def create_sample_source(harness: PipelineHarness, workload: Any, initial_rows: int) -> Any:
    """
    Create the sample database with CDC on its four tables, ``initial_rows`` rows each, and
    snapshot isolation allowed; stop the capture job (the test runs it). Return an autocommit
    pyodbc connection to it for the workload.
    """
    import pyodbc

    from sqlserver_cdc_simulator.workload import SAMPLE_TABLES, SampleDatabase

    conn = pyodbc.connect(harness.simulator.odbc_connection_string(), autocommit=True)
    SampleDatabase.create(conn, harness.database)
    # What a DBA does once so that the initial snapshot can read without blocking writers.
    conn.cursor().execute(f"ALTER DATABASE [{harness.database}] SET ALLOW_SNAPSHOT_ISOLATION ON")
    for table in SAMPLE_TABLES:
        workload.insert_rows(conn, table.qualified_name, initial_rows)
    harness.set_capture_job(running=False)
    harness.capture()
    return conn
