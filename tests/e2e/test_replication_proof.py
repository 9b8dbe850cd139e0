"""
The proof: a seeded random workload, replicated interval by interval through the real example DAG,
leaves every Iceberg target equal to its SQL Server source table, values and types.

Real pieces only: the simulator speaks TDS to pyodbc + FreeTDS, every run is ``dag.test()`` of
``dags/sqlserver_cdc_to_iceberg.py`` in its own process, the merge is spark-submit of the
provider's job into Iceberg tables. The test controls only what it must: the server clock
(one-minute intervals in the past, server in UTC+05:30) and when the capture job runs.

Along the way: the first run snapshots every table; the capture job is stopped while an
interval closes and comes back while the sensor waits; an extract process is killed with
SIGKILL in the middle of writing its Parquet file and the interval is run again; the last
interval is run again (extract rewrites its window, the merge finds it applied); then an older
interval is backfilled after it (out of order). Neither the re-runs
nor the backfill change a target (no new Iceberg snapshot) or move a watermark.

Then the runs the scheduler never made (issue: no silent holes): one interval gets no run, and
the next run, with ``on_gap: fail``, fails naming the gap and the backfill command, writing
nothing; run again with the default ``on_gap: heal`` it takes the missed changes in. The same
after three missed intervals (a DAG paused, then unpaused). Each time every target equals its
source.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from cdc_pipeline_harness import CAPTURE_INSTANCES, PipelineHarness

from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from sqlserver_cdc_simulator.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.slow]


SEED = 20261122
INITIAL_ROWS = 40
TRANSACTIONS_PER_INTERVAL = 60


def assert_success(result, what: str) -> None:
    assert result.state == "success", f"{what}: DAG run {result.state}\n{result.output[-6000:]}"


def test_target_equals_source_through_the_example_dag(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    # Minutely intervals three hours in the past (Airflow runs them like any past interval).
    workload = Workload(seed=SEED)
    conn = harness.start_with_sample_source(hours_ago=3, workload=workload, initial_rows=INITIAL_ROWS)
    start = harness.interval_start

    def write_interval(k: int) -> None:
        harness.write_interval(k, workload, conn, TRANSACTIONS_PER_INTERVAL)

    close_interval = harness.close_interval

    # Interval 0: the first run snapshots every table (no watermark yet).
    write_interval(0)
    close_interval(0)
    result = harness.run(start(1))
    assert_success(result, "first run (snapshots)")
    assert result.data_interval == f"{start(0).isoformat()}/{start(1).isoformat()}"
    for name in CAPTURE_INSTANCES:
        kinds = {json.loads((d / "_manifest.json").read_text())["kind"] for d in harness.window_dirs(name)}
        assert kinds == {"snapshot"}, name
    assert all(harness.watermarks().values()), harness.watermarks()

    # Interval 1: the capture job is down when the interval closes and comes back 5 s into the run.
    write_interval(1)
    close_interval(1, capture=False)
    lagging = harness.connect()
    max_time = (
        lagging.cursor().execute("SELECT sys.fn_cdc_map_lsn_to_time(sys.fn_cdc_get_max_lsn())").fetchval()
    )
    lagging.close()
    local_end = start(2).astimezone(harness.simulator.clock.zone).replace(tzinfo=None)
    assert max_time < local_end, "the capture job was meant to be behind the interval's end"
    agent_back = threading.Timer(5, harness.set_capture_job, kwargs={"running": True})
    agent_back.start()
    result = harness.run(start(2))
    agent_back.join()
    harness.set_capture_job(running=False)
    assert_success(result, "run with a lagging capture job")

    # Interval 2: the extract of dbo_type_zoo is killed mid-write; running the interval again repairs it.
    write_interval(2)
    close_interval(2)
    killed = harness.run(start(3), kill_extract_of="dbo_type_zoo")
    assert "KILLING extract of dbo_type_zoo" in killed.output, killed.output[-4000:]
    assert killed.state != "success"
    half_written = [d for d in harness.window_dirs("dbo_type_zoo") if not (d / "_manifest.json").exists()]
    assert half_written, "the killed extract should have left its window without a manifest"
    assert_success(harness.run(start(3)), "interval run again after the kill")
    for directory in harness.window_dirs("dbo_type_zoo"):
        manifest = json.loads((directory / "_manifest.json").read_text())
        assert sorted(p.name for p in directory.glob("part-*")) == sorted(
            f["path"] for f in manifest["files"]
        )

    # Interval 3: one more ordinary interval.
    write_interval(3)
    close_interval(3)
    assert_success(harness.run(start(4)), "last interval")

    spark = request.getfixturevalue("spark_reader")
    comparisons = harness.compare(spark)
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    assert all(c.source_rows > 0 for c in comparisons)
    marks = harness.watermarks()
    snapshots = harness.target_snapshot_ids()

    # The merge of the last interval once more: the window is already applied, nothing changes.
    assert_success(harness.run(start(4)), "merge re-run")
    assert harness.watermarks() == marks
    assert harness.target_snapshot_ids() == snapshots

    # Backfill of an older interval after the newest one: the target stays as it is, watermarks stay put.
    assert_success(harness.run(start(3)), "backfill of interval 2")
    assert harness.watermarks() == marks
    assert harness.target_snapshot_ids() == snapshots
    comparisons = harness.compare(spark)
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)

    # Interval 4 gets no run (scheduler down); the run of interval 5 finds its changes unapplied.
    write_interval(4)
    close_interval(4)
    write_interval(5)
    close_interval(5)
    staged = {name: harness.window_dirs(name) for name in CAPTURE_INSTANCES}
    failed = harness.run(start(6), env={"SQLSERVER_CDC_ON_GAP": "fail"})
    assert failed.state != "success"
    assert "are not applied to the target" in failed.output, failed.output[-6000:]
    assert f"--from-date {start(4).isoformat()}" in failed.output, failed.output[-6000:]
    assert f"--to-date {start(5).isoformat()}" in failed.output
    assert {name: harness.window_dirs(name) for name in CAPTURE_INSTANCES} == staged  # nothing written
    assert harness.watermarks() == marks
    assert harness.target_snapshot_ids() == snapshots
    healed = harness.run(start(6))
    assert_success(healed, "run healing the missed interval")
    assert "healing a gap" in healed.output
    comparisons = harness.compare(spark)
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)

    # The DAG is paused over intervals 6-8 and unpaused: the run of interval 9 heals all three.
    for k in (6, 7, 8, 9):
        write_interval(k)
        close_interval(k)
    assert_success(harness.run(start(10)), "run after the DAG was paused")
    comparisons = harness.compare(spark)
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    assert harness.applied_range_counts() == dict.fromkeys(CAPTURE_INSTANCES, 1)
    conn.close()
