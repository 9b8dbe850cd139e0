"""
The mixed Change Tracking / CDC example DAG through ``dag.test()`` against the simulator.

``dbo.orders``, ``dbo.order_lines`` and ``dbo.type_zoo`` are read through Change Tracking,
``dbo.customers`` through CDC. A first run snapshots every table (the CT ones at a change tracking
version), then a run after a seeded random workload (inserts, updates, deletes, primary-key updates,
multi-row transactions) merges their windows, and the targets equal the sources. Real pieces only (see cdc_pipeline_harness).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from cdc_pipeline_harness import PipelineHarness, create_sample_source

from airflow_provider_sqlserver_cdc.hooks.change_tracking import version_lsn
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from airflow_provider_sqlserver_cdc.testing.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAG_ID = "sqlserver_change_tracking_to_iceberg"
TRACKED = ("dbo.orders", "dbo.order_lines", "dbo.type_zoo")


def test_change_tracking_tables_snapshot_then_follow_their_versions(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    workload = Workload(seed=18)
    conn = create_sample_source(harness, workload, initial_rows=20)
    admin = harness.connect()
    admin.execute(f"ALTER DATABASE [{harness.database}] SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS)")
    for table in TRACKED:
        admin.execute(f"ALTER TABLE {table} ENABLE CHANGE_TRACKING")
    logical_date = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).replace(second=0, microsecond=0)

    first = harness.run(logical_date, dag_id=DAG_ID)
    assert first.state == "success", first.output[-6000:]
    snapshot_marks = harness.watermarks()
    version = admin.execute("SELECT CHANGE_TRACKING_CURRENT_VERSION()").fetchval()
    for name in ("dbo_orders", "dbo_order_lines", "dbo_type_zoo"):
        assert snapshot_marks[name] == version_lsn(version).hex, name  # the snapshot's version

    stats = workload.run(conn, 100)
    assert stats.transactions > 0 and stats.key_updates + stats.deletes > 0, stats
    harness.capture()
    second = harness.run(logical_date + dt.timedelta(minutes=15), dag_id=DAG_ID)
    assert second.state == "success", second.output[-6000:]
    version = admin.execute("SELECT CHANGE_TRACKING_CURRENT_VERSION()").fetchval()
    marks = harness.watermarks()
    windows = [json.loads((d / "_manifest.json").read_text()) for d in harness.window_dirs("dbo_orders")]
    changes = sorted((w for w in windows if w["kind"] == "changes"), key=lambda w: w["from_lsn"])
    assert len(changes) == 1 and changes[0]["mode"] == "watermark"
    # The window starts right after the snapshot's version: nothing in between, nothing twice.
    assert changes[0]["from_lsn"] == version_lsn(int(snapshot_marks["dbo_orders"], 16) + 1).hex
    assert marks["dbo_orders"] == version_lsn(version).hex

    comparisons = harness.compare(request.getfixturevalue("spark_reader"))
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    conn.close()
    admin.close()
