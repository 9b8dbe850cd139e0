"""
Downstream of the replication: once per replicated interval of ``dbo.orders``, take that interval's delta.

Scheduled on the target's asset (docs/assets.md): each merge emits an event per data interval with the LSN
range(s) and Iceberg snapshot id, turned into the delta's query. A PostgreSQL target emits none: no DAG.
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import DAG, PartitionedAssetTimetable, task

from airflow_provider_sqlserver_cdc.assets import delta_query, target_asset
from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings

settings = ReplicationSettings.from_yaml(Path(__file__).with_name("sqlserver_cdc_config.yaml"))
if settings.merge.target.kind == "iceberg":
    orders = target_asset(f"{settings.merge.namespace}.dbo_orders")
    with DAG(
        "sqlserver_cdc_orders_delta", schedule=PartitionedAssetTimetable(assets=orders), tags=["example"]
    ):

        @task
        def orders_delta(triggering_asset_events=None, partition_key=None) -> dict:
            """The event of this partition and the SQL that reads its delta from the target."""
            event = triggering_asset_events[orders][-1]
            return {"partition_key": partition_key, **event.extra, "query": delta_query(event.extra)}

        orders_delta()
