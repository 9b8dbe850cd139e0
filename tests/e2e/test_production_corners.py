"""
Production corners of issue 36, through the real example DAG (simulator over TDS, ``dag.test()`` per
run, spark-submit of the merge job into Iceberg). Two tables are replicated (the DAG's tables
Variable): ``dbo_customers`` and ``dbo_orders``. The test moves the server clock, runs the capture
job and CDC's cleanup (``sys.sp_cdc_cleanup_change_table``), and disables and re-enables a capture
instance, as a DBA or SQL Server Agent would.

1. A quiet table (``dbo_customers``: no change for a run) whose low-water mark the cleanup moves past
   its snapshot LSN is not re-snapshotted: the empty window advanced what the target is known to hold.
2. ``dbo_orders``' low-water mark moved past its watermark: the next run re-snapshots it, saying
   "retention gap" (not "re-created"); the run after it extracts an interval window that starts
   before the snapshot LSN and before the new low-water mark, and applies it (it failed with
   RetentionGapError before).
3. ``dbo_customers`` disabled and enabled again under the same name: re-snapshotted, saying
   "re-created capture instance".
4. The cleanup removes changes of ``dbo_customers`` while the run waits for the capture job (after its
   load plan): its extract fails with RetentionGapError, ``dbo_orders`` is still merged and committed,
   and the run fails naming ``dbo_customers`` and the remedy.

Each time, every replicated table that the run could replicate equals its source.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from cdc_pipeline_harness import INTERVAL_DAG, NAMESPACE, PipelineHarness, table_list_variable

from airflow_provider_sqlserver_cdc.state import Watermark
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key
from sqlserver_cdc_simulator.workload import Workload
from sqlserver_cdc_simulator.workload.sample_tables import SAMPLE_TABLES

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED = 20261128
INITIAL_ROWS = 20
REPLICATED = ("dbo_customers", "dbo_orders")
TABLES_VARIABLE = table_list_variable(INTERVAL_DAG, REPLICATED)


def table(name: str):
    return next(t for t in SAMPLE_TABLES if t.qualified_name == name)


def assert_success(result, what: str) -> None:
    assert result.state == "success", f"{what}: DAG run {result.state}\n{result.output[-8000:]}"


def plan_reason(output: str, name: str) -> str:
    """The load plan's log line for one capture instance: ``<name>: snapshot|extract (<reason>)``."""
    lines = [
        line for line in output.splitlines() if f"{name}: snapshot (" in line or f"{name}: extract (" in line
    ]
    assert lines, f"no load plan line for {name}\n{output[-6000:]}"
    return lines[-1]


def scalar(harness: PipelineHarness, sql: str, *params):
    conn = harness.connect()
    try:
        return conn.cursor().execute(sql, *params).fetchone()[0]
    finally:
        conn.close()


def execute(harness: PipelineHarness, sql: str, *params) -> None:
    conn = harness.connect()
    try:
        cursor = conn.cursor()
        cursor.execute(sql, *params)
        while cursor.nextset():
            pass
    finally:
        conn.close()


def cleanup(harness: PipelineHarness, capture_instance: str, low_water_mark: bytes) -> None:
    """What CDC's cleanup job does: move the instance's low-water mark up, deleting older change rows."""
    execute(
        harness,
        f"EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'{capture_instance}', @low_water_mark = ?",
        low_water_mark,
    )


def watermark(harness: PipelineHarness, name: str) -> Watermark:
    from airflow.models.variable import Variable

    key = watermark_key(harness.conn_id, harness.database, name)
    return Watermark.from_json(Variable.get(key), key=key)


def compare(harness: PipelineHarness, spark, names=REPLICATED) -> None:
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.testing.replication_check import compare_replicated_tables

    hook = SqlServerCdcHook(harness.conn_id)
    try:
        comparisons = compare_replicated_tables(spark, hook, names, NAMESPACE)
    finally:
        hook.close()
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)


def finished_plans(airflow_home: Path) -> int:
    """How many ``plan`` task instances of the DAG have succeeded in the metadata DB (the runs' progress)."""
    with sqlite3.connect(airflow_home / "airflow.db", timeout=30) as db:
        return db.execute(
            "SELECT COUNT(*) FROM task_instance WHERE dag_id = ? AND task_id = 'plan' AND state = 'success'",
            (INTERVAL_DAG,),
        ).fetchone()[0]


