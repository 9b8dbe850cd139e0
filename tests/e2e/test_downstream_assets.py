"""
The merge's asset events drive the downstream example DAG once per replicated interval.

Real pieces only: an Airflow deployment of its own (scheduler with LocalExecutor, dag-processor,
execution API; airflow_deployment.py) runs the interval pipeline (the example DAG's settings,
``dags/sqlserver_cdc_config.yaml``) against the simulator and spark-submit into Iceberg, and
``dags/sqlserver_cdc_orders_delta.py``, scheduled on the ``dbo_orders`` target's asset with a
``PartitionedAssetTimetable``. The scheduler creates the downstream runs from the asset events
(``use_job_schedule`` on); the replication DAG gets an ``end_date`` before now so that the scheduler
creates none of its runs itself: the test creates each interval's scheduled run
(create_scheduled_run.py), as in test_backfill_create.py.

Story: interval 0 snapshots, intervals 1 and 2 merge changes; each merge emits an event of its
interval's partition; the downstream DAG runs once per partition and sees that run's LSN range
and snapshot id. Clearing interval 2's run re-runs it: the same partition is emitted again with
the same range and snapshot id (nothing new committed).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from airflow_deployment import AirflowDeployment
from cdc_pipeline_harness import (
    DAGS_FOLDER,
    INTERVAL_DAG,
    PipelineHarness,
    create_sample_source,
    table_list_variable,
)

from airflow_provider_sqlserver_cdc.assets import partition_key
from sqlserver_cdc_simulator.workload import Workload

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(
        not hasattr(
            __import__("airflow.sdk.execution_time.context", fromlist=["x"]).OutletEventAccessor,
            "add_partitions",
        ),
        reason="partitioned outlet events need Airflow 3.3 (OutletEventAccessor.add_partitions)",
    ),
]

DOWNSTREAM_DAG = "sqlserver_cdc_orders_delta"
ORDERS_URI = "iceberg://lake/cdc/dbo_orders"
RUN_TIMEOUT = 600

PRODUCER = """
import datetime as dt
import os
from pathlib import Path

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag

