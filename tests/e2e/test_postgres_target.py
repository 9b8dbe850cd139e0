"""
The proof for the PostgreSQL target: a seeded random workload, replicated interval by interval
through the real example DAG (``merge.target.kind: postgres`` through the YAML's environment
variables, hard deletes), leaves every PostgreSQL table equal to its SQL Server source: values and
types (``testing.postgres_comparison``). Real pieces only: the simulator over TDS, ``dag.test()``
in its own process per run, spark-submit of the merge job, a real PostgreSQL over JDBC. The
target's login reaches the job only as a private file on the worker (never in argv or the environment).

The workload: inserts (multi-row), updates, deletes, primary-key updates and multi-statement
transactions (``sqlserver_cdc_simulator.workload``), plus, in ``dbo.customers`` (a unique index on ``email``, made on
the target too, as a user would), emails swapped between rows, released by one row and taken by
another, and taken from a deleted row, each in one transaction.

1. Interval 0: the first run snapshots both tables.
2. Interval 1: the run is killed in the middle of the merge. The test holds a row lock on
   ``dbo_order_lines``' row of the bookkeeping table, so that table's apply transaction waits
   there, after its data statements and before its commit; the test then SIGKILLs the DAG run's
   process and everything under it (the spark-submit driver holding the transaction): a worker
   that dies mid-apply. The lock only chooses the moment; the fault is the kill. ``dbo_customers``,
   merged before, has committed (data and applied ranges together), ``dbo_order_lines`` holds
   nothing of the window, and no watermark Variable moved (the watermark task never ran).
3. Interval 2: the next run, as the scheduler makes it. Its extract heals back over interval 1
   (the Variables lag), so ``dbo_customers`` gets a window overlapping what it holds: with hard
   deletes into PostgreSQL that is merged (the deleted-key table keeps every delete's position;
   equal positions are not applied twice), where an Iceberg target refuses it.
4. Interval 1 again, after interval 2 (the killed run re-run as a backfill, out of order): every
   window is already applied, nothing is committed, no watermark moves.

The target equals the source after steps 3 and 4. (Windows merged genuinely out of order, older
changes after newer ones, are proven one level down with the same workload,
tests/spark/merge/targets/test_postgres_replication.py: through the DAG the contiguity guard and
the bookkeeping never let an older window in alone.)
"""

from __future__ import annotations

import json
import random
import signal
import string
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from cdc_pipeline_harness import RUNNER, PipelineHarness

from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.pipeline.table_list import tables_variable_key
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar
from airflow_provider_sqlserver_cdc.testing.postgres_comparison import compare_postgres_tables
from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresServer, postgres_jdbc_jar
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from sqlserver_cdc_simulator.workload import SAMPLE_TABLES, Workload
from sqlserver_cdc_simulator.workload.change_generator import WorkloadMix

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED = 20261125
#: A unique secondary key (customers) and a composite primary key (order_lines): two of the four sample
#: tables, as each table adds a MERGE to every run (every type's exact round trip through a real
#: extraction: tests/spark/merge/targets/test_postgres_replication.py).
TABLES = ("dbo_customers", "dbo_order_lines")
KILLED_TABLE = "cdc.dbo_order_lines"
TRANSACTIONS_PER_INTERVAL = 70
#: More key updates, deletes and statements per transaction than the default mix.
MIX = WorkloadMix(
    insert=0.35, update=0.25, key_update=0.12, unique_key_update=0.1, delete=0.18, max_statements=6
)


def assert_success(result: Any, what: str) -> None:
    assert result.state == "success", f"{what}: DAG run {result.state}\n{result.output[-6000:]}"


def trade_emails(conn: Any, rng: random.Random, workload: Workload) -> None:
    """In one transaction: two pairs of customers swap emails, one takes an email another released, one a deleted row's."""
    cursor = conn.cursor()
    customers = cursor.execute("SELECT customer_id, email FROM dbo.customers ORDER BY customer_id").fetchall()
    a, b, c, d, e, f, g, h = rng.sample([tuple(row) for row in customers], 8)

    def set_email(key: int, email: str) -> None:
        cursor.execute("UPDATE dbo.customers SET email = ? WHERE customer_id = ?", email, key)

    conn.autocommit = False
    try:
        for (x, x_email), (y, y_email) in ((a, b), (c, d)):  # a swap through a temporary value
            set_email(x, "swapping@example.org")
            set_email(y, x_email)
            set_email(x, y_email)
        set_email(e[0], "".join(rng.choices(string.ascii_lowercase, k=12)) + "@example.org")  # e releases
        set_email(f[0], e[1])  # f takes e's old email (and releases its own)
        cursor.execute("DELETE FROM dbo.customers WHERE customer_id = ?", g[0])
        set_email(h[0], g[1])  # h takes the deleted row's email
        conn.commit()
    finally:
        conn.autocommit = True
    workload.load_model(conn)  # the workload draws its next statements from the rows as they are now


