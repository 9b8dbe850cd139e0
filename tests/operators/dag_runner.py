"""Run a real Airflow DAG (``dag.test()``) that wires LsnSensor -> CdcExtractOperator -> WatermarkCommitOperator.

``dag.test()`` in Airflow 3.3 only runs DAGs found in ``AIRFLOW__CORE__DAGS_FOLDER``, so each run
copies the DAG file below into a temporary DAGs folder and runs it in a subprocess that shares
the test session's migrated metadata database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

# The DAG runs in a subprocess; Variables it writes must decrypt in the test process too.
FERNET_KEY = "xxeHKmrkr5b6Cg3msdBkr1dMoQqBqiyF-BuIj8i-uFo="

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

if __name__ == "__main__":
    run = dag.test(logical_date=pendulum.parse(cfg["logical_date"]))
    print("DAG_RUN_STATE=" + str(run.state))
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
    env = os.environ.copy()
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    env["AIRFLOW__CORE__FERNET_KEY"] = FERNET_KEY
    env["CDC_TEST_CONFIG"] = json.dumps(cfg)
    env[f"AIRFLOW_CONN_{cfg['conn_id'].upper()}"] = conn_uri_json
    proc = subprocess.run(
        [sys.executable, str(dag_file)], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    output = proc.stdout + proc.stderr
    state = None
    for line in proc.stdout.splitlines():
        if line.startswith("DAG_RUN_STATE="):
            state = line.split("=", 1)[1]
    recorded = json.loads(result_path.read_text()) if result_path.exists() else None
    return {"state": state, "recorded": recorded, "output": output, "returncode": proc.returncode}
