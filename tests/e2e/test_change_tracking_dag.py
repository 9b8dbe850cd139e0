"""
The mixed Change Tracking / CDC example DAG through ``dag.test()`` against the simulator.

``dbo.orders``, ``dbo.order_lines`` and ``dbo.type_zoo`` are read through Change Tracking,
``dbo.customers`` through CDC. A first run snapshots every table (the CT ones at a change tracking
version), then runs after seeded random workloads (inserts, updates, deletes, primary-key updates,
multi-row transactions) merge their windows; a replay of the last run changes nothing; the targets
equal the sources. Real pieces only (see cdc_pipeline_harness).
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
    cursor = conn.cursor()
    cursor.execute(
        f"ALTER DATABASE [{harness.database}] SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS)"
    )
    for table in TRACKED:
        cursor.execute(f"ALTER TABLE {table} ENABLE CHANGE_TRACKING")
    logical_date = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).replace(second=0, microsecond=0)

    first = harness.run(logical_date, dag_id=DAG_ID)
    assert first.state == "success", first.output[-6000:]
    snapshot_marks = harness.watermarks()
    version = cursor.execute("SELECT CHANGE_TRACKING_CURRENT_VERSION()").fetchone()[0]
    for name in ("dbo_orders", "dbo_order_lines", "dbo_type_zoo"):
        assert snapshot_marks[name] == version_lsn(version).hex, name  # the snapshot's version

    for run in range(1, 3):
        stats = workload.run(conn, 60)
        assert stats.transactions > 0 and stats.key_updates + stats.deletes > 0, stats
        harness.capture()
        result = harness.run(logical_date + run * dt.timedelta(minutes=15), dag_id=DAG_ID)
        assert result.state == "success", result.output[-6000:]
    version = cursor.execute("SELECT CHANGE_TRACKING_CURRENT_VERSION()").fetchone()[0]
    marks = harness.watermarks()
    windows = [json.loads((d / "_manifest.json").read_text()) for d in harness.window_dirs("dbo_orders")]
    changes = sorted((w for w in windows if w["kind"] == "changes"), key=lambda w: w["from_lsn"])
    assert len(changes) == 2 and changes[0]["from_lsn"] > snapshot_marks["dbo_orders"]
    assert changes[1]["from_lsn"] > changes[0]["to_lsn"]  # contiguous version ranges, nothing twice
    assert marks["dbo_orders"] == version_lsn(version).hex

    replay = harness.run(logical_date + 2 * dt.timedelta(minutes=15), dag_id=DAG_ID)
    assert replay.state == "success", replay.output[-6000:]
    assert harness.watermarks() == marks

    comparisons = harness.compare(request.getfixturevalue("spark_reader"))
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    conn.close()
