"""SourceTaskOperator: one declaration of the source-connection arguments, for operators and sensors."""

from __future__ import annotations

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.sensors.change_tracking import ChangeTrackingVersionSensor
from airflow_provider_sqlserver_cdc.sensors.lsn import LsnSensor
from airflow_provider_sqlserver_cdc.source_task import SourceTaskOperator
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_SQLSERVER_CDC_CONN_ID

SOURCE = {"sqlserver_cdc_conn_id": "cdc_src", "database": "shop", "server_time_zone": "Europe/Berlin"}


def _dag() -> DAG:
    return DAG(
        "source_task_defaults", schedule=None, start_date=pendulum.datetime(2026, 1, 1), default_args=SOURCE
    )


@pytest.mark.parametrize(
    ("task_class", "arguments"),
    [
        (LsnSensor, {"capture_instance": "dbo_orders"}),
        (ChangeTrackingVersionSensor, {"capture_instance": "dbo.orders"}),
        (CdcExtractOperator, {"capture_instance": "dbo_orders", "base_path": "/tmp/w"}),
    ],
)
def test_default_args_fill_the_source_arguments_of_sensors_and_operators(task_class, arguments):
    # Airflow fills a task's arguments from default_args only for those an __init__ of a BaseOperator subclass
    # declares: the sensors take them from SourceTaskOperator, below BaseSensorOperator in their MRO.
    with _dag():
        task = task_class(task_id="t", **arguments)
    assert isinstance(task, SourceTaskOperator)
    assert (task.sqlserver_cdc_conn_id, task.database, task.server_time_zone) == tuple(SOURCE.values())


def test_the_hook_a_sensor_opens_reads_its_source_arguments():
    sensor = LsnSensor(task_id="wait", capture_instance="dbo_orders", **SOURCE)
    hook = sensor.new_source_hook()
    assert hook.sqlserver_cdc_conn_id == "cdc_src"
    assert hook.database == "shop"  # the override wins over the connection's schema: no lookup needed


def test_without_arguments_a_sensor_reads_the_default_connection():
    sensor = LsnSensor(task_id="wait", capture_instance="dbo_orders")
    assert sensor.sqlserver_cdc_conn_id == DEFAULT_SQLSERVER_CDC_CONN_ID
    assert sensor.database is None
