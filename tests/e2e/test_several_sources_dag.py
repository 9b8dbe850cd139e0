"""
Several sources in one DAG (issue 35 item 5), through the real example DAG ``sqlserver_cdc_several_sources``:
two databases of the simulator, ``sales_eu`` and ``sales_us``, each holding ``dbo.customers`` and
``dbo.orders`` with different rows, replicated by one DAG (``dag.test()`` per run over TDS, spark-submit
of the merge job into Iceberg), a task group per source.

1. The first run snapshots both: each database's tables land in their own namespace
   (``lake.cdc_sales_eu``, ``lake.cdc_sales_us``), through their own staging directory, with their own
   watermark Variables; each target equals its own source.
2. Both databases change; the US source points to a database that does not exist (a wrong setting, as
   when its server is gone): its load plan fails, the EU source's change window is still merged and its
   watermarks committed, and the run fails naming the US source and the error.
3. With the setting fixed, the next run takes the US source's changes of both intervals (its window
   reaches back to its watermark) and the EU source's of its interval: both equal their sources.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import pytest
from cdc_pipeline_harness import PipelineHarness

from airflow_provider_sqlserver_cdc.state import Watermark
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key
from sqlserver_cdc_simulator.workload import SampleDatabase, Workload
from sqlserver_cdc_simulator.workload.sample_tables import SAMPLE_TABLES

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAG_ID = "sqlserver_cdc_several_sources"
SOURCES = {"sales_eu": 20, "sales_us": 35}  # database (= source name) -> initial rows per table
NAMES = ("dbo_customers", "dbo_orders")
TABLES = [t for t in SAMPLE_TABLES if t.qualified_name in ("dbo.customers", "dbo.orders")]


def create_database(harness: PipelineHarness, database: str, rows: int, seed: int) -> tuple[Any, Workload]:
    """A sample database with CDC on dbo.customers and dbo.orders, ``rows`` rows each, its capture job stopped."""
    import pyodbc

    conn = pyodbc.connect(harness.simulator.odbc_connection_string(), autocommit=True)
    SampleDatabase.create(conn, database, tables=TABLES)
    workload = Workload(seed=seed, tables=TABLES)
    for table in TABLES:
        workload.insert_rows(conn, table.qualified_name, rows)
    cursor = conn.cursor()
    cursor.execute("EXEC sys.sp_cdc_stop_job")
    while cursor.nextset():
        pass
    return conn, workload


def capture(harness: PipelineHarness) -> None:
    """Two capture cycles per database: its changes, then the time mapping up to the server clock."""
    for database in SOURCES:
        harness.simulator.run_capture_scan(database)
        harness.simulator.run_capture_scan(database)


def watermarks(harness: PipelineHarness, database: str) -> dict[str, Watermark | None]:
    from airflow.models.variable import Variable

    marks: dict[str, Watermark | None] = {}
    for name in NAMES:
        key = watermark_key(harness.conn_id, database, name)
        raw = Variable.get(key, default_var=None)
        marks[name] = None if raw is None else Watermark.from_json(raw, key=key)
    return marks


def compare(harness: PipelineHarness, spark: Any, database: str) -> None:
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.testing.replication_check import compare_replicated_tables

    hook = SqlServerCdcHook(harness.conn_id, database=database)
    try:
        comparisons = compare_replicated_tables(spark, hook, NAMES, f"lake.cdc_{database}")
    finally:
        hook.close()
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)


def test_two_databases_in_one_dag_one_failing(
    sqlserver_simulator: Any,
    shared_fernet_key: str,
    target_warehouse: Path,
    airflow_db: Path,
    request: pytest.FixtureRequest,
) -> None:
    harness = PipelineHarness(
        sqlserver_simulator, target_warehouse, conn_id=f"e2e_{uuid.uuid4().hex[:8]}", database="sales_eu"
    )
    harness.start_intervals(hours_ago=2)
    start = harness.interval_start
    harness.set_server_time(start(0) - dt.timedelta(seconds=30))
    sources = {
        database: create_database(harness, database, rows, seed=20261128 + i)
        for i, (database, rows) in enumerate(SOURCES.items())
    }

    def write(k: int) -> None:
        """Changes in both databases one second into interval ``k``; the capture job reads them after it."""
        for i, (conn, workload) in enumerate(sources.values()):
            harness.set_server_time(start(k) + dt.timedelta(seconds=1 + i))
            assert workload.run(conn, 10).transactions > 0
        harness.set_server_time(start(k + 1) + dt.timedelta(seconds=1))
        capture(harness)

    def assert_success(result: Any, what: str) -> None:
        assert result.state == "success", f"{what}: DAG run {result.state}\n{result.output[-8000:]}"

    # 1. Both sources snapshot, each into its own namespace, staging directory and watermarks.
    write(0)
    assert_success(harness.run(start(1), dag_id=DAG_ID), "first run (snapshots of both sources)")
    spark = request.getfixturevalue("spark_reader")
    for database in SOURCES:
        compare(harness, spark, database)
        assert all(watermarks(harness, database).values()), database
        assert (harness.staging / database / "dbo_orders").is_dir()
        assert (harness.warehouse / f"cdc_{database}" / "dbo_orders" / "metadata").is_dir()
    assert not (harness.staging / "dbo_orders").exists()

    # 2. The US source is set to a database that does not exist: it fails, the EU source commits its window.
    write(1)
    before = {database: watermarks(harness, database) for database in SOURCES}
    failed = harness.run(start(2), dag_id=DAG_ID, env={"SQLSERVER_CDC_US_DATABASE": "sales_gone"})
    assert failed.state == "failed", failed.output[-6000:]
    states = failed.task_states
    for task_id in ("sales_eu.merge", "sales_eu.commit_watermarks", "sales_eu.run_outcome"):
        assert states.get(task_id) == "success", (task_id, states)
    assert states.get("sales_us.plan") == "failed" and states.get("sales_us.run_outcome") == "failed", states
    head = f"Not every capture instance of source 'sales_us' (connection '{harness.conn_id}', database 'sales_gone')"
    assert head in failed.output, failed.output[-12000:]
    message = failed.output[failed.output.index(head) :]
    line = next((x for x in message.splitlines() if "sales_us.plan failed with" in x), "")
    assert line.startswith("- dbo_customers, dbo_orders: ") and "sales_gone" in line, message[:3000]
    eu_after = watermarks(harness, "sales_eu")
    assert all(eu_after[n].position > before["sales_eu"][n].position for n in NAMES), (before, eu_after)
    assert watermarks(harness, "sales_us") == before["sales_us"]
    compare(harness, spark, "sales_eu")

    # 3. Fixed: the US source takes its changes of both intervals, the EU source those of its interval.
    write(2)
    assert_success(harness.run(start(3), dag_id=DAG_ID), "run after the US source was fixed")
    for database in SOURCES:
        compare(harness, spark, database)
    for conn, _ in sources.values():
        conn.close()
