"""
The replication pipeline as one factory call, from typed settings with documented defaults.

A DAG file::

    from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag

    settings = ReplicationSettings.from_yaml("/opt/airflow/dags/cdc.yaml")
    dag = cdc_replication_dag(settings, dag_id="orders_to_iceberg")

Airflow-side only: the Spark job never imports this package.
"""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.pipeline.continuous_apply_dag import cdc_continuous_apply_dag
from airflow_provider_sqlserver_cdc.pipeline.factory import (
    add_replication_tasks,
    cdc_replication_dag,
    cdc_replication_task_group,
    retention_headroom_dag,
)
from airflow_provider_sqlserver_cdc.pipeline.settings import (
    DagSettings,
    ExtractSettings,
    MergeSettings,
    ReplicationSettings,
    SensorSettings,
    SnapshotSettings,
    SourceSettings,
    SparkSettings,
)
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import SettingsError

__all__ = [
    "DagSettings",
    "ExtractSettings",
    "MergeSettings",
    "ReplicationSettings",
    "SensorSettings",
    "SettingsError",
    "SnapshotSettings",
    "SourceSettings",
    "SparkSettings",
    "add_replication_tasks",
    "cdc_continuous_apply_dag",
    "cdc_replication_dag",
    "cdc_replication_task_group",
    "retention_headroom_dag",
]