def bookkeeping(pg: Any) -> dict[str, tuple[str, Any]]:
    """Target table -> (applied LSN ranges, updated_at) of the bookkeeping table."""
    rows = pg.execute("SELECT target_table, applied_lsn_ranges, updated_at FROM cdc._cdc_applied_lsn_ranges")
    return {table: (ranges, updated) for table, ranges, updated in rows.fetchall()}


def asset_events(uri: str) -> list[dict[str, Any]]:
    """The extras of the asset events of ``uri`` in the Airflow database, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetEvent.extra)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
        ).all()
    return [dict(extra) for (extra,) in rows]


def apply_transaction(pg: Any, table: str) -> str:
    """The transaction that last wrote the table's bookkeeping rows (the asset events' marker)."""
    return pg.execute(
        "SELECT xmin::text FROM cdc._cdc_applied_lsn_ranges WHERE target_table = %s", [table]
    ).fetchone()[0]


def table_digest(pg: Any, table: str) -> str:
    """A digest of every row of a target table, change columns included."""
    return pg.execute(
        f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table} t"
    ).fetchone()[0]


class ApplyKiller(threading.Thread):
    """Wait until the apply of ``KILLED_TABLE`` waits on the test's lock, then SIGKILL the DAG run's process tree.

    :param postgres_server: the target's server.
    :param database: the target database.
    :param harness: the set-up whose DAG run (``run_dag_process.py`` in ``harness.root``) is killed.
    """

    def __init__(self, postgres_server: PostgresServer, database: str, harness: PipelineHarness) -> None:
        super().__init__(daemon=True)
        self.server, self.database, self.harness = postgres_server, database, harness
        self.killed: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with self.server.connect(self.database) as pg:
            while not self.stop.wait(0.2):
                waiting = pg.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE '%_cdc_applied_lsn_ranges%FOR UPDATE'"
                ).fetchone()[0]
                if waiting:
                    self._kill_dag_run()
                    return

    def _kill_dag_run(self) -> None:
        runners = [
            p
            for p in psutil.process_iter(["cmdline", "cwd"])
            if str(RUNNER) in (p.info["cmdline"] or []) and p.info["cwd"] == str(self.harness.root)
        ]
        for runner in runners:
            tree = [runner, *runner.children(recursive=True)]
            for process in tree:
                try:
                    self.killed.append(" ".join(process.cmdline()))
                    process.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    pass


def wait_until_no_backend_waits(pg: Any, seconds: float = 30) -> None:
    """Wait until the killed driver's transaction is gone (PostgreSQL rolls it back when it finds the client dead)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = pg.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND query LIKE '%_cdc_applied_lsn_ranges%FOR UPDATE'"
        ).fetchone()[0]
        if not left:
            return
        time.sleep(0.2)
    raise AssertionError("the killed driver's apply transaction is still open")


def compare(postgres_server: PostgresServer, database: str, harness: PipelineHarness) -> list[Any]:
    hook = SqlServerCdcHook(harness.conn_id)
    try:
        with postgres_server.connect(database) as pg:
            return compare_postgres_tables(pg, hook, TABLES, "cdc")
    finally:
        hook.close()


