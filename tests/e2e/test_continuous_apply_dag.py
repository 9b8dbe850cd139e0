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

from pathlib import Path

import pytest
from cdc_pipeline_harness import NAMESPACE, PipelineHarness

from airflow_provider_sqlserver_cdc.testing.continuous_apply_process import ApplyApplication
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar, iceberg_spark_conf
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from sqlserver_cdc_simulator.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CONTINUOUS = {"SQLSERVER_CDC_MERGE_MODE": "continuous", "SQLSERVER_CDC_APPLY_TIMEOUT_SECONDS": "240"}


def test_continuous_mode_applies_every_run_and_replays_change_nothing(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
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
    finally:
        assert app.stop() == 0, app.log_text()[-3000:]
