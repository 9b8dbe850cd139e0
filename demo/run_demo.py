"""
``make demo``: the whole pipeline on this machine, against the SQL Server CDC simulator.

1. starts the simulator (``python -m sqlserver_cdc_simulator --port 0``),
   creates the sample database with CDC enabled and starts the seeded workload generator;
2. starts the continuous apply application (``spark/continuous_apply_job.py`` through spark-submit,
   docs/continuous-apply.md; ``--apply batch``: none, each run spark-submits the merge job);
3. runs the example DAG ``sqlserver_cdc_to_iceberg`` with a minutely schedule for several
   consecutive intervals (``dag.test()``, one process per run, logs in ``.demo/logs/``): the first
   run snapshots every table, the next ones extract each minute's changes, which the apply
   application merges into Iceberg while the run waits for them; per run it prints the wall time
   and the commit-to-queryable latency of the run's changes;
4. the last run also maintains the targets (CdcTableMaintenanceOperator, docs/maintenance.md): the
   demo prints each table's figures before and after it from that run's log;
5. prints per table the changes captured, the rows in the target, the lag, and the
   source-versus-target comparison (MATCH or the differences);
6. stops everything it started.

Everything it writes lives in ``.demo/`` (Airflow home, staging, warehouse, logs); the simulator keeps
its databases in memory.
Exit status 0 only when every table matches.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from airflow_provider_sqlserver_cdc.hooks import odbc_connection
from airflow_provider_sqlserver_cdc.testing import airflow_connections, dag_runs
from airflow_provider_sqlserver_cdc.testing.example_dag_environment import (
    example_dag_environment,
    run_example_interval,
)
from sqlserver_cdc_simulator.connections import mssql_connection_json
from sqlserver_cdc_simulator.process import SimulatorProcess, SimulatorStartError

REPO = Path(__file__).resolve().parent.parent
DAGS_FOLDER = REPO / "dags"
DEMO_DIR = REPO / ".demo"
CONN_ID = "sqlserver_cdc_demo"
DATABASE = "cdc_sample"
SERVER_TIME_ZONE = "Asia/Kolkata"  # not UTC on purpose: windows are converted from server local time


def log(message: str) -> None:
    """One progress line, with the wall-clock time."""
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", flush=True)


def demo_environment(host: str, port: int, password: str) -> dict[str, str]:
    """The environment of Airflow, the DAG and Spark for the demo (everything under .demo/)."""
    try:
        example_dag = example_dag_environment(
            conn_id=CONN_ID,
            staging=DEMO_DIR / "staging",
            warehouse=DEMO_DIR / "warehouse",
            poke_interval_seconds=2,
            sensor_timeout_seconds=180,
            retry_delay_seconds=5,
        )
    except FileNotFoundError as err:  # no Iceberg runtime jar: the message says what to install
        raise SystemExit(str(err)) from None
    return {
        **dag_runs.airflow_home_environment(DEMO_DIR / "airflow", dags_folder=DAGS_FOLDER),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # The simulator connection names its driver (FreeTDS: the simulator speaks no TLS) in the extra.
        "AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA": "True",
        airflow_connections.connection_variable(CONN_ID): mssql_connection_json(
            host, port, "sa", password, DATABASE
        ),
        airflow_connections.connection_variable("spark_default"): airflow_connections.LOCAL_SPARK_CONNECTION,
        **example_dag,
        **dag_runs.interpreter_environment(),
    }


def odbc_connection_string(host: str, port: int, password: str) -> str:
    """The FreeTDS connection string the workload generator uses (contains the password: never print it)."""
    return odbc_connection.odbc_connection_string(host=host, port=port, user="sa", password=password)


class Processes:
    """The processes the demo started; all stopped on exit, newest first."""

    def __init__(self) -> None:
        self.started: list[tuple[str, subprocess.Popen[Any]]] = []

    def add(self, name: str, process: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
        self.started.append((name, process))
        return process

    def stop_all(self) -> None:
        for name, process in reversed(self.started):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                log(f"stopped {name} (pid {process.pid})")
        self.started.clear()


def start_simulator(processes: Processes, password: str) -> tuple[str, int]:
    """Start the simulator on a free port; return (host, port) from its ``READY host:port`` line."""
    try:
        simulator = SimulatorProcess.start(
            password, "--timezone", SERVER_TIME_ZONE, stderr=DEMO_DIR / "logs" / "simulator.log"
        )
    except SimulatorStartError as err:
        raise SystemExit(str(err)) from None
    processes.add("simulator", simulator.process)
    return simulator.host, simulator.port


def run_workload_command(env: dict[str, str], *args: str, log_name: str, wait: bool = True) -> Any:
    """Run ``python -m sqlserver_cdc_simulator.workload ARGS`` (output in .demo/logs)."""
    output = open(DEMO_DIR / "logs" / log_name, "w")  # noqa: SIM115 - closed with the process
    command = [sys.executable, "-m", "sqlserver_cdc_simulator.workload", *args]
    process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    if not wait:
        return process
    if process.wait() != 0:
        raise SystemExit(f"workload {args[0]} failed; see {DEMO_DIR / 'logs' / log_name}")
    return (DEMO_DIR / "logs" / log_name).read_text().strip()


def allow_snapshot_isolation(connection_string: str) -> None:
    """What a DBA does once so that the initial snapshot can read without blocking writers."""
    import pyodbc

    conn = pyodbc.connect(connection_string, autocommit=True)
    try:
        conn.cursor().execute(f"ALTER DATABASE [{DATABASE}] SET ALLOW_SNAPSHOT_ISOLATION ON")
    finally:
        conn.close()
    log(f"allowed snapshot isolation in {DATABASE} (the initial snapshot reads under it)")


def windows_summary(staging: Path, capture_instance: str) -> dict[str, int]:
    """Rows per kind and operation over the windows the demo wrote for one capture instance."""
    totals = {"snapshot_rows": 0, "windows": 0, "insert": 0, "update_after": 0, "delete": 0}
    for manifest_path in sorted((staging / capture_instance).glob("*/_manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        if manifest["kind"] == "snapshot":
            totals["snapshot_rows"] += manifest["row_count"]
            continue
        totals["windows"] += 1
        for name in ("insert", "update_after", "delete"):
            totals[name] += manifest["operation_counts"].get(name, 0)
    return totals


@contextlib.contextmanager
def spark_session(settings: Any) -> Iterator[Any]:
    """A local Spark session with the DAG's Iceberg catalog, to read the targets."""
    from airflow_provider_sqlserver_cdc.testing.local_iceberg import local_spark_session

    # The DAG's own settings (catalog, warehouse, shuffle partitions): the demo reads what it wrote.
    session = local_spark_session(dict(settings.spark.conf), app_name="sqlserver-cdc-demo-check")
    try:
        yield session
    finally:
        session.stop()


