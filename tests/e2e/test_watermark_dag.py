"""
The watermark-mode example DAG through ``dag.test()`` against the simulator: a first run
snapshots every table, the next run merges every change after the watermark, and the targets
equal the sources. Real pieces only (see cdc_pipeline_harness). It runs with FreeTDS and with
Microsoft's ODBC Driver 18 (the ``odbc_driver`` fixture): the DAG-run processes use that driver.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cdc_pipeline_harness import (
    CAPTURE_INSTANCES,
    PipelineHarness,
    create_sample_source,
)

from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from sqlserver_cdc_simulator.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.usefixtures("odbc_driver")]


def test_watermark_dag_snapshots_then_follows_the_watermark(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    workload = Workload(seed=99)
    conn = create_sample_source(harness, workload, initial_rows=25)
    after_snapshot: dict[str, str | None] = {}

    def workload_after_the_snapshot() -> None:
        after_snapshot.update(harness.watermarks())
        assert all(after_snapshot.values()), after_snapshot
        assert workload.run(conn, 80).transactions > 0

    harness.run_watermark_dag_twice(workload_after_the_snapshot)
    marks = harness.watermarks()
    for name in CAPTURE_INSTANCES:
        assert marks[name] > after_snapshot[name], name  # same-width hex strings order like LSNs
        windows = [json.loads((d / "_manifest.json").read_text()) for d in harness.window_dirs(name)]
        changes = [w for w in windows if w["kind"] == "changes"]
        assert len(changes) == 1 and changes[0]["mode"] == "watermark", name
        # The window starts right after the snapshot: nothing in between, nothing twice.
        assert changes[0]["from_lsn"] > after_snapshot[name]

    comparisons = harness.compare(request.getfixturevalue("spark_reader"))
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    conn.close()
