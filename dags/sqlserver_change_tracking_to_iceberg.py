"""
Replicate a database where some tables use Change Tracking and others CDC, one data interval per run.

The settings are those of ``sqlserver_cdc_config.yaml`` with its table list split: the Variable
``sqlserver_change_tracking_to_iceberg__tables`` (CDC capture instances, default ``dbo_customers``)
and ``change_tracking.tables`` (``schema.table``). A CT table is snapshotted at a change tracking
version, then each run extracts CHANGETABLE(CHANGES ...) for the versions committed in its data
interval (through ``sys.dm_tran_commit_table``; without VIEW SERVER STATE, from the watermark to
the current version, as the log says); both sources share the merge and the watermark commit.
``SQLSERVER_CT_AUTO_RESNAPSHOT=true`` snapshots a CT table again when its changes after the
watermark were cleaned up, instead of failing the run (docs/change-tracking.md).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag
from airflow_provider_sqlserver_cdc.pipeline.settings import ChangeTrackingSettings
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import read_section

settings = ReplicationSettings.from_yaml(Path(__file__).with_name("sqlserver_cdc_config.yaml"))
change_tracking = read_section(
    ChangeTrackingSettings,
    {
        "tables": ["dbo.orders", "dbo.order_lines", "dbo.type_zoo"],
        "auto_resnapshot": "${SQLSERVER_CT_AUTO_RESNAPSHOT:-false}",
    },
    ChangeTrackingSettings.key,
)
dag = cdc_replication_dag(
    replace(settings, tables=("dbo_customers",), change_tracking=change_tracking),
    dag_id="sqlserver_change_tracking_to_iceberg",
    tags=["sqlserver", "change-tracking", "cdc", "iceberg", "example"],
    doc_md=__doc__,
)
