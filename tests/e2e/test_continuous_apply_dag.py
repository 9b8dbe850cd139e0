"""
Continuous mode through the real example DAG: the apply application (spark-submit, running beside the
runs) merges each run's windows while the run waits for them, deferred; every target equals its
source; running the last interval again and backfilling an older one change nothing.

Real pieces: the simulator through pyodbc + FreeTDS, ``dag.test()`` of ``dags/sqlserver_cdc_to_iceberg.py``
in its own process per run with ``merge.mode: continuous``, the continuous apply application through
spark-submit into Iceberg tables. The test controls the server clock (minutely intervals in the
past) and when the capture job runs, as the batch-mode proof does.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from cdc_pipeline_harness import NAMESPACE, PipelineHarness

from airflow_provider_sqlserver_cdc.testing.continuous_apply_process import ApplyApplication
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar, iceberg_spark_conf
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from sqlserver_cdc_simulator.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CONTINUOUS = {"SQLSERVER_CDC_MERGE_MODE": "continuous", "SQLSERVER_CDC_APPLY_TIMEOUT_SECONDS": "240"}
ORDERS_URI = "iceberg://lake/cdc/dbo_orders"


def asset_events(uri: str, since: dt.datetime) -> list[dict[str, Any]]:
    """The extras (with the partition key) of the asset events of ``uri`` since ``since``, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(
                AssetEvent.extra, AssetEvent.partition_key if hasattr(AssetEvent, "partition_key") else None
            )
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri, AssetEvent.timestamp >= since)
            .order_by(AssetEvent.id)
        ).all()
    return [{**dict(extra), "event_partition": partition} for extra, partition in rows]


def test_continuous_mode_applies_every_run_and_replays_change_nothing(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    began = dt.datetime.now(dt.UTC)
    workload = Workload(seed=20261128)
    conn = harness.start_with_sample_source(hours_ago=3, workload=workload, initial_rows=20)
    start = harness.interval_start
    conf = {**iceberg_spark_conf(harness.warehouse), "spark.sql.shuffle.partitions": "2"}
    app = ApplyApplication.start(
        str(harness.staging),
        NAMESPACE,
        conf,
        iceberg_runtime_jar(),
        log_path=harness.root / "logs" / "continuous-apply.log",
        poll_seconds=1.0,
    )
    try:
        app.wait_for_log("holding ")
        for k in range(3):  # the snapshot run, then two intervals of changes
            harness.write_interval(k, workload, conn, 40)
            harness.close_interval(k)
            result = harness.run(start(k + 1), env=CONTINUOUS)
            assert result.state == "success", result.output[-6000:]
            assert "wait_for_apply" in result.output and "CdcSparkMergeOperator" not in result.output
        comparisons = harness.compare(request.getfixturevalue("spark_reader"))
        assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
        marks, snapshots = harness.watermarks(), harness.target_snapshot_ids()
        assert all(marks.values()), marks

        # The last interval once more, then an older interval after it: applied already, nothing changes.
        for again in (start(3), start(2)):
            result = harness.run(again, env=CONTINUOUS)
            assert result.state == "success", result.output[-6000:]
        assert harness.watermarks() == marks
        assert harness.target_snapshot_ids() == snapshots
        assert "micro-batch" in app.log_text()

        # wait_for_apply's asset events: one per run, as the batch merge's; the re-runs name the same
        # partition and the snapshot that applied their windows then, nothing applied now.
        events = asset_events(ORDERS_URI, began)
        assert [e["partition_key"] for e in events] == [
            start(k).strftime("%Y-%m-%dT%H:%M:%S") for k in (0, 1, 2, 2, 1)
        ], events
        first, second, third, again, backfill = events
        assert first["snapshot"] and not second["snapshot"]
        assert str(snapshots["dbo_orders"]) == third["snapshot_id"]
        assert all(e["lsn_ranges"][0]["applied_now"] for e in (first, second, third))
        assert (again["snapshot_id"], again["lsn_ranges"]) == (
            third["snapshot_id"],
            [{**r, "applied_now": False} for r in third["lsn_ranges"]],
        )
        assert (backfill["snapshot_id"], backfill["lsn_ranges"]) == (
            second["snapshot_id"],
            [{**r, "applied_now": False} for r in second["lsn_ranges"]],
        )
        assert second["snapshot_id"] != third["snapshot_id"]
        if events[0]["event_partition"] is not None:  # Airflow 3.3+: partitioned events
            assert [e["event_partition"] for e in events] == [e["partition_key"] for e in events]
    finally:
        assert app.stop() == 0, app.log_text()[-3000:]
