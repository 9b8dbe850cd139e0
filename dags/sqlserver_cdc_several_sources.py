"""
Replicate two databases in one DAG, a task group per source (docs/several-sources.md).

Settings: ``sqlserver_cdc_config.yaml``, its tables replaced by two sources with the same tables, ``sales_eu``
and ``sales_us`` (``SQLSERVER_CDC_US_CONN_ID``: the US one on another server). Per source: watermarks, staging
``<staging_path>/<source>``, targets ``<namespace>_<source>``; a failing source leaves the other's merge.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import read_section
from airflow_provider_sqlserver_cdc.pipeline.source_settings import SourceGroupSettings, source_key

settings = ReplicationSettings.from_yaml(Path(__file__).with_name("sqlserver_cdc_config.yaml"))
tables = ["dbo_customers", "dbo_orders"]
eu = {"name": "sales_eu", "database": "${SQLSERVER_CDC_EU_DATABASE:-sales_eu}", "tables": tables}
us = {"name": "sales_us", "database": "${SQLSERVER_CDC_US_DATABASE:-sales_us}", "tables": tables}
us["conn_id"] = "${SQLSERVER_CDC_US_CONN_ID:-}"  # empty: source.conn_id, as sales_eu
sources = tuple(read_section(SourceGroupSettings, s, source_key(s["name"])) for s in (eu, us))
if settings.merge.mode == "batch":  # continuous apply takes one source (docs/several-sources.md)
    dag = cdc_replication_dag(
        replace(settings, tables=(), sources=sources),
        dag_id="sqlserver_cdc_several_sources",
        tags=["sqlserver", "cdc", "iceberg", "example"],
        doc_md=__doc__,
    )