def postgres_environment(server: Any) -> dict[str, str]:
    """The variables that turn the example DAG's target into PostgreSQL (``--target postgres``)."""
    from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar
    from airflow_provider_sqlserver_cdc.testing.postgres_server import postgres_jdbc_jar

    database = server.create_database("demo_target")
    return {
        "SQLSERVER_CDC_TARGET_KIND": "postgres",
        "SQLSERVER_CDC_TARGET_CONN_ID": "demo_postgres",
        "SQLSERVER_CDC_NAMESPACE": "cdc",
        "SQLSERVER_CDC_SPARK_JARS": f"{iceberg_runtime_jar()},{postgres_jdbc_jar()}",
        airflow_connections.connection_variable("demo_postgres"): server.airflow_connection(database),
    }


@contextlib.contextmanager
def target_comparisons(settings: Any, hook: Any, postgres: Any) -> Iterator[list[Any]]:
    """Compare every table with its target: Iceberg read with Spark, or PostgreSQL read with psycopg."""
    merge = settings.merge
    if postgres is not None:
        from airflow_provider_sqlserver_cdc.testing.postgres_comparison import compare_postgres_tables

        with postgres.connect("demo_target") as pg:
            yield compare_postgres_tables(
                pg, hook, settings.tables, merge.namespace, merge.table_name_template
            )
        return
    from airflow_provider_sqlserver_cdc.testing.replication_check import compare_replicated_tables

    with spark_session(settings) as spark:
        yield compare_replicated_tables(
            spark, hook, settings.tables, merge.namespace, merge.table_name_template
        )


