"""
Replicate SQL Server tables into Apache Iceberg through CDC, from the stored watermark to now.

Each run takes, per capture instance, every change after the last merged LSN up to the max LSN
when the run starts, whatever its data interval: for runs on demand, or to catch up after an
outage in one run. Settings: ``sqlserver_cdc_config.yaml`` (the Variable
``sqlserver_cdc_to_iceberg_watermark__tables`` replaces its table list). Every 15 minutes by
default; one active run at a time is required. Run this DAG or ``sqlserver_cdc_to_iceberg`` per
table, not both. Why the settings are safe: ``airflow_provider_sqlserver_cdc.pipeline.factory``.
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag

dag = cdc_replication_dag(
    ReplicationSettings.from_yaml(Path(__file__).with_name("sqlserver_cdc_config.yaml")),
    dag_id="sqlserver_cdc_to_iceberg_watermark",
    window_mode="watermark",
    description="SQL Server CDC from the stored watermark to the current max LSN, merged into Iceberg",
    doc_md=__doc__,
    tags=["sqlserver", "cdc", "iceberg", "example"],
)
