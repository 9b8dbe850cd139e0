"""
Replicate a database where some tables use Change Tracking and others CDC, from the watermarks to now.

The settings are those of ``sqlserver_cdc_config.yaml`` with its table list split: the Variable
``sqlserver_change_tracking_to_iceberg__tables`` (CDC capture instances, default ``dbo_customers``)
and ``change_tracking.tables`` (``schema.table``). A CT table is snapshotted at a change tracking
version, then each run extracts CHANGETABLE(CHANGES ...) after its watermark; both sources share
the merge and the watermark commit (docs/change-tracking.md).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag
from airflow_provider_sqlserver_cdc.pipeline.settings import ChangeTrackingSettings

settings = ReplicationSettings.from_yaml(Path(__file__).with_name("sqlserver_cdc_config.yaml"))
dag = cdc_replication_dag(
    replace(
        settings,
        tables=("dbo_customers",),
        change_tracking=ChangeTrackingSettings(tables=("dbo.orders", "dbo.order_lines", "dbo.type_zoo")),
    ),
    dag_id="sqlserver_change_tracking_to_iceberg",
    window_mode="watermark",
    tags=["sqlserver", "change-tracking", "cdc", "iceberg", "example"],
    doc_md=__doc__,
)