def summarize(settings: Any, postgres: Any = None) -> bool:
    """Print the per-table summary; return whether every table matches its source."""
    from airflow.models.variable import Variable

    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.state import Watermark
    from airflow_provider_sqlserver_cdc.window.change_window import watermark_key

    hook = SqlServerCdcHook(CONN_ID)
    status = hook.get_capture_job_status()
    tz = hook.get_server_time_zone()
    server_now_utc = tz.to_utc(status.server_now.replace(tzinfo=None))
    staging = Path(settings.staging_path)
    all_match = True
    print()
    print("=" * 100)
    print(f"capture job: {status.describe()}")
    print("=" * 100)
    with target_comparisons(settings, hook, postgres) as comparisons:
        names = settings.tables
        for name, comparison in zip(names, comparisons, strict=True):
            counts = windows_summary(staging, name)
            key = watermark_key(CONN_ID, hook.database, name)
            raw = Variable.get(key, default_var=None)  # from the metadata DB (outside any task)
            mark = None if raw is None else Watermark.from_json(raw, key=key)
            if mark is not None and mark.commit_time:
                behind = server_now_utc - dt.datetime.fromisoformat(mark.commit_time)
                lag = f"target holds changes up to {mark.commit_time} ({behind.total_seconds():.0f} s behind the source)"
            else:
                lag = f"watermark {mark.lsn if mark else 'none'}"
            all_match = all_match and comparison.matches
            print(f"\n{comparison.source_table}  (capture instance {name} -> {comparison.target_table})")
            print(
                f"  captured: snapshot {counts['snapshot_rows']} rows, then {counts['windows']} change windows with "
                f"{counts['insert']} inserts, {counts['update_after']} updates, {counts['delete']} deletes"
            )
            print(
                f"  target:   {comparison.target_rows} live rows, {comparison.deleted_rows} soft-deleted rows"
            )
            print(f"  lag:      {lag}")
            print("  check:    " + comparison.describe(limit=5).replace("\n", "\n            "))
    print()
    print("=" * 100)
    print("RESULT: every table MATCHES its source" if all_match else "RESULT: DIFFERENCES found (see above)")
    print("=" * 100)
    return all_match


def print_maintenance(run_log: Path) -> None:
    """Print the maintenance job's figures per table (before and after) from a run's log."""
    marks = ("before: ", "after maintenance: ", "no maintenance needed: ", "expiring snapshots: ")
    lines = [
        line for line in run_log.read_text(errors="replace").splitlines() if any(m in line for m in marks)
    ]
    log(f"table maintenance in the last run ({run_log.name}): " + ("" if lines else "no figures in the log"))
    for line in lines:
        text = line[line.find("table ") :] if "table " in line else line
        print("    " + text.split(" [airflow.")[0])  # without the task log's logger suffix


def start_apply_application(settings: Any, env: dict[str, str]) -> Any:
    """Start the continuous apply application on the demo's staging path; wait until it holds the path's lock."""
    from airflow_provider_sqlserver_cdc.testing.continuous_apply_process import ApplyApplication

    app = ApplyApplication.for_settings(
        settings, log_path=DEMO_DIR / "logs" / "continuous-apply.log", env=env
    )
    log("starting the continuous apply application (Spark, log in .demo/logs/continuous-apply.log)")
    try:
        app.wait_for_log("holding ", timeout=300)
    except (RuntimeError, TimeoutError) as err:
        app.kill()
        raise SystemExit(f"the continuous apply application did not start: {err}") from None
    log(f"continuous apply application running (pid {app.process.pid})")
    return app


def run_latency(settings: Any, manifests: list[Path]) -> str:
    """Commit-to-queryable latency of the changes in the given windows, from the target tables' snapshots."""
    from airflow_provider_sqlserver_cdc.testing import replication_latency as latency

    staging = Path(settings.staging_path)
    warehouse = Path(settings.spark.conf["spark.sql.catalog.lake.warehouse"])
    directories = latency.table_directories(
        staging, warehouse, settings.merge.namespace, settings.merge.table_name_template
    )
    found = latency.transactions(manifests)
    return latency.describe(latency.latencies(found, latency.histories(directories)))


def next_boundary(after: dt.datetime) -> dt.datetime:
    """The first whole minute at or after ``after``."""
    floor = after.replace(second=0, microsecond=0)
    return floor if floor >= after else floor + dt.timedelta(minutes=1)


def sleep_until(moment: dt.datetime) -> None:
    """Wait until the wall clock passes ``moment`` (UTC)."""
    while (remaining := (moment - dt.datetime.now(dt.UTC)).total_seconds()) > 0:
        time.sleep(min(remaining, 5))


