"""
Replicate SQL Server tables into Apache Iceberg through CDC, one data interval per run.

Settings: ``sqlserver_cdc_config.yaml`` next to this file (the Variable
``sqlserver_cdc_to_iceberg__tables`` replaces its table list at run time). Per capture instance
a run snapshots it (no watermark yet) or waits for the capture job and extracts the changes
committed in the run's data interval; one Spark job merges every window, then the watermarks
move forward. Hourly by default (``SQLSERVER_CDC_SCHEDULE``, any cron; minutely is tested).
The tasks, and why their settings are safe: ``airflow_provider_sqlserver_cdc.pipeline.factory``.
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag

dag = cdc_replication_dag(
    ReplicationSettings.from_yaml(Path(__file__).with_name("sqlserver_cdc_config.yaml")),
    dag_id="sqlserver_cdc_to_iceberg",
    description="SQL Server CDC -> Parquet windows -> Spark MERGE into Iceberg, one data interval per run",
    doc_md=__doc__,
    tags=["sqlserver", "cdc", "iceberg", "example"],
)
