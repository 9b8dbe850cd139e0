"""
A DAG that keeps the continuous apply application running, from the pipeline's settings (docs/continuous-apply.md).

::

    settings = ReplicationSettings.from_yaml("/opt/airflow/dags/cdc.yaml")   # merge.mode: continuous
    replication = cdc_replication_dag(settings, dag_id="orders_to_iceberg")
    apply = cdc_continuous_apply_dag(settings, dag_id="orders_to_iceberg__apply")

One task, ``continuous_apply`` (ContinuousApplyOperator), scheduled ``@once``: it runs as long as the
application does, and its retries (``retries``, a short delay, no execution timeout) restart it after
a crash; it resumes from what the tables hold. Trigger the DAG again (or clear the task) after
stopping it on purpose. The merge options are the pipeline's own, as the batch merge task gets them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG

from airflow_provider_sqlserver_cdc.operators.continuous_apply import ContinuousApplyOperator
from airflow_provider_sqlserver_cdc.operators.spark_merge import merge_job_arguments
from airflow_provider_sqlserver_cdc.pipeline.settings import ReplicationSettings
from airflow_provider_sqlserver_cdc.spark.merge.arguments import POSTGRES_TARGET

#: How often a crashed application is restarted before the task fails (then someone has to look).
DEFAULT_RESTARTS = 100


def continuous_apply_arguments(settings: ReplicationSettings) -> list[str]:
    """Return the merge job's arguments the application takes from the pipeline's settings (no windows)."""
    merge = settings.merge
    return merge_job_arguments(
        [],
        namespace=merge.namespace,
        table_name_template=merge.table_name_template,
        targets=dict(merge.tables),
        delete_mode=merge.delete_mode,
        write_mode=merge.write_mode,
        properties=dict(merge.table_properties),
        jdbc_url=merge.target.url if merge.target.kind == POSTGRES_TARGET else None,
        jdbc_connections=merge.target.connections,
        jdbc_credentials_file=merge.target.credentials_file,
        partition_buckets=merge.partition_buckets,
        concurrent_tables=merge.concurrent_tables,
        merge_strategy=merge.merge_strategy,
        table_modes=dict(merge.target.table_modes),
    )


def cdc_continuous_apply_dag(
    settings: ReplicationSettings, *, dag_id: str, restarts: int = DEFAULT_RESTARTS, **dag_kwargs: Any
) -> DAG:
    """
    Return a DAG whose one task runs the continuous apply application for the pipeline's staging path.

    :param settings: the pipeline's settings (``merge.mode`` should be ``continuous``).
    :param dag_id: the DAG's id.
    :param restarts: the task's retries: how often a crashed application is restarted.
    :param dag_kwargs: further DAG arguments.
    """
    if settings.sources:
        raise ValueError(
            f"{dag_id}: the continuous apply application takes one source (docs/several-sources.md)"
        )
    if settings.merge.target.kind == POSTGRES_TARGET and not settings.merge.target.credentials_file:
        raise ValueError(
            f"{dag_id}: a PostgreSQL target's login reaches the long-running application only through "
            "merge.target.credentials_file (a mode-600 file where the driver runs)"
        )
    arguments = {
        "schedule": "@once",
        "start_date": settings.dag.start_date,
        "catchup": False,
        "max_active_runs": 1,
        **dag_kwargs,
    }
    with DAG(dag_id, **arguments) as dag:
        ContinuousApplyOperator(
            task_id="continuous_apply",
            staging_path=settings.staging_path,
            merge_arguments=continuous_apply_arguments(settings),
            **settings.spark.operator_arguments(),
            retries=restarts,
            retry_delay=dt.timedelta(seconds=30),
            execution_timeout=None,
        )
    return dag
