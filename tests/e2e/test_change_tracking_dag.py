"""
The mixed Change Tracking / CDC example DAG through ``dag.test()`` against the simulator, interval by interval.

``dbo.orders``, ``dbo.order_lines`` and ``dbo.type_zoo`` are read through Change Tracking,
``dbo.customers`` through CDC; one-minute intervals in the past, as in test_replication_proof
(the harness moves the server clock and runs the capture job). Along the way:

- the first run snapshots every table (the CT ones at a change tracking version);
- two intervals of a seeded random workload (inserts, updates, deletes, primary-key updates,
  multi-row transactions) are merged as version windows;
- in the second, columns are added to ``dbo.orders`` (one ``NOT NULL DEFAULT``, so every existing
  row gets a value that CHANGETABLE never reports) and one is widened; and tracking of
  ``dbo.order_lines`` is re-enabled, so its watermark falls below its min valid version;
- that run fails naming the table and the remedy, writing nothing; run again with
  ``SQLSERVER_CT_AUTO_RESNAPSHOT=true`` it snapshots ``dbo.order_lines`` again and merges the rest;
- a replay of that run and an out-of-order backfill of the interval before it change no target
  and move no watermark.

At the end every target equals its source (testing/table_comparison.py), values and types,
including the added and widened columns. Real pieces only (see cdc_pipeline_harness).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cdc_pipeline_harness import NAMESPACE, PipelineHarness

from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook, version_lsn
from airflow_provider_sqlserver_cdc.testing.replication_check import (
    compare_replicated_tables,
    compare_tracked_tables,
)
from airflow_provider_sqlserver_cdc.testing.table_comparison import (
    TableComparison,
    describe_all,
)
from sqlserver_cdc_simulator.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAG_ID = "sqlserver_change_tracking_to_iceberg"
TRACKED = {"dbo.orders": "dbo_orders", "dbo.order_lines": "dbo_order_lines", "dbo.type_zoo": "dbo_type_zoo"}
SEED = 18
TRANSACTIONS_PER_INTERVAL = 40


def compare_targets(harness: PipelineHarness, spark: Any) -> list[TableComparison]:
    """Compare the CDC table through its capture instance and each CT table with every column it has now."""
    hook = ChangeTrackingHook(harness.conn_id)
    try:
        cdc = compare_replicated_tables(spark, hook, ["dbo_customers"], NAMESPACE)
        return cdc + compare_tracked_tables(spark, hook, TRACKED, NAMESPACE)
    finally:
        hook.close()


def manifests(harness: PipelineHarness, name: str) -> list[dict[str, Any]]:
    return [json.loads((d / "_manifest.json").read_text()) for d in harness.window_dirs(name)]


def test_change_tracking_tables_follow_their_sources_through_the_example_dag(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    workload = Workload(seed=SEED)
    conn = harness.start_with_sample_source(hours_ago=2, workload=workload, initial_rows=20)
    start = harness.interval_start
    admin = harness.connect()
    admin.execute(f"ALTER DATABASE [{harness.database}] SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS)")
    for table in TRACKED:
        admin.execute(f"ALTER TABLE {table} ENABLE CHANGE_TRACKING")

    def current_version() -> int:
        return admin.execute("SELECT CHANGE_TRACKING_CURRENT_VERSION()").fetchval()

    def run(k: int, what: str, env: dict[str, str] | None = None) -> Any:
        result = harness.run(start(k + 1), dag_id=DAG_ID, env=env)
        assert result.state == "success", f"{what}: DAG run {result.state}\n{result.output[-6000:]}"
        return result

    # Interval 0: the first run snapshots every table, the CT ones at the current version.
    harness.write_interval(0, workload, conn, TRANSACTIONS_PER_INTERVAL)
    harness.close_interval(0)
    run(0, "first run (snapshots)")
    snapshot_version = current_version()
    assert {t: harness.watermarks()[t] for t in TRACKED.values()} == dict.fromkeys(
        TRACKED.values(), version_lsn(snapshot_version).hex
    )

    # Interval 1: the random workload, merged as the interval's version window.
    harness.write_interval(1, workload, conn, TRANSACTIONS_PER_INTERVAL)
    harness.close_interval(1)
    run(1, "interval 1")
    [window] = [m for m in manifests(harness, "dbo_orders") if m["kind"] == "changes"]
    assert window["mode"] == "interval" and window["from_lsn"] == version_lsn(snapshot_version + 1).hex
    assert harness.watermarks()["dbo_orders"] == window["to_lsn"]
    before_interval_2 = (harness.watermarks(), harness.target_snapshot_ids())

    # Interval 2: workload; columns added to dbo.orders (every existing row gets 'web', rows nobody
    # changes are not in CHANGETABLE) and one widened; workload; tracking of dbo.order_lines re-enabled.
    harness.write_interval(2, workload, conn, TRANSACTIONS_PER_INTERVAL)
    admin.execute(
        "ALTER TABLE dbo.orders ADD channel varchar(10) NOT NULL CONSTRAINT df_orders_channel DEFAULT 'web', "
        "note nvarchar(40) NULL"
    )
    admin.execute("ALTER TABLE dbo.orders ALTER COLUMN customer_id bigint NOT NULL")
    admin.execute("UPDATE dbo.orders SET channel = 'app', note = N'after the DDL' WHERE order_id % 3 = 0")
    workload.run(conn, TRANSACTIONS_PER_INTERVAL // 2)
    admin.execute("ALTER TABLE dbo.order_lines DISABLE CHANGE_TRACKING")
    admin.execute("ALTER TABLE dbo.order_lines ENABLE CHANGE_TRACKING")
    harness.close_interval(2)

    # By default the run fails in the Change Tracking plan, naming the table and the remedy; no Change
    # Tracking table is merged. The CDC table's window (dbo_customers) is merged all the same: one path's
    # trouble stays its own, and the run's last task fails the run naming ct_plan (issue 36).
    failed = harness.run(start(3), dag_id=DAG_ID)
    assert failed.state != "success"
    assert "ChangeTrackingRetentionError" in failed.output
    assert "Change tracking table dbo.order_lines (database cdc_sample)" in failed.output
    assert '"resnapshot": ["dbo_order_lines"]' in failed.output and "auto_resnapshot" in failed.output
    assert "ct_plan is failed" in failed.output and failed.task_states.get("merge") == "success"
    tracked_only = [*TRACKED.values()]
    marks, snapshots = harness.watermarks(), harness.target_snapshot_ids()
    assert {t: marks[t] for t in tracked_only} == {t: before_interval_2[0][t] for t in tracked_only}
    assert {t: snapshots[t] for t in tracked_only} == {t: before_interval_2[1][t] for t in tracked_only}

    # With the opt-in the run snapshots dbo.order_lines again; the others take interval 2 in.
    healed = run(2, "run with auto_resnapshot", env={"SQLSERVER_CT_AUTO_RESNAPSHOT": "true"})
    assert "auto_resnapshot is on: snapshotting it again" in healed.output
    assert [m["kind"] for m in manifests(harness, "dbo_order_lines")].count("snapshot") == 2
    assert "that hold a value in channel, note were re-read" in healed.output
    ddl_window = max(manifests(harness, "dbo_orders"), key=lambda m: m["to_lsn"])
    assert [c["name"] for c in ddl_window["columns"]][-2:] == ["channel", "note"]
    marks, snapshots = harness.watermarks(), harness.target_snapshot_ids()
    assert all(snapshots[t] != before_interval_2[1][t] for t in ("dbo_orders", "dbo_order_lines"))

    # A replay of that run, then an out-of-order backfill of interval 1: nothing changes.
    run(2, "replay of interval 2")
    run(1, "backfill of interval 1 after interval 2")
    assert harness.watermarks() == marks
    assert harness.target_snapshot_ids() == snapshots

    comparisons = compare_targets(harness, request.getfixturevalue("spark_reader"))
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    assert all(c.source_rows > 0 for c in comparisons)
    conn.close()
    admin.close()
