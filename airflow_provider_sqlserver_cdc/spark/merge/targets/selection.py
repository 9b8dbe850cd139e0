"""The target the job's settings select: Iceberg (default) or a relational database over JDBC."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.arguments import POSTGRES_TARGET
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.targets.base import MergeTarget
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import IcebergTarget
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import (
    PASSWORD_ENV,
    USER_ENV,
    JdbcCredentials,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.postgres import PostgresTarget

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings


def target_from_settings(spark: SparkSession, settings: MergeJobSettings) -> MergeTarget:
    """Return the target the settings select.

    :param spark: the job's session.
    :param settings: the job's settings (``target_kind`` and, for ``postgres``, the URL and where the login is).
    """
    if settings.target_kind != POSTGRES_TARGET:
        return IcebergTarget(
            spark,
            settings.write_mode,
            settings.table_properties,
            settings.partition_buckets,
            merge_strategy=settings.merge_strategy,
        )
    if not settings.jdbc_url:
        raise MergeJobError(f"--target-kind {POSTGRES_TARGET} needs --jdbc-url")
    if settings.jdbc_credentials_file:
        credentials = JdbcCredentials.from_file(settings.jdbc_credentials_file)
    else:
        found = JdbcCredentials.from_environment()
        if found is None:
            raise MergeJobError(
                f"no login for the JDBC target: set {USER_ENV} and {PASSWORD_ENV} in the environment of "
                "spark-submit (the driver's, in client deploy mode) or pass --jdbc-credentials-file"
            )
        credentials = found
    return PostgresTarget(spark, settings.jdbc_url, credentials, settings.jdbc_connections)
