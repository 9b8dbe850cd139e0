"""The storage-partitioned MERGE: the window's net effect staged in an Iceberg table laid out like the target.

Spark 3.5 joins two Iceberg tables bucket by bucket, without shuffling either, when both report the
same partitioning (storage-partitioned join, SPJ). The MERGE's source is therefore not a DataFrame but
a staging table with the target's partition spec (``partition_layout.staging_layout``), written in the
target's catalog and namespace, then dropped. ``SPJ_CONF`` holds the settings for the MERGE statement.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.staging_cleanup import drop_orphaned_staging_tables
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote, quote_table
from airflow_provider_sqlserver_cdc.spark.merge.temporary_view import temporary_view
from airflow_provider_sqlserver_cdc.spark.merge.write_distribution import UNSHUFFLED_WRITE_CONF

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_provider_sqlserver_cdc.spark.merge.partition_layout import StagingLayout

LOG = logging.getLogger("sqlserver_cdc.merge_job")

#: The session settings of a storage-partitioned MERGE (Iceberg's TestStoragePartitionedJoinsInRowLevelOperations).
#: ``spark.sql.iceberg.distribution-mode=none`` stands for the table's ``write.merge.distribution-mode=none``
#: for this statement only: each task then writes the rows of its own bucket, so the MERGE's output
#: is not shuffled either, and the table keeps its write distribution for every other writer.
SPJ_CONF = {
    "spark.sql.sources.v2.bucketing.enabled": "true",
    "spark.sql.sources.v2.bucketing.pushPartValues.enabled": "true",
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.iceberg.planning.preserve-data-grouping": "true",
    **UNSHUFFLED_WRITE_CONF,
}

#: The staging table is written once and read once, right away: no shuffle to the writers (each task
#: writes a file per bucket it holds; the MERGE's scan groups them by bucket) and no compression.
STAGING_PROPERTIES = (
    "'format-version'='2', 'write.distribution-mode'='none', 'write.spark.fanout.enabled'='true', "
    "'write.parquet.compression-codec'='uncompressed'"
)
STAGING_SUFFIX = "__cdc_staging_"
STAGING_VIEW = "sqlserver_cdc_staging_rows"


def staging_table_name(table: str) -> str:
    """Return a fresh staging table name beside ``table`` (unique: two merges of one table may run at once).

    :param table: the dotted target table name.
    """
    return f"{table}{STAGING_SUFFIX}{uuid.uuid4().hex[:12]}"


@contextmanager
def staged_net_effect(
    spark: SparkSession, table: str, net_effect: DataFrame, layout: StagingLayout
) -> Iterator[str]:
    """Write ``net_effect`` into a staging table partitioned like ``table``; yield its name, drop it afterwards.

    Staging tables of ``table`` that a crashed driver left are dropped first (``staging_cleanup``).

    The key columns keep the target's types: Iceberg's bucket of an ``int`` and of a ``bigint`` are
    different functions to Spark, so the two sides would not be co-partitioned.

    :param table: the target table (its catalog and namespace hold the staging table).
    :param net_effect: one row per key (``net_effect_frame``).
    :param layout: the target's partition spec as transforms.
    """
    from pyspark.sql import functions as F

    target_types = {f.name.lower(): f.dataType for f in spark.table(quote_table(table)).schema.fields}
    frame = net_effect.select(
        *[
            F.col(quote(c)).cast(target_types[c.lower()]).alias(c)
            if c.lower() in target_types
            else F.col(quote(c))
            for c in net_effect.columns
        ]
    )
    drop_orphaned_staging_tables(spark, table)
    name = staging_table_name(table)
    try:
        with temporary_view(frame, STAGING_VIEW) as staging_view:
            spark.sql(
                f"CREATE TABLE {quote_table(name)} USING iceberg{layout.clause()} "
                f"TBLPROPERTIES ({STAGING_PROPERTIES}) "
                f"AS SELECT * FROM {staging_view}"
            )
        yield name
    finally:
        try:
            spark.sql(f"DROP TABLE IF EXISTS {quote_table(name)} PURGE")
        except Exception as err:  # the merge's outcome does not depend on it
            LOG.warning(
                "target %s: could not drop the staging table %s (%s); drop it by hand", table, name, err
            )
