"""
Replicate tables read through Change Tracking and CDC, one data interval per run (docs/change-tracking.md).

Settings: ``sqlserver_cdc_config.yaml`` with its table list split: CDC capture instances in the Variable
``sqlserver_change_tracking_to_iceberg__tables`` (default ``dbo_customers``), CT tables (``schema.table``)
below. A CT window holds the versions committed in the data interval (``sys.dm_tran_commit_table``; else up
to the current version, as the log says). ``SQLSERVER_CT_AUTO_RESNAPSHOT=true``: snapshot a CT table whose
changes after its watermark were cleaned up again, instead of failing the run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag
from airflow_provider_sqlserver_cdc.pipeline.settings import ChangeTrackingSettings
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import read_section

settings = ReplicationSettings.from_yaml(Path(__file__).with_name("sqlserver_cdc_config.yaml"))
tracked = {"tables": ["dbo.orders", "dbo.order_lines", "dbo.type_zoo"]}
tracked["auto_resnapshot"] = "${SQLSERVER_CT_AUTO_RESNAPSHOT:-false}"
tracking = read_section(ChangeTrackingSettings, tracked, ChangeTrackingSettings.key)
dag = cdc_replication_dag(
    replace(settings, tables=("dbo_customers",), change_tracking=tracking),
    dag_id="sqlserver_change_tracking_to_iceberg",
    tags=["sqlserver", "change-tracking", "cdc", "iceberg", "example"],
    doc_md=__doc__,
)
