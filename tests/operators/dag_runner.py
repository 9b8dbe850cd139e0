"""Run a real Airflow DAG (``dag.test()``) that wires LsnSensor -> CdcExtractOperator -> WatermarkCommitOperator.

Each run writes the DAG file below into a temporary DAGs folder and runs it with
:func:`~airflow_provider_sqlserver_cdc.testing.dag_runs.run_dag_test` in a subprocess that shares
the test session's migrated metadata database (and, through ``shared_fernet_key``, its Fernet key).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test

DAG_FILE = """
from __future__ import annotations

import datetime as dt
import json
import os

import pendulum
from airflow.sdk import DAG, task

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.operators.watermark import WatermarkCommitOperator
from airflow_provider_sqlserver_cdc.sensors.lsn import LsnSensor

cfg = json.loads(os.environ["CDC_TEST_CONFIG"])

with DAG(
    cfg["dag_id"],
    schedule=dt.timedelta(minutes=cfg["interval_minutes"]),
    start_date=pendulum.datetime(2020, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    wait = LsnSensor(
        task_id="wait",
        capture_instance=cfg["capture_instances"],
        sqlserver_cdc_conn_id=cfg["conn_id"],
        window_mode=cfg["mode"],
        server_time_zone=cfg.get("server_time_zone"),
        deferrable=cfg.get("deferrable", False),
        mode=cfg.get("sensor_mode", "poke"),
        poke_interval=1,
        timeout=cfg.get("sensor_timeout", 60),
    )
    extract = CdcExtractOperator.partial(
        task_id="extract",
        base_path=cfg["base_path"],
        sqlserver_cdc_conn_id=cfg["conn_id"],
        window_mode=cfg["mode"],
        server_time_zone=cfg.get("server_time_zone"),
        max_file_bytes=cfg.get("max_file_bytes", 128 * 1024 * 1024),
        batch_size=cfg.get("batch_size", 50_000),
    ).expand(capture_instance=cfg["capture_instances"])
    commit = WatermarkCommitOperator(task_id="commit", windows=extract.output)

    @task
    def record(windows, marks, **context):
        with open(cfg["result_path"], "w") as f:
            json.dump(
                {
                    "windows": list(windows),
                    "marks": marks,
                    "interval": [context["data_interval_start"].isoformat(), context["data_interval_end"].isoformat()],
                    "run_id": context["dag_run"].run_id,
                },
                f,
            )

    wait >> extract
    record(extract.output, commit.output)
"""


def run_cdc_dag(tmp_path: Path, conn_uri_json: str, **cfg: Any) -> dict[str, Any]:
    """Run the DAG once; return its state, the recorded XComs and the process output."""
    dags = tmp_path / "dags"
    dags.mkdir(exist_ok=True)
    dag_file = dags / "cdc_test_dag.py"
    dag_file.write_text(DAG_FILE)
    result_path = tmp_path / f"result-{cfg['dag_id']}-{cfg['logical_date'].replace(':', '')}.json"
    if result_path.exists():
        result_path.unlink()
    cfg.setdefault("conn_id", "sim")
    cfg.setdefault("interval_minutes", 10)
    cfg["result_path"] = str(result_path)
    env = {
        **os.environ,
        "CDC_TEST_CONFIG": json.dumps(cfg),
        connection_variable(cfg["conn_id"]): conn_uri_json,
    }
    run = run_dag_test(
        cfg["dag_id"], dags_folder=dags, env=env, logical_date=cfg["logical_date"], cwd=tmp_path
    )
    recorded = json.loads(result_path.read_text()) if result_path.exists() else None
    return {"state": run.state, "recorded": recorded, "output": run.output, "returncode": run.returncode}
