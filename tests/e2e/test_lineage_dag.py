"""
OpenLineage of a run of the interval example DAG: extract and merge name the right datasets and carry the
LSN facet, and the merge's spark-submit carries the parent-job properties the OpenLineage provider injects.

Real pieces (cdc_pipeline_harness: dag.test() in its own process, the simulator, spark-submit into
Iceberg) with the OpenLineage provider's file transport.
"""

from __future__ import annotations

import json

import pytest
from cdc_pipeline_harness import INTERVAL_DAG, PipelineHarness, create_sample_source, table_list_variable

from sqlserver_cdc_simulator.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_extract_and_merge_report_their_datasets_and_lsn_ranges(
    pipeline_harness: PipelineHarness, airflow_db
):
    pytest.importorskip(
        "airflow.providers.openlineage", reason="apache-airflow-providers-openlineage is not installed"
    )
    harness = pipeline_harness
    harness.start_intervals(hours_ago=2)
    start = harness.interval_start
    workload = Workload(seed=7)
    conn = create_sample_source(harness, workload, initial_rows=10)
    harness.write_interval(0, workload, conn, 20)
    harness.close_interval(0)
    conn.close()
    events_path = harness.root / "openlineage.jsonl"
    env = {
        **table_list_variable(INTERVAL_DAG, ["dbo_orders"]),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_path), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "cdc-e2e",
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True",
    }
    run = harness.run(start(1), env=env)
    assert run.state == "success", run.output[-6000:]
    events = [json.loads(line) for line in events_path.read_text().splitlines() if line.strip()]

    def completed(task_id: str) -> dict:
        (event,) = [
            e
            for e in events
            if e["eventType"] == "COMPLETE" and e["job"]["name"] == f"{INTERVAL_DAG}.{task_id}"
        ]
        return event

    source = f"mssql://{harness.simulator.host}:{harness.simulator.port}"
    snapshot = completed("snapshot")  # the first run snapshots the table
    assert [(d["namespace"], d["name"]) for d in snapshot["inputs"]] == [(source, "cdc_sample.dbo.orders")]
    assert "schema" in snapshot["inputs"][0]["facets"]
    (window,) = snapshot["run"]["facets"]["sqlserverCdc"]["windows"]
    assert window["kind"] == "snapshot" and window["to"].startswith("0x")

    merge = completed("merge")
    assert [(d["namespace"], d["name"]) for d in merge["inputs"]] == [(source, "cdc_sample.dbo.orders")]
    assert [(d["namespace"], d["name"]) for d in merge["outputs"]] == [("iceberg://lake", "cdc.dbo_orders")]
    facet = merge["run"]["facets"]["sqlserverCdc"]
    (merged,) = facet["windows"]
    assert (merged["from"], merged["to"], merged["table"]) == (
        window["from"],
        window["to"],
        "lake.cdc.dbo_orders",
    )
    assert facet["snapshotIds"]["lake.cdc.dbo_orders"]
    # The parent-job properties the OpenLineage provider injects reach spark-submit (the Spark
    # OpenLineage listener, where installed on the cluster, reports the job as a child of the task).
    assert "spark.openlineage.parentJobName" in run.output
    assert "spark.openlineage.parentJobNamespace=cdc-e2e" in run.output.replace("'", "").replace('"', "")