def test_production_corners_through_the_example_dag(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    conn = harness.start_with_sample_source(
        hours_ago=2, workload=Workload(seed=SEED), initial_rows=INITIAL_ROWS
    )
    start = harness.interval_start
    zone = harness.simulator.clock.zone

    def local(instant: dt.datetime) -> dt.datetime:
        return instant.astimezone(zone).replace(tzinfo=None)

    def run(k: int, **kwargs):
        return harness.run(start(k), env=TABLES_VARIABLE, **kwargs)

    orders = Workload(seed=SEED + 1, tables=[table("dbo.orders")])
    customers = Workload(seed=SEED + 2, tables=[table("dbo.customers")])

    def write(workload: Workload, at: dt.datetime, transactions: int = 12) -> None:
        harness.set_server_time(at)
        assert workload.run(conn, transactions).transactions > 0

    # Interval 0: the first run snapshots both tables.
    write(orders, start(0) + dt.timedelta(seconds=1))
    harness.close_interval(0)
    assert_success(run(1), "first run (snapshots)")
    snapshot_lsn = watermark(harness, "dbo_customers").position

    # Interval 1: only dbo_orders changes; dbo_customers' window is empty, and it advances its watermark.
    write(orders, start(1) + dt.timedelta(seconds=1))
    harness.close_interval(1)
    assert_success(run(2), "run with an empty window of dbo_customers")
    quiet = watermark(harness, "dbo_customers")
    assert quiet.position > snapshot_lsn, quiet
    # The cleanup moves dbo_customers' low-water mark past its snapshot LSN, to interval 1's last commit.
    interval_1_end = scalar(
        harness, "SELECT sys.fn_cdc_map_time_to_lsn('largest less than', ?)", local(start(2))
    )
    cleanup(harness, "dbo_customers", interval_1_end)
    assert scalar(harness, "SELECT sys.fn_cdc_get_min_lsn(N'dbo_customers')") > snapshot_lsn.value

    # Interval 2: both tables change. Then, early in interval 3, dbo_orders changes again and the cleanup
    # moves its low-water mark to that last change: past its watermark (interval 1's end), a real loss.
    write(orders, start(2) + dt.timedelta(seconds=1))
    write(customers, start(2) + dt.timedelta(seconds=2), transactions=3)
    write(orders, start(3) + dt.timedelta(seconds=2), transactions=6)
    write(orders, start(3) + dt.timedelta(seconds=4), transactions=6)
    harness.capture()
    cleanup(harness, "dbo_orders", scalar(harness, "SELECT MAX([__$start_lsn]) FROM [cdc].[dbo_orders_CT]"))
    third = run(3)
    assert_success(third, "run after the cleanups")
    assert "extract (continue after the watermark" in plan_reason(third.output, "dbo_customers")
    orders_reason = plan_reason(third.output, "dbo_orders")
    assert "dbo_orders: snapshot (retention gap" in orders_reason and "re-created" not in orders_reason
    compare(harness, request.getfixturevalue("spark_reader"))

    # Interval 3: dbo_orders changes once more (its window starts before the re-snapshot's LSN and before
    # the low-water mark); dbo_customers is disabled and enabled again under the same name, with a change
    # in between that CDC never sees.
    write(orders, start(3) + dt.timedelta(seconds=20))
    harness.set_server_time(start(3) + dt.timedelta(seconds=25))
    execute(
        harness,
        "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'customers', "
        "@capture_instance = N'dbo_customers'",
    )
    write(customers, start(3) + dt.timedelta(seconds=26), transactions=2)
    execute(
        harness,
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers', @role_name = NULL, "
        "@capture_instance = N'dbo_customers', @supports_net_changes = 1",
    )
    harness.close_interval(3)
    fourth = run(4)
    assert_success(fourth, "run after the re-snapshot of dbo_orders")
    customers_reason = plan_reason(fourth.output, "dbo_customers")
    assert "dbo_customers: snapshot (re-created capture instance" in customers_reason, customers_reason
    assert "retention gap" not in customers_reason
    assert "extract (continue after the watermark" in plan_reason(fourth.output, "dbo_orders")
    assert "RetentionGapError" not in fourth.output
    compare(harness, request.getfixturevalue("spark_reader"))

    # Interval 4: both change; the capture job has read the changes but not yet the interval's end. While
    # the run waits for it (its load plan done), the cleanup removes dbo_customers' changes of the interval
    # but its last: dbo_customers' extract fails, dbo_orders is merged and committed, the run fails.
    write(orders, start(4) + dt.timedelta(seconds=5))
    write(customers, start(4) + dt.timedelta(seconds=6), transactions=3)
    harness.set_server_time(start(5) + dt.timedelta(seconds=1))
    harness.simulator.run_capture_scan(harness.database)  # the changes, not the interval's end
    orders_before = watermark(harness, "dbo_orders")
    customers_before = watermark(harness, "dbo_customers")
    plans = finished_plans(airflow_db)
    outcome: list = []
    runner = threading.Thread(target=lambda: outcome.append(run(5)))
    runner.start()
    deadline = time.monotonic() + 300
    while finished_plans(airflow_db) == plans:
        assert runner.is_alive() and time.monotonic() < deadline, "the run's load plan did not finish"
        time.sleep(0.5)
    cleanup(
        harness, "dbo_customers", scalar(harness, "SELECT MAX([__$start_lsn]) FROM [cdc].[dbo_customers_CT]")
    )
    harness.capture()
    runner.join(600)
    fifth = outcome[0]
    assert fifth.state == "failed", fifth.output[-6000:]
    assert fifth.task_states.get("merge") == "success", fifth.task_states
    assert fifth.task_states.get("commit_watermarks") == "success", fifth.task_states
    assert fifth.task_states.get("run_outcome") == "failed", fifth.task_states
    message = fifth.output[fifth.output.index("Not every capture instance of this run was replicated") :]
    assert "dbo_customers: extract[" in message and "RetentionGapError" in message, message[:3000]
    assert '{"resnapshot": ["dbo_customers"]}' in message
    assert "merged and their watermarks committed: dbo_orders" in message
    assert watermark(harness, "dbo_orders").position > orders_before.position
    assert watermark(harness, "dbo_customers") == customers_before
    compare(harness, request.getfixturevalue("spark_reader"), names=("dbo_orders",))
    conn.close()
