"""
The defaults of the provider's task arguments: each stated once, for the operators and the pipeline settings.

The operators take these as their constructors' defaults and ``pipeline/settings.py`` as the
defaults of its settings (which says why each is safe), so an operator used on its own and a
pipeline built from settings behave alike. A default that belongs to one library module (a
batch size, a chunk, a retention) is stated there and only named here.
"""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.extraction.instance_switch import (
    DEFAULT_CREATE_CAPTURE_INSTANCE,
    DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE,
)
from airflow_provider_sqlserver_cdc.hooks.consistent_point import (
    DEFAULT_ALLOW_TABLE_LOCK_FALLBACK,
    DEFAULT_LOCK_TIMEOUT_SECONDS,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE, SqlServerCdcHook
from airflow_provider_sqlserver_cdc.parquet.window_writer import DEFAULT_MAX_FILE_BYTES
from airflow_provider_sqlserver_cdc.snapshot.table_copy import DEFAULT_CHUNK_ROWS
from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import (
    DEFAULT_ORPHAN_AGE_HOURS,
    DEFAULT_RETAIN_LAST,
    DEFAULT_SNAPSHOT_RETENTION_HOURS,
)
from airflow_provider_sqlserver_cdc.spark.merge.arguments import (
    DEFAULT_DELETE_MODE,
    DEFAULT_JDBC_CONNECTIONS,
    DEFAULT_TABLE_NAME_TEMPLATE,
    DEFAULT_TARGET_KIND,
)
from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import (
    DEFAULT_MERGE_STRATEGY,
    DEFAULT_WRITE_MODE,
)
from airflow_provider_sqlserver_cdc.spark.merge.scale_options import (
    DEFAULT_CONCURRENT_TABLES,
    DEFAULT_PARTITION_BUCKETS,
)
from airflow_provider_sqlserver_cdc.tsql import DEFAULT_ROW_FILTER_OPTION
from airflow_provider_sqlserver_cdc.window.contiguity import DEFAULT_ON_GAP
from airflow_provider_sqlserver_cdc.window.manifest import DEFAULT_WINDOW_MODE
from airflow_provider_sqlserver_cdc.window.schema_drift import DEFAULT_ON_SCHEMA_CHANGE

__all__ = [
    "DEFAULT_ALLOW_TABLE_LOCK_FALLBACK",
    "DEFAULT_APPLY_POLL_SECONDS",
    "DEFAULT_APPLY_TIMEOUT_SECONDS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CHUNK_ROWS",
    "DEFAULT_CONCURRENT_TABLES",
    "DEFAULT_CREATE_CAPTURE_INSTANCE",
    "DEFAULT_DELETE_MODE",
    "DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE",
    "DEFAULT_JDBC_CONNECTIONS",
    "DEFAULT_LOCK_TIMEOUT_SECONDS",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MERGE_MODE",
    "DEFAULT_MERGE_STRATEGY",
    "DEFAULT_HEADROOM_CRITICAL_MINUTES",
    "DEFAULT_HEADROOM_WARNING_MINUTES",
    "DEFAULT_ON_GAP",
    "DEFAULT_ON_SCHEMA_CHANGE",
    "DEFAULT_ORPHAN_AGE_HOURS",
    "DEFAULT_PARTITION_BUCKETS",
    "DEFAULT_RETAIN_LAST",
    "DEFAULT_ROW_FILTER_OPTION",
    "DEFAULT_SNAPSHOT_RETENTION_HOURS",
    "DEFAULT_SQLSERVER_CDC_CONN_ID",
    "DEFAULT_TABLE_NAME_TEMPLATE",
    "DEFAULT_TARGET_KIND",
    "DEFAULT_WINDOW_MODE",
    "DEFAULT_WRITE_MODE",
    "MERGE_MODES",
]

# The source connection of every task that reads SQL Server.
DEFAULT_SQLSERVER_CDC_CONN_ID: str = SqlServerCdcHook.default_conn_name

# CdcExtractOperator: DEFAULT_ROW_FILTER_OPTION (keeping update before-images) is stated in tsql.py; the
# window mode of the sensor, the extract, the Change Tracking tasks and the pipeline in window/manifest.py;
# on_gap in window/contiguity.py, on_schema_change in window/schema_drift.py, the capture-instance switch's
# opt-ins in extraction/instance_switch.py (imported above).
# CdcSnapshotOperator and CdcReconcileOperator: the consistent read's, in hooks/consistent_point.py.

# CdcSparkMergeOperator: the merge job's defaults, stated in spark/merge/arguments.py (imported above).

# Continuous apply (docs/continuous-apply.md): WaitForAppliedWindowsOperator and merge.mode
MERGE_MODES = ("batch", "continuous")
DEFAULT_MERGE_MODE = "batch"
DEFAULT_APPLY_TIMEOUT_SECONDS = (
    600.0  # a run's windows not applied within 10 minutes: the application is down or behind
)
DEFAULT_APPLY_POLL_SECONDS = 2.0

# CdcRetentionHeadroomOperator (time to loss; docs/operations.md): with SQL Server's default
# retention (3 days) a day of headroom left means runs have failed for two days; four hours is
# the time left to apply the backlog or raise the retention before changes are deleted.
DEFAULT_HEADROOM_WARNING_MINUTES = 24 * 60.0
DEFAULT_HEADROOM_CRITICAL_MINUTES = 4 * 60.0