def test_example_dag_replicates_into_postgresql_through_a_kill_a_heal_and_a_backfill(
    pipeline_harness: PipelineHarness, postgres_server: PostgresServer, airflow_db: Path
) -> None:
    harness = pipeline_harness
    database = postgres_server.create_database("e2e_target")
    harness.env.update(
        {
            "SQLSERVER_CDC_TARGET_KIND": "postgres",
            "SQLSERVER_CDC_TARGET_CONN_ID": "pg_e2e",
            "SQLSERVER_CDC_NAMESPACE": "cdc",
            "SQLSERVER_CDC_DELETE_MODE": "hard",
            "SQLSERVER_CDC_SPARK_JARS": f"{iceberg_runtime_jar()},{postgres_jdbc_jar()}",
            connection_variable("pg_e2e"): postgres_server.airflow_connection(database),
            f"AIRFLOW_VAR_{tables_variable_key('sqlserver_cdc_to_iceberg').upper()}": json.dumps(TABLES),
        }
    )
    conn = harness.start_with_sample_source(hours_ago=2, workload=Workload(seed=SEED), initial_rows=30)
    start = harness.interval_start
    workload = Workload(seed=SEED, tables=[t for t in SAMPLE_TABLES if t.capture_instance in TABLES], mix=MIX)
    rng = random.Random(SEED)
    outputs = []

    # Interval 0: the first run snapshots both tables.
    harness.write_interval(0, workload, conn, TRANSACTIONS_PER_INTERVAL)
    harness.close_interval(0)
    result = harness.run(start(1))
    assert_success(result, "first run (snapshots)")
    outputs.append(result.output)
    with postgres_server.connect(database) as pg:  # the user's unique index, as on the source
        pg.execute("CREATE UNIQUE INDEX customers_email ON cdc.dbo_customers (email)")
    marks = harness.watermarks()

    # Interval 1: the DAG run is killed while the merge's apply of dbo_order_lines waits before its commit.
    harness.write_interval(1, workload, conn, TRANSACTIONS_PER_INTERVAL)
    trade_emails(conn, rng, workload)
    harness.close_interval(1)
    with postgres_server.connect(database) as pg:
        before = bookkeeping(pg)
        zoo_before = table_digest(pg, KILLED_TABLE)
    lock = postgres_server.connect(database, autocommit=False)
    lock.execute(
        "SELECT 1 FROM cdc._cdc_applied_lsn_ranges WHERE target_table = %s FOR UPDATE", [KILLED_TABLE]
    ).fetchall()
    killer = ApplyKiller(postgres_server, database, harness)
    killer.start()
    try:
        killed = harness.run(start(2))
    finally:
        killer.stop.set()
        killer.join()
        lock.rollback()
        lock.close()
    assert killer.killed, f"the apply never waited on the lock\n{killed.output[-6000:]}"
    assert killed.state is None and killed.returncode == -signal.SIGKILL, killed.output[-3000:]
    # The worker, the spark-submit JVM (the driver holding the JDBC transaction) and the job's Python process.
    assert any("org.apache.spark.deploy.SparkSubmit" in cmd for cmd in killer.killed), killer.killed
    assert any("merge_job.py" in cmd for cmd in killer.killed), killer.killed
    outputs.append(killed.output)
    with postgres_server.connect(database) as pg:
        wait_until_no_backend_waits(pg)
        after_kill = bookkeeping(pg)
        assert table_digest(pg, KILLED_TABLE) == zoo_before  # nothing of its apply committed
    assert after_kill[KILLED_TABLE] == before[KILLED_TABLE]
    committed = [t for t in after_kill if t != KILLED_TABLE and after_kill[t][0] != before[t][0]]
    assert committed == ["cdc.dbo_customers"], (before, after_kill)
    assert harness.watermarks() == marks  # the watermark task never ran

    # Interval 2: the next run heals back over interval 1; dbo_customers gets a window overlapping what it holds.
    harness.write_interval(2, workload, conn, TRANSACTIONS_PER_INTERVAL)
    trade_emails(conn, rng, workload)
    harness.close_interval(2)
    result = harness.run(start(3))
    assert_success(result, "the run after the killed one")
    outputs.append(result.output)
    assert result.output.count("healing a gap") >= len(TABLES), result.output[-6000:]
    # dbo_customers' window starts inside what the killed run committed to it (hard deletes, not in LSN order).
    window = max(harness.window_dirs("dbo_customers"), key=lambda d: d.name.split("_")[1]).name
    assert window.split("_")[0] <= after_kill["cdc.dbo_customers"][0].split("-")[-1], (window, after_kill)
    comparisons = compare(postgres_server, database, harness)
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    marks = harness.watermarks()
    with postgres_server.connect(database) as pg:
        applied = bookkeeping(pg)
        deleted_keys = {
            t: pg.execute(f"SELECT count(*) FROM {t}_cdc_deleted_keys").fetchone()[0]
            for t in ("cdc.dbo_customers", KILLED_TABLE)
        }
    assert all("," not in ranges for ranges, _ in applied.values()), applied  # one range each
    assert all(deleted_keys.values()), deleted_keys  # hard deletes (and key updates) went through it
    # Asset events: the merge's outlet is an alias (the host is in the connection); each run adds the
    # postgres:// asset its connection resolves to, with the apply transaction's id as the marker.
    customers_uri = f"postgres://{postgres_server.host}:{postgres_server.port}/{database}/cdc/dbo_customers"
    with postgres_server.connect(database) as pg:
        xid = apply_transaction(pg, "cdc.dbo_customers")
    events = asset_events(customers_uri)
    assert [e["snapshot"] for e in events] == [True, False], (
        events
    )  # the snapshot run, interval 2 (not the kill)
    assert events[-1]["transaction"] == {"xid": xid} and events[-1]["snapshot_id"] is None
    assert events[-1]["partition_key"] == start(2).strftime("%Y-%m-%dT%H:%M:%S")
    assert events[-1]["lsn_ranges"][0]["applied_now"] and events[-1]["healed_gap"]

    # Interval 1 again, after interval 2: a backfill of the killed run. Every window is applied already.
    result = harness.run(start(2))
    assert_success(result, "re-run of the killed interval")
    outputs.append(result.output)
    with postgres_server.connect(database) as pg:
        assert bookkeeping(pg) == applied  # not even the bookkeeping was written
    assert harness.watermarks() == marks
    replayed = asset_events(customers_uri)[-1]  # the same marker: no new transaction
    assert replayed["transaction"] == {"xid": xid} and not replayed["lsn_ranges"][0]["applied_now"]
    assert replayed["partition_key"] == start(1).strftime("%Y-%m-%dT%H:%M:%S")
    comparisons = compare(postgres_server, database, harness)
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    assert all(c.source_rows > 0 and c.deleted_rows == 0 for c in comparisons), describe_all(comparisons)
    assert not any(postgres_server.password in output for output in outputs)
    conn.close()
