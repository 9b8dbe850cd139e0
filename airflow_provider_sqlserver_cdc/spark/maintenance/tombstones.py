"""Tombstone retention: purge soft-deleted rows no window that could still be merged is older than.

A tombstone (``_cdc_deleted`` row) exists so that a window older than the delete cannot bring the
row back. Once the delete is older than the source's CDC retention (the capture instance's min
LSN) and a margin, no such window can be extracted any more; docs/maintenance.md gives the argument.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.maintenance.procedures import timestamp_literal
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import COMMIT_TIME, DELETED, START_LSN
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG = logging.getLogger("sqlserver_cdc.maintenance_job")


def purge_floor(capture_instances: Iterable[str], min_lsns: Mapping[str, Lsn]) -> Lsn | None:
    """Return the LSN below which the table's tombstones may go: the lowest min LSN of its capture instances.

    None when a capture instance of the table has no min LSN given (nothing is purged then).

    :param capture_instances: the capture instances the table's applied state names.
    :param min_lsns: capture instance -> the source's ``sys.fn_cdc_get_min_lsn``.
    """
    names = list(capture_instances)
    if not names or any(name not in min_lsns or int(min_lsns[name]) == 0 for name in names):
        return None
    return min(min_lsns[name] for name in names)


def purge_condition(floor: Lsn, committed_before: dt.datetime) -> str:
    """Return the WHERE condition of the tombstones to purge.

    :param floor: tombstones whose delete is at an LSN below this.
    :param committed_before: and committed before this (rows without a commit time: the LSN alone).
    """
    return (
        f"{DELETED} AND {START_LSN} < X'{floor.hex[2:]}' AND "
        f"({COMMIT_TIME} IS NULL OR {COMMIT_TIME} < {timestamp_literal(committed_before)})"
    )


def purge_tombstones(spark: SparkSession, table: str, floor: Lsn, committed_before: dt.datetime) -> int:
    """Delete the table's tombstones older than ``floor`` and ``committed_before``; return how many.

    :param table: the dotted table name.
    :param floor: the lowest min LSN of the table's capture instances.
    :param committed_before: now minus the margin.
    """
    condition = purge_condition(floor, committed_before)
    name = quote_table(table)
    count = int(spark.sql(f"SELECT count(*) AS n FROM {name} WHERE {condition}").first()["n"])
    if count:
        spark.sql(f"DELETE FROM {name} WHERE {condition}")
    LOG.info(
        "table %s: %d tombstone(s) below %s committed before %s purged", table, count, floor, committed_before
    )
    return count