def main(argv: list[str] | None = None) -> int:
    """Run the demo."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--intervals", type=int, default=4, help="minutely runs after the initial snapshot run"
    )
    parser.add_argument("--rate", type=float, default=15.0, help="workload transactions per second")
    parser.add_argument("--initial-rows", type=int, default=200, help="rows per table before the first run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--apply",
        choices=("continuous", "batch"),
        default="continuous",
        help="continuous (default): a long-running apply application merges the windows as they land; "
        "batch: each run spark-submits the merge job",
    )
    parser.add_argument(
        "--target",
        choices=("iceberg", "postgres"),
        default="iceberg",
        help="postgres: replicate into a throw-away PostgreSQL instead (docs/targets-postgres.md)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()

    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    (DEMO_DIR / "logs").mkdir(parents=True)
    password = "Demo-" + secrets.token_urlsafe(12)  # throwaway; lives only in this process tree's env
    processes = Processes()
    postgres = None
    apply_application = None
    if args.target == "postgres" and args.apply == "continuous":
        log("--target postgres runs the batch merge (the demo starts the apply application for Iceberg only)")
        args.apply = "batch"
    try:
        log("starting the SQL Server CDC simulator")
        host, port = start_simulator(processes, password)
        log(f"simulator ready on {host}:{port} (server time zone {SERVER_TIME_ZONE})")
        env = {**os.environ, **demo_environment(host, port, password)}
        if args.target == "postgres":
            from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresServer

            postgres = PostgresServer.start()
            env.update(postgres_environment(postgres))
            log(f"PostgreSQL target on {postgres.host}:{postgres.port}, schema cdc")
        os.environ.update(env)  # this process reads Variables and the source for the summary
        source_env = {**env, "SQLSERVER_CDC_ODBC": odbc_connection_string(host, port, password)}

        log("migrating the demo's Airflow metadata database (.demo/airflow)")
        dag_runs.migrate_metadata_db(env)
        log(f"creating database {DATABASE} with CDC on 4 tables, {args.initial_rows} rows each")
        run_workload_command(
            source_env,
            "create",
            "--database",
            DATABASE,
            "--initial-rows",
            str(args.initial_rows),
            log_name="workload-create.log",
        )

        allow_snapshot_isolation(source_env["SQLSERVER_CDC_ODBC"])

        first_end = next_boundary(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=20))
        last_end = first_end + dt.timedelta(minutes=args.intervals)
        duration = (last_end - dt.datetime.now(dt.UTC)).total_seconds() - 8
        log(
            f"workload: {args.rate:g} transactions/s (seed {args.seed}) until {last_end - dt.timedelta(seconds=8):%H:%M:%S} UTC"
        )
        workload = processes.add(
            "workload generator",
            run_workload_command(
                source_env,
                "run",
                "--database",
                DATABASE,
                "--duration",
                f"{duration:.0f}",
                "--rate",
                str(args.rate),
                "--seed",
                str(args.seed),
                log_name="workload-run.log",
                wait=False,
            ),
        )

        from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings

        # The last run also maintains the targets (docs/maintenance.md): its interval holds the
        # maintenance schedule's time, and one position-delete file makes a table due.
        env["SQLSERVER_CDC_MAINTENANCE_SCHEDULE"] = f"{last_end.minute} {last_end.hour} * * *"
        env["SQLSERVER_CDC_MAINTENANCE_MIN_DELETE_FILES"] = "1"
        env["SQLSERVER_CDC_MERGE_MODE"] = args.apply
        env["SQLSERVER_CDC_APPLY_TIMEOUT_SECONDS"] = "240"
        os.environ.update(env)
        settings = ReplicationSettings.from_yaml(DAGS_FOLDER / "sqlserver_cdc_config.yaml")  # with this env
        if args.apply == "continuous":
            apply_application = start_apply_application(settings, env)
        from airflow_provider_sqlserver_cdc.testing.replication_latency import window_manifests

        states = []
        seen = set(window_manifests(Path(settings.staging_path)))
        for number in range(args.intervals + 1):
            end = first_end + dt.timedelta(minutes=number)
            sleep_until(end + dt.timedelta(seconds=2))
            what = "snapshot of every table" if number == 0 else "change windows"
            log(
                f"run {number + 1}/{args.intervals + 1}: interval {end - dt.timedelta(minutes=1):%H:%M}-{end:%H:%M} UTC ({what})"
            )
            state, seconds = run_example_interval(
                DAGS_FOLDER,
                env,
                end,
                log_path=DEMO_DIR / "logs" / f"run-{number + 1:02d}-{end:%H%M}.log",
                timeout=480,
            )
            states.append(state)
            windows = [m for m in window_manifests(Path(settings.staging_path)) if m not in seen]
            seen.update(windows)
            within = "inside" if seconds <= 60 else "NOT inside"
            latency = f"; {run_latency(settings, windows)}" if windows else ""
            log(f"    -> {state} in {seconds:.0f} s ({within} its minute){latency}")
        if workload.wait(timeout=120) != 0:
            log("the workload generator failed; see .demo/logs/workload-run.log")
        log("workload: " + (DEMO_DIR / "logs" / "workload-run.log").read_text().strip().splitlines()[-1])
        print_maintenance(sorted((DEMO_DIR / "logs").glob("run-*.log"))[-1])
        matches = summarize(settings, postgres)
        failed = [s for s in states if s != "success"]
        if failed:
            print(f"{len(failed)} DAG run(s) did not succeed: logs in {DEMO_DIR / 'logs'}")
        log(f"demo finished in {time.monotonic() - started:.0f} s")
        return 0 if matches and not failed else 1
    finally:
        if apply_application is not None:
            log(f"stopped the continuous apply application (exit {apply_application.stop()})")
        processes.stop_all()
        if postgres is not None:
            postgres.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(DAGS_FOLDER))
    sys.exit(main())
