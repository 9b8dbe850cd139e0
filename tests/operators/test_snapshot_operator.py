"""
CdcLoadPlanOperator + CdcSnapshotOperator + CdcExtractOperator + WatermarkCommitOperator in a real
``dag.test()`` run against the simulator: first run snapshots every table, the next extracts
windows after the snapshot LSNs, a run with ``{"resnapshot": [...]}`` snapshots only that table.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.operators.snapshot import CdcLoadPlanOperator, CdcSnapshotOperator
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test

SNAPSHOT_TESTS = Path(__file__).resolve().parents[1] / "snapshot"
sys.path.insert(0, str(SNAPSHOT_TESTS))

from snapshot_replay import ReplayTarget  # noqa: E402
from snapshot_source import SourceDb, fresh_copy  # noqa: E402

DAG_FILE = """
from __future__ import annotations

import json
import os

import pendulum
from airflow.sdk import DAG, task
from airflow.utils.trigger_rule import TriggerRule

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.operators.snapshot import CdcLoadPlanOperator, CdcSnapshotOperator
from airflow_provider_sqlserver_cdc.operators.watermark import WatermarkCommitOperator

cfg = json.loads(os.environ["SNAPSHOT_TEST_CONFIG"])

with DAG(cfg["dag_id"], schedule=None, start_date=pendulum.datetime(2020, 1, 1, tz="UTC"), catchup=False) as dag:
    plan = CdcLoadPlanOperator(task_id="plan", capture_instances=cfg["capture_instances"],
                               sqlserver_cdc_conn_id=cfg["conn_id"])

    @task
    def as_list(names):
        return list(names)

    snapshot = CdcSnapshotOperator.partial(
        task_id="snapshot", base_path=cfg["base_path"], sqlserver_cdc_conn_id=cfg["conn_id"], chunk_rows=40,
    ).expand(capture_instance=as_list.override(task_id="to_snapshot")(plan.output["snapshot"]))
    extract = CdcExtractOperator.partial(
        task_id="extract", base_path=cfg["base_path"], sqlserver_cdc_conn_id=cfg["conn_id"], window_mode="watermark",
    ).expand(capture_instance=as_list.override(task_id="to_extract")(plan.output["extract"]))
    commit = WatermarkCommitOperator(
        task_id="commit", windows=[snapshot.output, extract.output], trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS
    )

    @task(trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    def record(decisions, snapshots, windows, marks):
        with open(cfg["result_path"], "w") as f:
            json.dump({"decisions": decisions, "snapshots": list(snapshots or []), "windows": list(windows or []),
                       "marks": marks}, f)

    record(plan.output, snapshot.output, extract.output, commit.output)
"""


def run_dag(
    tmp_path: Path, db: SourceDb, name: str, run_conf: dict | None = None, **cfg: Any
) -> dict[str, Any]:
    """Run the DAG once in its own process (the runs share the Fernet key: each reads the watermarks the last wrote)."""
    dags = tmp_path / "dags"
    dags.mkdir(exist_ok=True)
    (dags / "snapshot_test_dag.py").write_text(DAG_FILE)
    result_path = tmp_path / f"result-{name}.json"
    cfg.update(dag_id=f"snapshot_test_{db.name}", conn_id=db.conn_id, result_path=str(result_path))
    env = {**os.environ, "SNAPSHOT_TEST_CONFIG": json.dumps(cfg)}
    run = run_dag_test(cfg["dag_id"], dags_folder=dags, env=env, run_conf=run_conf, cwd=tmp_path)
    assert run.state == "success", run.output[-12000:]
    return json.loads(result_path.read_text())


def test_operators_validate_arguments_without_io():
    with pytest.raises(ValueError, match="method"):
        CdcSnapshotOperator(task_id="s", capture_instance="dbo_t", base_path="/x", method="nolock")
    with pytest.raises(ValueError, match="chunk_rows"):
        CdcSnapshotOperator(task_id="s2", capture_instance="dbo_t", base_path="/x", chunk_rows=0)
    op = CdcLoadPlanOperator(task_id="p", capture_instances=["dbo_t"])
    assert "resnapshot" in op.template_fields and op.resnapshot == []
    assert set(CdcSnapshotOperator.template_fields) >= {"capture_instance", "base_path"}


def test_first_run_snapshots_next_run_extracts_and_one_table_can_be_resnapshotted(
    sqlserver_simulator, monkeypatch, tmp_path, airflow_db, shared_fernet_key
):
    db = SourceDb(sqlserver_simulator, monkeypatch)
    base = tmp_path / "staging"
    names = [t.capture_instance for t in db.sample.tables if t.name != "type_zoo"]
    try:
        from sqlserver_cdc_simulator.workload import Workload

        workload = Workload(seed=5, tables=db.sample.tables)
        conn = db.connect()
        for table in db.sample.tables:
            workload.insert_rows(conn, table.qualified_name, 90)
        db.capture()

        first = run_dag(tmp_path, db, "first", capture_instances=names, base_path=str(base))
        assert [d["action"] for d in first["decisions"]] == ["snapshot"] * len(names)
        assert "no watermark" in first["decisions"][0]["reason"]
        assert first["windows"] == []
        snapshots = {s["capture_instance"]: s for s in first["snapshots"]}
        assert set(snapshots) == set(names)
        for s in snapshots.values():
            assert s["kind"] == "snapshot" and s["to_lsn"] == s["snapshot_lsn"] and s["state_key"]
        assert {m["capture_instance"]: m["watermark"] for m in first["marks"]} == {
            n: snapshots[n]["to_lsn"] for n in names
        }

        workload.run(conn, transactions=60)
        db.capture()
        second = run_dag(tmp_path, db, "second", capture_instances=names, base_path=str(base))
        assert [d["action"] for d in second["decisions"]] == ["extract"] * len(names), second["decisions"]
        windows = {w["capture_instance"]: w for w in second["windows"]}
        hook = db.hook()
        for name in names:
            assert windows[name]["from_lsn"] > snapshots[name]["to_lsn"]
            target = ReplayTarget()
            target.apply(snapshots[name]["window_uri"])
            target.apply(windows[name]["window_uri"])
            instance = hook.get_capture_instance(name)
            assert target.rows() == fresh_copy(hook, instance, tmp_path / "final" / "second", db.name), name

        workload.run(conn, transactions=30)
        db.capture()
        third = run_dag(
            tmp_path,
            db,
            "third",
            capture_instances=names,
            base_path=str(base),
            run_conf={"resnapshot": ["dbo_orders"]},
        )
        actions = {d["capture_instance"]: d["action"] for d in third["decisions"]}
        assert actions == {n: "snapshot" if n == "dbo_orders" else "extract" for n in names}
        assert [s["capture_instance"] for s in third["snapshots"]] == ["dbo_orders"]
        assert {w["capture_instance"] for w in third["windows"]} == set(names) - {"dbo_orders"}
        marks = {m["capture_instance"]: m for m in third["marks"]}
        assert marks["dbo_orders"]["watermark"] == third["snapshots"][0]["to_lsn"]
        assert marks["dbo_orders"]["moved"]
        conn.close()
    finally:
        db.close()
