"""Provider metadata that Airflow's ProvidersManager reads through the entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_sqlserver_cdc import __version__

PACKAGE_NAME = "airflow-provider-sqlserver-cdc"
#: The provider's section of the Airflow configuration (``[sqlserver_cdc]``; options declared below).
CONFIG_SECTION = "sqlserver_cdc"

# The form of a ``sqlserver_cdc`` connection: extras, stored under these names in Connection.extra.
CONNECTION_FIELDS: dict[str, Any] = {
    "encrypt": {
        "label": "Encrypt",
        "description": "Encrypt the connection (Microsoft's ODBC driver).",
        "schema": {"type": ["boolean", "null"], "default": True},
    },
    "trust_server_certificate": {
        "label": "Trust server certificate",
        "description": "Accept the server's certificate without validating it (test servers only).",
        "schema": {"type": ["boolean", "null"], "default": False},
    },
    "application_intent": {
        "label": "Application intent",
        "description": "ReadOnly to read from a readable secondary of an availability group.",
        "schema": {"type": ["string", "null"], "enum": ["ReadWrite", "ReadOnly", None]},
    },
    "driver": {
        "label": "ODBC driver",
        "description": (
            "Used only when [sqlserver_cdc] allow_driver_in_extra = True; otherwise refused. Default: "
            "[sqlserver_cdc] default_driver, else ODBC Driver 18 for SQL Server when installed, else FreeTDS."
        ),
        "schema": {"type": ["string", "null"]},
    },
    "tds_version": {
        "label": "TDS version (FreeTDS)",
        "description": "The TDS protocol version FreeTDS speaks; default 7.4.",
        "schema": {"type": ["string", "null"]},
    },
    "server_time_zone": {
        "label": "Server time zone",
        "description": "IANA zone of the server (e.g. Europe/Berlin), for servers with daylight-saving time.",
        "schema": {"type": ["string", "null"]},
    },
}


def get_provider_info() -> dict[str, Any]:
    """Return the provider description Airflow registers (hooks, operators, sensors, triggers)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Microsoft SQL Server CDC",
        "description": (
            "Replicate Microsoft SQL Server tables through Change Data Capture or Change Tracking: "
            "windows per Airflow data interval, Parquet extraction and an idempotent Spark MERGE into "
            "Apache Iceberg or PostgreSQL."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Microsoft SQL Server CDC",
                "external-doc-url": "https://learn.microsoft.com/sql/relational-databases/track-changes/about-change-data-capture-sql-server",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Microsoft SQL Server CDC",
                "python-modules": [
                    "airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc",
                    "airflow_provider_sqlserver_cdc.hooks.change_tracking",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "Microsoft SQL Server CDC",
                "python-modules": [
                    "airflow_provider_sqlserver_cdc.source_task",
                    "airflow_provider_sqlserver_cdc.operators.source_reads",
                    "airflow_provider_sqlserver_cdc.operators.spark_job",
                    "airflow_provider_sqlserver_cdc.operators.target_tables",
                    "airflow_provider_sqlserver_cdc.operators.postgres_target",
                    "airflow_provider_sqlserver_cdc.operators.window_task",
                    "airflow_provider_sqlserver_cdc.operators.extract",
                    "airflow_provider_sqlserver_cdc.operators.snapshot",
                    "airflow_provider_sqlserver_cdc.operators.spark_merge",
                    "airflow_provider_sqlserver_cdc.operators.watermark",
                    "airflow_provider_sqlserver_cdc.operators.continuous_apply",
                    "airflow_provider_sqlserver_cdc.operators.maintenance",
                    "airflow_provider_sqlserver_cdc.operators.retention_headroom",
                    "airflow_provider_sqlserver_cdc.operators.change_tracking",
                    "airflow_provider_sqlserver_cdc.operators.reconcile",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Microsoft SQL Server CDC",
                "python-modules": [
                    "airflow_provider_sqlserver_cdc.sensors.source_window",
                    "airflow_provider_sqlserver_cdc.sensors.lsn",
                    "airflow_provider_sqlserver_cdc.sensors.change_tracking",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": "Microsoft SQL Server CDC",
                "python-modules": [
                    "airflow_provider_sqlserver_cdc.triggers.dataclass_trigger",
                    "airflow_provider_sqlserver_cdc.triggers.lsn",
                    "airflow_provider_sqlserver_cdc.triggers.applied_windows",
                ],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc.SqlServerCdcHook",
                "hook-name": "Microsoft SQL Server CDC",
                "connection-type": "sqlserver_cdc",
                "ui-field-behaviour": {
                    "relabeling": {"schema": "Database"},
                    "placeholders": {"host": "sql.example.com", "port": "1433", "schema": "shop"},
                },
                "conn-fields": CONNECTION_FIELDS,
            }
        ],
        "config": {
            CONFIG_SECTION: {
                "description": (
                    "Which ODBC driver the SQL Server CDC hook loads; which local paths every worker shares."
                ),
                "options": {
                    "default_driver": {
                        "description": (
                            "ODBC driver of connections whose hook is given none: a name registered in "
                            "odbcinst.ini. When not set: ODBC Driver 18 for SQL Server if installed, else FreeTDS."
                        ),
                        "version_added": None,
                        "type": "string",
                        "example": "ODBC Driver 18 for SQL Server",
                        "default": None,
                    },
                    "allow_driver_in_extra": {
                        "description": (
                            "Let a connection name its ODBC driver in its 'driver' extra. The driver is a "
                            "shared library the worker loads, so this lets whoever may edit connections run "
                            "code on workers; like [providers.odbc] allow_driver_in_extra, it is off."
                        ),
                        "version_added": None,
                        "type": "boolean",
                        "example": "True",
                        "default": "False",
                    },
                    "shared_local_paths": {
                        "description": (
                            "Comma-separated local directories mounted at the same place on every worker and "
                            "the Spark cluster (NFS, a shared volume). With a distributed executor (Celery, "
                            "Kubernetes...) a local staging_path or Iceberg warehouse is refused unless it is "
                            "under one of them; with LocalExecutor every local path is accepted."
                        ),
                        "version_added": None,
                        "type": "string",
                        "example": "/mnt/lake,/shared/staging",
                        "default": "",
                    },
                },
            }
        },
    }