dag = cdc_replication_dag(
    ReplicationSettings.from_yaml(Path(__file__).with_name("sqlserver_cdc_config.yaml")),
    dag_id="sqlserver_cdc_to_iceberg",
    end_date=dt.datetime.fromisoformat(os.environ["OUTPUTS_TEST_END_DATE"]),
)
"""


def test_downstream_dag_runs_once_per_interval_with_its_lsn_range_and_snapshot(
    pipeline_harness: PipelineHarness, shared_fernet_key: str, tmp_path: Path
) -> None:
    harness = pipeline_harness
    harness.start_intervals(hours_ago=3)
    start = harness.interval_start
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(DAGS_FOLDER / "sqlserver_cdc_config.yaml", dags)
    shutil.copy(DAGS_FOLDER / f"{DOWNSTREAM_DAG}.py", dags)
    (dags / "producer.py").write_text(PRODUCER)
    env = {
        **harness.env,
        **table_list_variable(INTERVAL_DAG, ["dbo_orders"]),
        "OUTPUTS_TEST_END_DATE": start(3).isoformat(),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
    }
    deployment = AirflowDeployment(harness.root / "airflow-assets", env)
    deployment.env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "True"  # asset-triggered runs
    workload = Workload(seed=33)

    def run(k: int) -> str:
        (run_id,) = deployment.create_scheduled_runs(INTERVAL_DAG, [start(k)])
        state = deployment.wait_for_runs(INTERVAL_DAG, [run_id], RUN_TIMEOUT)[run_id]["state"]
        assert state == "success", f"interval {k}: {state}\n{deployment.diagnostics()}"
        return run_id

    def events() -> list[dict]:
        rows = deployment.query(
            "SELECT e.extra, e.partition_key, e.source_run_id FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE a.uri = ? ORDER BY e.id",
            ORDERS_URI,
        )
        return [
            {**json.loads(r["extra"]), "event_partition": r["partition_key"], "run": r["source_run_id"]}
            for r in rows
        ]

    def downstream(count: int) -> list[dict]:
        def finished():
            runs = deployment.dag_runs(DOWNSTREAM_DAG)
            done = [r for r in runs.values() if r["state"] in ("success", "failed")]
            return sorted(done, key=lambda r: r["id"]) if len(done) >= count else None

        runs = deployment.wait_for(finished, f"{count} runs of {DOWNSTREAM_DAG}", RUN_TIMEOUT, poll=2.0)
        assert all(r["state"] == "success" for r in runs), deployment.diagnostics()
        return [
            {
                "partition_key": r["partition_key"],
                **deployment.xcoms(DOWNSTREAM_DAG, r["run_id"], "orders_delta")[-1],
            }
            for r in runs
        ]

    with deployment.running():
        harness.set_server_time(start(0) - dt.timedelta(seconds=30))
        conn = create_sample_source(harness, workload, 20)
        deployment.wait_until_ready(INTERVAL_DAG)
        deployment.wait_until_ready(DOWNSTREAM_DAG)
        run_ids = []
        for k in range(3):
            harness.write_interval(k, workload, conn, 40)
            harness.close_interval(k)
            run_ids.append(run(k))
        seen = downstream(3)
        first = events()

        # Re-run interval 2: the same partition, the same range, no new Iceberg snapshot.
        cleared = deployment.airflow(
            "tasks", "clear", INTERVAL_DAG, "-s", start(2).isoformat(), "-e", start(2).isoformat(), "-y"
        )
        assert cleared.returncode == 0, cleared.stdout + cleared.stderr
        state = deployment.wait_for_runs(INTERVAL_DAG, [run_ids[2]], RUN_TIMEOUT)[run_ids[2]]["state"]
        assert state == "success", deployment.diagnostics()
        again = events()
        seen_again = downstream(4)
        conn.close()

    partitions = [partition_key(start(k)) for k in range(3)]
    assert [e["event_partition"] for e in first] == partitions
    assert [e["partition_key"] for e in first] == partitions
    assert first[0]["snapshot"] and first[0]["lsn_ranges"][0]["kind"] == "snapshot"
    for k in (1, 2):
        (window,) = first[k]["lsn_ranges"]
        assert window["kind"] == "changes" and window["applied_now"]
        assert first[k]["rows"]["insert"] + first[k]["rows"]["update"] + first[k]["rows"]["delete"] > 0
        assert first[k]["commit_time_range"] == {"from": start(k).isoformat(), "to": start(k + 1).isoformat()}
    assert len({e["snapshot_id"] for e in first}) == 3  # each run committed a snapshot
    assert [e["data_interval"]["start"] for e in first] == [start(k).isoformat() for k in range(3)]
    # The downstream DAG ran once per interval and saw that interval's event.
    assert [s["partition_key"] for s in seen] == partitions
    for s, e in zip(seen, first, strict=True):
        assert (s["lsn_ranges"], s["snapshot_id"]) == (e["lsn_ranges"], e["snapshot_id"])
        assert s["query"].startswith("SELECT * FROM lake.cdc.dbo_orders VERSION AS OF ")
    # The re-run re-emitted interval 2's partition with the same range and snapshot id.
    rerun = again[-1]
    assert len(again) == 4 and rerun["event_partition"] == partitions[2]
    assert [r["from"] for r in rerun["lsn_ranges"]] == [r["from"] for r in first[2]["lsn_ranges"]]
    assert [r["to"] for r in rerun["lsn_ranges"]] == [r["to"] for r in first[2]["lsn_ranges"]]
    assert rerun["snapshot_id"] == first[2]["snapshot_id"]
    assert not any(r["applied_now"] for r in rerun["lsn_ranges"])
    assert seen_again[-1]["partition_key"] == partitions[2]
