"""The environment that runs the example DAGs minutely on this machine (demo and end-to-end tests)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from pathlib import Path

from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar

#: The example DAG that dags/sqlserver_cdc_config.yaml configures (dags/sqlserver_cdc_example.py).
EXAMPLE_DAG_ID = "sqlserver_cdc_to_iceberg"


def example_dag_environment(
    *,
    conn_id: str,
    staging: Path,
    warehouse: Path,
    poke_interval_seconds: float,
    sensor_timeout_seconds: float,
    retry_delay_seconds: float,
    shuffle_partitions: int = 2,
) -> dict[str, str]:
    """
    Return the ``SQLSERVER_CDC_*`` variables that dags/sqlserver_cdc_config.yaml reads, for local runs.

    Minutely schedule, a poking sensor, the local Iceberg runtime jar and a Hadoop warehouse.

    :param conn_id: the Airflow connection of the source.
    :param staging: where the windows go.
    :param warehouse: the Hadoop catalog ``lake`` of the Iceberg targets.
    :param poke_interval_seconds: how often the sensor asks for the max LSN.
    :param sensor_timeout_seconds: how long it waits for the capture job.
    :param retry_delay_seconds: the tasks' retry delay.
    :param shuffle_partitions: Spark's shuffle partitions (small tables: few).
    """
    return {
        "SQLSERVER_CDC_CONN_ID": conn_id,
        "SQLSERVER_CDC_SCHEDULE": "* * * * *",
        "SQLSERVER_CDC_STAGING": str(staging),
        "SQLSERVER_CDC_WAREHOUSE": str(warehouse),
        "SQLSERVER_CDC_SPARK_JARS": iceberg_runtime_jar(),
        "SQLSERVER_CDC_SENSOR_MODE": "poke",
        "SQLSERVER_CDC_POKE_INTERVAL_SECONDS": f"{poke_interval_seconds:g}",
        "SQLSERVER_CDC_SENSOR_TIMEOUT_SECONDS": f"{sensor_timeout_seconds:g}",
        "SQLSERVER_CDC_RETRY_DELAY_SECONDS": f"{retry_delay_seconds:g}",
        "SQLSERVER_CDC_SHUFFLE_PARTITIONS": str(shuffle_partitions),
    }


def run_example_interval(
    dags_folder: Path,
    env: Mapping[str, str],
    interval_end: dt.datetime,
    *,
    log_path: Path,
    timeout: float,
) -> tuple[str, float]:
    """
    Run the example DAG for the interval ending at ``interval_end`` in its own ``dag.test()`` process.

    Returns the run's state (``crashed (exit N)`` when the process died before reporting one) and
    its wall time in seconds, what the demo and the latency benchmark hold against the interval.

    :param dags_folder: the folder of the example DAG.
    :param env: the process's environment (:func:`example_dag_environment` and an Airflow home).
    :param interval_end: the end of the run's data interval (its logical date).
    :param log_path: the file the run's output streams into.
    :param timeout: seconds before the process is killed.
    """
    started = time.monotonic()
    run = run_dag_test(
        EXAMPLE_DAG_ID,
        dags_folder=dags_folder,
        env=env,
        logical_date=interval_end,
        log_path=log_path,
        timeout=timeout,
    )
    state = run.state or "unknown"
    if run.returncode != 0 and run.state is None:
        state = f"crashed (exit {run.returncode})"
    return state, time.monotonic() - started
