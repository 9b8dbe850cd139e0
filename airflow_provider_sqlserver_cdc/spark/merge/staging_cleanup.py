"""Staging tables a crashed driver left behind: found by name beside their target, dropped once old enough.

A storage-partitioned MERGE writes the window's net effect into ``<table>__cdc_staging_<12 hex>``
(``staged_merge``) and drops it afterwards, committed or not. A driver that dies in between (killed
task, lost machine) leaves it in the catalog with its files. Before each staged MERGE the job drops
the target's own staging tables whose last metadata change is older than ``ORPHAN_AGE``. A staging
table lives only while one MERGE runs, which the merge task's ``execution_timeout`` (60 minutes by
default) bounds far below that age, so a table another merge of the same target is still using is
never dropped; the staging tables of other targets are not looked at.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.statements import quote_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG = logging.getLogger("sqlserver_cdc.merge_job")

#: Staging tables older than this are orphans: no MERGE runs that long (the merge task's timeout is 60 min).
ORPHAN_AGE = dt.timedelta(hours=24)
#: ``staged_merge.staging_table_name``'s suffix: ``__cdc_staging_`` and 12 hex digits.
STAGING_NAME = r"__cdc_staging_[0-9a-f]{12}"


def staging_tables_of(spark: SparkSession, table: str) -> list[str]:
    """Return the dotted names of the staging tables of ``table`` in its namespace.

    :param table: the dotted target table name, ``catalog.namespace.table``.
    """
    namespace, _, name = table.rpartition(".")
    pattern = re.compile(re.escape(name.lower()) + STAGING_NAME)
    rows = spark.sql(f"SHOW TABLES IN {quote_table(namespace)}").collect()
    return sorted(f"{namespace}.{row.tableName}" for row in rows if pattern.fullmatch(row.tableName.lower()))


def last_change_millis(spark: SparkSession, table: str) -> int:
    """Return when the Iceberg table's metadata last changed (epoch milliseconds; a staging table's CTAS).

    :param table: the dotted table name.
    """
    row = spark.sql(
        f"SELECT unix_millis(max(timestamp)) AS at FROM {quote_table(table)}.metadata_log_entries"
    ).first()
    if row is None or row.at is None:
        raise ValueError(f"{table} has no metadata log")
    return int(row.at)


def drop_orphaned_staging_tables(
    spark: SparkSession, table: str, *, older_than: dt.timedelta | None = None, now_millis: int | None = None
) -> list[str]:
    """Drop (with their files) the staging tables of ``table`` last changed before ``older_than`` ago; return them.

    A table that cannot be read or dropped is logged and left for the next merge.

    :param table: the dotted target table name.
    :param older_than: the age from which a staging table is an orphan; default ``ORPHAN_AGE``.
    :param now_millis: the current time (epoch milliseconds); default the clock's.
    """
    age_limit = ORPHAN_AGE if older_than is None else older_than
    now = int(time.time() * 1000) if now_millis is None else now_millis
    try:
        candidates = staging_tables_of(spark, table)
    except Exception as err:  # the merge does not depend on it
        LOG.warning("target %s: could not list its namespace for orphaned staging tables (%s)", table, err)
        return []
    dropped = []
    for staging in candidates:
        try:
            age = dt.timedelta(milliseconds=now - last_change_millis(spark, staging))
            if age < age_limit:
                continue
            spark.sql(f"DROP TABLE IF EXISTS {quote_table(staging)} PURGE")
        except Exception as err:  # e.g. a half-written table, or one dropped by another merge meanwhile
            LOG.warning("target %s: could not check or drop the staging table %s (%s)", table, staging, err)
            continue
        LOG.warning(
            "target %s: dropped the staging table %s, left %s ago by a merge that did not finish "
            "(older than %s)",
            table,
            staging,
            str(age).split(".")[0],
            age_limit,
        )
        dropped.append(staging)
    return dropped
