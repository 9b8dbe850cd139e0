"""
Commit-to-queryable latency of the whole pipeline, batch or continuous apply, on the simulator.

A seeded workload of ``--rate`` transactions/s over ``--tables`` tables (copies of the sample
``dbo.orders``) runs for ``--minutes``; the example DAG ``sqlserver_cdc_to_iceberg`` runs every
minutely interval (``dag.test()``, one process per run, as ``make demo`` does), merging with a Spark
application per run (``--apply batch``) or through the continuous apply application
(``--apply continuous``, docs/continuous-apply.md). For every captured transaction its commit time
(``__$commit_time``, from ``cdc.lsn_time_mapping``) is compared with the commit time of the first
Iceberg snapshot that holds it. Prints::

    commit-to-queryable p50 X s p95 Y s max Z s
      (a) commit to the end of its interval p50 .. s p95 .. s
      (b) end of its interval to queryable p50 .. s p95 .. s
    run wall time median A s max B s; N of M runs finished inside their minute
    apply application driver: peak RSS ... MB (continuous)

(a) is the wait no apply can shorten: a change is extracted only once its minutely data interval
has ended. (b) is the pipeline's own part: the run starting, the sensor, the extract, the
application's poll and its micro-batch. The driver's peak RSS is the JVMs' ``VmHWM`` (the kernel's
high-water mark, so no sampling gap can miss a peak), read every second.

and ends with the source-versus-target table comparison. Everything goes to ``.bench/replication_latency``.

    python benchmarks/replication_latency.py --tables 4 --rate 20 --minutes 10 --apply continuous

``--apply-poll-seconds`` (the application's poll) and ``--poke-seconds`` (the sensor's poke) are
knobs of (b); ``wait_for_apply``'s poll (``merge.apply_poll_seconds``, 2 s) only delays the run's
end, not when the changes become queryable.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import secrets
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DAGS_FOLDER = REPO / "dags"
WORK = REPO / ".bench" / "replication_latency"
CONN_ID = "sqlserver_cdc_bench"
DATABASE = "cdc_bench"


def log(message: str) -> None:
    print(f"[{dt.datetime.now(dt.UTC):%H:%M:%S}] {message}", flush=True)


def bench_tables(count: int) -> list[Any]:
    """``count`` copies of the sample ``dbo.orders`` table: ``dbo.orders_01`` ..."""
    from sqlserver_cdc_simulator.workload.sample_tables import SAMPLE_TABLES

    orders = next(t for t in SAMPLE_TABLES if t.name == "orders")
    return [dataclasses.replace(orders, name=f"orders_{k:02d}") for k in range(1, count + 1)]


def rss_mb(pids: list[int], field: str = "VmRSS") -> float:
    """Resident memory of the given processes, MB (``field``: ``VmRSS`` now, ``VmHWM`` its peak so far)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


class MemoryWatch(threading.Thread):
    """Read the apply application's JVM memory every second: the latest RSS and the peak (``VmHWM``)."""

    def __init__(self, group: int) -> None:
        super().__init__(daemon=True)
        self.group = group
        self.peak = 0.0
        self.rss: list[float] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            pids = java_pids(self.group)
            if pids:
                self.peak = max(self.peak, rss_mb(pids, "VmHWM"))
                self.rss.append(rss_mb(pids))


def interval_end(committed: dt.datetime) -> dt.datetime:
    """The end of the minutely data interval holding a commit time (the schedule is every minute, UTC)."""
    return committed.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)


def decomposed(found: list[Any], values: list[float | None]) -> tuple[list[float], list[float]]:
    """Split each queryable transaction's latency: (a) commit to its interval's end, (b) that end to queryable."""
    waits, rests = [], []
    for transaction, seconds in zip(found, values, strict=True):
        if seconds is None:
            continue
        committed = transaction.committed.replace(tzinfo=dt.UTC)
        wait = (interval_end(committed) - committed).total_seconds()
        waits.append(wait)
        rests.append(seconds - wait)
    return waits, rests


