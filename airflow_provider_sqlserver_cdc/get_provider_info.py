"""Provider metadata that Airflow's ProvidersManager reads through the entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_sqlserver_cdc import __version__

PACKAGE_NAME = "airflow-provider-sqlserver-cdc"


def get_provider_info() -> dict[str, Any]:
    """Return the provider description Airflow registers (hooks, operators, sensors, triggers)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Microsoft SQL Server CDC",
        "description": (
            "Replicate Microsoft SQL Server tables through Change Data Capture: LSN windows per "
            "Airflow data interval, Parquet extraction and an idempotent Spark MERGE into Apache Iceberg."
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
                "python-modules": ["airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc"],
            }
        ],
        "operators": [
            {
                "integration-name": "Microsoft SQL Server CDC",
                "python-modules": [
                    "airflow_provider_sqlserver_cdc.operators.extract",
                    "airflow_provider_sqlserver_cdc.operators.watermark",
                    "airflow_provider_sqlserver_cdc.operators.spark_merge",
                    "airflow_provider_sqlserver_cdc.operators.snapshot",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": "Microsoft SQL Server CDC",
                "python-modules": ["airflow_provider_sqlserver_cdc.sensors.lsn"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Microsoft SQL Server CDC",
                "python-modules": ["airflow_provider_sqlserver_cdc.triggers.lsn"],
            }
        ],
        "connection-types": [],
    }
