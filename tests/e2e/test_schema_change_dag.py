"""
Schema changes on a live source through the example DAG on the simulator: the pipeline follows an
``ALTER TABLE … ADD``, a widening ``ALTER COLUMN`` and a ``DROP COLUMN`` by switching capture
instances on its own (``extract.create_capture_instance`` and ``extract.disable_old_capture_instance``
on) or picking up the instance a DBA created by hand between runs (both off), back-filling the rows changed in the blind spot by primary key, and the target equals the
source, new column included (the project's table comparison). Re-running an interval across the
switch leaves the target unchanged. Real pieces only (see cdc_pipeline_harness).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from cdc_pipeline_harness import INTERVAL_DAG, NAMESPACE, PipelineHarness, table_list_variable

from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.testing.replication_check import compare_replicated_tables
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from sqlserver_cdc_simulator.workload import Workload
from sqlserver_cdc_simulator.workload.odbc_client import execute_statements as execute

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Only dbo.customers is replicated (the DAG's <dag_id>__tables Variable, from the environment): one merge a run.
ONLY_CUSTOMERS = table_list_variable(INTERVAL_DAG, ["dbo_customers"])
CREATE = {**ONLY_CUSTOMERS, "SQLSERVER_CDC_CREATE_CAPTURE_INSTANCE": "true"}
OPT_IN = {**CREATE, "SQLSERVER_CDC_DISABLE_OLD_CAPTURE_INSTANCE": "true"}


def compare(harness: PipelineHarness, spark) -> list:
    """``dbo.customers`` by its source table (its newest capture instance), every column the source has now."""
    hook = SqlServerCdcHook(harness.conn_id)
    try:
        return compare_replicated_tables(spark, hook, ["dbo.customers"], NAMESPACE)
    finally:
        hook.close()


def instances(harness: PipelineHarness) -> list[str]:
    hook = SqlServerCdcHook(harness.conn_id)
    try:
        return sorted(i.name for i in hook.get_capture_instances() if i.source_table == "customers")
    finally:
        hook.close()


def test_add_widen_and_drop_are_followed_through_instance_switches(
    pipeline_harness: PipelineHarness, airflow_db, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    workload = Workload(seed=19)
    # The source is created half a minute before interval 0 (LSN times rise with LSNs, as on a server).
    conn = harness.start_with_sample_source(hours_ago=1, workload=workload, initial_rows=20)
    spark = request.getfixturevalue("spark_reader")

    # interval 0: the first run snapshots the tables and merges the interval
    harness.write_interval(0, workload, conn, 10)
    harness.close_interval(0)
    first = harness.run(harness.interval_start(1), env=OPT_IN)
    assert first.state == "success", first.output[-6000:]

    # interval 1: ADD a column, and one with a default that fills every row without a change event (re-read
    # from the source once by the rows holding a value); then rows change only inside the blind spot
    harness.set_server_time(harness.interval_start(1) + dt.timedelta(seconds=1))
    execute(
        conn,
        "ALTER TABLE dbo.customers ADD loyalty int NULL",
        "ALTER TABLE dbo.customers ADD tier int NOT NULL DEFAULT 1",
        "UPDATE dbo.customers SET loyalty = customer_id * 10 WHERE customer_id % 3 = 0",
        "UPDATE dbo.customers SET name = N'renamed' WHERE customer_id % 5 = 1",
    )
    harness.close_interval(1)
    # The run creates v2 at the server time it runs at: the clock holds one second into interval 2
    # (on a loaded machine a run can take over a minute, and v2 would start in interval 3).
    harness.simulator.clock.freeze()
    second = harness.run(harness.interval_start(2), env=OPT_IN)
    assert second.state == "success", second.output[-6000:]
    assert instances(harness) == ["dbo_customers", "dbo_customers_v2"]
    backfills = [d for d in harness.window_dirs("dbo_customers") if d.name.endswith("_backfill")]
    assert len(backfills) == 1
    assert json.loads((backfills[0] / "_manifest.json").read_text())["backfill"]["keys"] > 0
    (added,) = [d for d in harness.window_dirs("dbo_customers") if d.name.endswith("_added")]
    assert json.loads((added / "_manifest.json").read_text())["backfill"]["added_columns"] == [
        "loyalty",
        "tier",
    ]

    # interval 2: changes after the switch (read from v2, with the new column), then widening ALTERs captured by
    # the same instance inside one window: the change table follows the type, so every row of the window is
    # read with the wider type, which holds each earlier value exactly (no cut needed, extraction.ddl_split)
    harness.set_server_time(harness.interval_start(2) + dt.timedelta(seconds=1))
    execute(
        conn,
        "UPDATE dbo.customers SET loyalty = 7 WHERE customer_id % 4 = 0",
        "ALTER TABLE dbo.customers ALTER COLUMN loyalty bigint NULL",
        "ALTER TABLE dbo.customers ALTER COLUMN name nvarchar(150) NOT NULL",
        "UPDATE dbo.customers SET loyalty = 5000000000 WHERE customer_id % 7 = 0",
    )
    workload.run(conn, 5)
    harness.close_interval(2)
    third = harness.run(harness.interval_start(3), env=OPT_IN)
    assert third.state == "success", third.output[-6000:]

    # re-running the interval of the ADD (old instance up to the switch, and its blind spot read again by
    # key) leaves every target unchanged; the old instance stays while the switch is not disabled
    before = harness.target_snapshot_ids()
    again = harness.run(harness.interval_start(2), env=CREATE)
    assert again.state == "success", again.output[-6000:]
    assert harness.target_snapshot_ids() == before
    assert instances(harness) == ["dbo_customers", "dbo_customers_v2"]

    # interval 3: a DBA follows a DROP COLUMN by hand, between runs: the switch to v2 is complete, so the
    # first instance is disabled and a third one created; rows change before and after it (a blind spot).
    # The next run, with neither opt-in, picks the DBA's instance up and switches to it.
    harness.set_server_time(harness.interval_start(3) + dt.timedelta(seconds=1))
    cursor = conn.cursor()
    kept = dict(cursor.execute("SELECT customer_id, credit_limit FROM dbo.customers").fetchall())
    execute(
        conn,
        "ALTER TABLE dbo.customers DROP COLUMN credit_limit",
        "UPDATE dbo.customers SET loyalty = 3 WHERE customer_id % 2 = 0",
        "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'customers', "
        "@capture_instance = N'dbo_customers'",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers', "
        "@role_name = NULL, @capture_instance = N'dbo_customers_v3'",
        "UPDATE dbo.customers SET name = N'after v3' WHERE customer_id % 6 = 0",
    )
    harness.close_interval(3)
    fourth = harness.run(harness.interval_start(4), env=ONLY_CUSTOMERS)
    assert fourth.state == "success", fourth.output[-6000:]
    assert instances(harness) == ["dbo_customers_v2", "dbo_customers_v3"]
    assert len([d for d in harness.window_dirs("dbo_customers") if d.name.endswith("_backfill")]) == 2
    comparisons = compare(harness, spark)
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    assert [c.kept_columns for c in comparisons] == [["credit_limit"]]  # the verdict names what it skipped
    target = spark.table(f"{NAMESPACE}.dbo_customers")
    types = {f.name: f.dataType.simpleString() for f in target.schema.fields}
    assert types["loyalty"] == "bigint" and "credit_limit" in types  # widened; the dropped column is kept
    comments = {f.name: f.metadata.get("comment") for f in target.schema.fields}
    # the widened types are recorded as declared (nvarchar(150): a length in characters, not max_length's bytes)
    assert comments["loyalty"] == "SQL Server bigint" and comments["name"] == "SQL Server nvarchar(150)"
    # the dropped column keeps the value each row had at the DROP, rows changed after it in the blind spot too
    rows = target.where("NOT _cdc_deleted").select("customer_id", "credit_limit").collect()
    assert {r.customer_id: r.credit_limit for r in rows} == kept

    # the v2 -> v3 switch fell inside interval 3: its window was cut at the DROP and at v3's start_lsn
    hook = SqlServerCdcHook(harness.conn_id)
    try:
        start = int(hook.get_capture_instance("dbo_customers_v3").start_lsn)
    finally:
        hook.close()
    manifests = [json.loads((d / "_manifest.json").read_text()) for d in harness.window_dirs("dbo_customers")]
    pieces = sorted(
        (
            int(Lsn.from_hex(m["from_lsn"])),
            int(Lsn.from_hex(m["to_lsn"])),
            m["read_instance"],
            len(m["columns"]),
        )
        for m in manifests
        if not m.get("backfill") and m.get("run_id") == manifests_run_id(manifests, start)
    )
    (cut_from, b_to, b_reader, b_columns), (drop, d_to, d_reader, d_columns), (switch, _, reader, _) = pieces
    assert (b_to + 1, d_to + 1, switch) == (drop, start, start) and cut_from < drop
    assert (b_reader, d_reader, reader) == ("dbo_customers_v2", "dbo_customers_v2", "dbo_customers_v3")
    assert d_columns == b_columns - 1  # read without the dropped column after the DROP
    conn.close()


def manifests_run_id(manifests: list[dict], start: int) -> str:
    """The run that read the window holding ``start`` (the new instance's first LSN)."""
    return next(m["run_id"] for m in manifests if int(Lsn.from_hex(m["from_lsn"])) == start)