def p50_p95(values: list[float]) -> str:
    from airflow_provider_sqlserver_cdc.testing.replication_latency import percentile

    if not values:
        return "none"
    return f"p50 {statistics.median(values):.1f} s p95 {percentile(values, 0.95):.1f} s"


def java_pids(group: int) -> list[int]:
    """The JVMs in a process group (the apply application's driver)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and b"java" in (stat.parent / "cmdline").read_bytes():
                pids.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1] if __doc__ else None)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--rate", type=float, default=20.0, help="transactions per second over all tables")
    parser.add_argument("--minutes", type=int, default=10, help="minutely DAG runs after the snapshot run")
    parser.add_argument("--apply", choices=("batch", "continuous"), default="continuous")
    parser.add_argument("--initial-rows", type=int, default=500)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--apply-poll-seconds", type=float, default=2.0, help="the application's poll")
    parser.add_argument("--poke-seconds", type=float, default=2.0, help="the sensor's poke interval")
    args = parser.parse_args(argv)

    from airflow_provider_sqlserver_cdc.hooks import odbc_connection
    from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings
    from airflow_provider_sqlserver_cdc.testing import airflow_connections, dag_runs
    from airflow_provider_sqlserver_cdc.testing import replication_latency as latency
    from airflow_provider_sqlserver_cdc.testing.continuous_apply_process import ApplyApplication
    from airflow_provider_sqlserver_cdc.testing.example_dag_environment import (
        example_dag_environment,
        run_example_interval,
    )
    from sqlserver_cdc_simulator.connections import mssql_connection_json
    from sqlserver_cdc_simulator.process import SimulatorProcess
    from sqlserver_cdc_simulator.workload.change_generator import Workload
    from sqlserver_cdc_simulator.workload.sample_database import SampleDatabase

    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "logs").mkdir(parents=True)
    load = os.getloadavg()
    log(
        f"{args.apply} apply, {args.tables} tables, {args.rate:g} transactions/s, {args.minutes} minutes; "
        f"load average {load[0]:.1f} on {os.cpu_count()} cores"
    )
    password = "Bench-" + secrets.token_urlsafe(12)
    simulator = SimulatorProcess.start(password, stderr=WORK / "logs" / "simulator.log")
    app = None
    try:
        tables = bench_tables(args.tables)
        names = [f"{t.schema}_{t.name}" for t in tables]
        import pyodbc

        conn = pyodbc.connect(
            odbc_connection.odbc_connection_string(
                host=simulator.host, port=simulator.port, user="sa", password=password
            ),
            autocommit=True,
        )
        SampleDatabase.create(conn, database=DATABASE, tables=tables)
        workload = Workload(seed=args.seed, tables=tables)
        for table in tables:
            workload.insert_rows(conn, table.qualified_name, args.initial_rows)
        env = {
            **os.environ,
            **dag_runs.airflow_home_environment(WORK / "airflow", dags_folder=DAGS_FOLDER),
            "AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA": "True",
            airflow_connections.connection_variable(CONN_ID): mssql_connection_json(
                simulator.host, simulator.port, "sa", password, DATABASE
            ),
            airflow_connections.connection_variable(
                "spark_default"
            ): airflow_connections.LOCAL_SPARK_CONNECTION,
            **example_dag_environment(
                conn_id=CONN_ID,
                staging=WORK / "staging",
                warehouse=WORK / "warehouse",
                poke_interval_seconds=args.poke_seconds,
                sensor_timeout_seconds=180,
                retry_delay_seconds=5,
            ),
            **dag_runs.interpreter_environment(),
            "AIRFLOW_VAR_SQLSERVER_CDC_TO_ICEBERG__TABLES": json.dumps(names),
            "SQLSERVER_CDC_MERGE_MODE": args.apply,
            "SQLSERVER_CDC_APPLY_TIMEOUT_SECONDS": "300",
            "SQLSERVER_CDC_MAINTENANCE_SCHEDULE": "0 0 1 1 *",  # no maintenance during the benchmark
        }
        os.environ.update(env)
        dag_runs.migrate_metadata_db(env)
        settings = ReplicationSettings.from_yaml(DAGS_FOLDER / "sqlserver_cdc_config.yaml")
        memory: MemoryWatch | None = None
        if args.apply == "continuous":
            app = ApplyApplication.start(
                settings.staging_path,
                settings.merge.namespace,
                dict(settings.spark.conf),
                settings.spark.jars,
                log_path=WORK / "logs" / "continuous-apply.log",
                env=env,
                poll_seconds=args.apply_poll_seconds,
            )
            memory = MemoryWatch(app.process.pid)
            memory.start()
            app.wait_for_log("holding ", timeout=300)
            log("continuous apply application running")

        first_end = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=80)).replace(second=0, microsecond=0)
        last_end = first_end + dt.timedelta(minutes=args.minutes)
        stop_at = time.monotonic() + (last_end - dt.datetime.now(dt.UTC)).total_seconds() - 5
        stats: dict[str, Any] = {}

        def write() -> None:
            stats["workload"] = workload.run(
                conn, duration=max(1.0, stop_at - time.monotonic()), rate=args.rate
            )

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        walls: list[float] = []
        states: list[str] = []
        for number in range(args.minutes + 1):
            end = first_end + dt.timedelta(minutes=number)
            while dt.datetime.now(dt.UTC) < end + dt.timedelta(seconds=2):
                time.sleep(0.5)
            log_path = WORK / "logs" / f"run-{number + 1:02d}.log"
            state, seconds = run_example_interval(DAGS_FOLDER, env, end, log_path=log_path, timeout=600)
            states.append(state)
            if number:  # the first run is the initial snapshot
                walls.append(seconds)
            log(f"run {number + 1}/{args.minutes + 1} ({end:%H:%M}): {state} in {seconds:.0f} s")
        writer.join(timeout=120)
        staging = Path(settings.staging_path)
        directories = latency.table_directories(
            staging, Path(settings.spark.conf["spark.sql.catalog.lake.warehouse"]), settings.merge.namespace
        )
        found = latency.transactions(latency.window_manifests(staging))
        values = latency.latencies(found, latency.histories(directories))
        print()
        print(
            f"{args.apply} apply, {args.tables} tables, {args.rate:g} transactions/s, {args.minutes} minutes "
            f"(load average at the start {load[0]:.1f}, at the end {os.getloadavg()[0]:.1f})"
        )
        print(latency.describe(values))
        waits, rests = decomposed(found, values)
        print(f"  (a) commit to the end of its interval {p50_p95(waits)}")
        print(f"  (b) end of its interval to queryable {p50_p95(rests)}")
        print(f"knobs: application poll {args.apply_poll_seconds:g} s, sensor poke {args.poke_seconds:g} s")
        inside = sum(1 for w in walls if w <= 60)
        if walls:
            print(
                f"run wall time median {statistics.median(walls):.1f} s max {max(walls):.1f} s; "
                f"{inside} of {len(walls)} runs finished inside their minute"
            )
        if memory is not None:
            memory.stopped.set()
            last = f", {memory.rss[-1]:.0f} MB at the end" if memory.rss else ""
            print(f"apply application driver: peak RSS {memory.peak:.0f} MB (VmHWM){last}")
        print(f"runs: {', '.join(states)}; workload: {stats.get('workload')}")
        from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
        from airflow_provider_sqlserver_cdc.testing.local_iceberg import local_spark_session
        from airflow_provider_sqlserver_cdc.testing.replication_check import compare_replicated_tables

        session = local_spark_session(dict(settings.spark.conf), app_name="replication-latency-check")
        try:
            comparisons = compare_replicated_tables(
                session,
                SqlServerCdcHook(CONN_ID),
                names,
                settings.merge.namespace,
                settings.merge.table_name_template,
            )
        finally:
            session.stop()
        for comparison in comparisons:
            print(f"{comparison.source_table}: {comparison.describe(limit=3)}")
        return 0 if all(c.matches for c in comparisons) and all(s == "success" for s in states) else 1
    finally:
        if app is not None:
            app.stop()
        simulator.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(DAGS_FOLDER))
    sys.exit(main())
