"""The Iceberg procedures the maintenance job calls (``CALL <catalog>.system.<procedure>``), one function each."""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.statements import quote

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession

LOG = logging.getLogger("sqlserver_cdc.maintenance_job")


def timestamp_literal(moment: dt.datetime) -> str:
    """Return a Spark SQL timestamp literal of an aware datetime, in UTC (the job's session time zone).

    :param moment: the time.
    """
    return f"TIMESTAMP '{moment.astimezone(dt.UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def _call(spark: SparkSession, table: str, procedure: str, **arguments: str) -> Row | None:
    catalog, _, name = table.partition(".")
    named = "".join(f", {key} => {value}" for key, value in arguments.items())
    rows = spark.sql(f"CALL {quote(catalog)}.system.{procedure}(table => '{name}'{named})").collect()
    LOG.info("table %s: %s: %s", table, procedure, rows[0].asDict() if rows else "done")
    return rows[0] if rows else None


def _options(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"'{key}', '{value}'" for key, value in options.items()) + ")"


def rewrite_data_files(
    spark: SparkSession, table: str, sort_columns: list[str], large_file_bytes: int | None = None
) -> Row | None:
    """Compact data files into target-size files sorted on the key, applying their position deletes.

    Sorting on the key keeps the files' key ranges apart, which the merge's key-range bound prunes on.
    A full compaction (``large_file_bytes`` None) rewrites every data file that has a delete; a light
    one only the data files under ``large_file_bytes`` (a merge's small files), so that the large ones,
    which the retained snapshots share, are not copied (docs/maintenance.md, "Disk").

    :param table: the dotted table name.
    :param sort_columns: the table's key (identifier) columns; empty: bin-packing.
    :param large_file_bytes: light compaction: data files at least this large are left alone.
    """
    options = {"remove-dangling-deletes": "true", "partial-progress.enabled": "true"}
    if large_file_bytes is None:
        options["delete-file-threshold"] = (
            "1"  # a data file with any delete is rewritten (its deletes applied)
        )
    else:
        options |= {"min-file-size-bytes": str(large_file_bytes), "min-input-files": "2"}
    arguments = {"options": _options(options)}
    if sort_columns:
        arguments |= {"strategy": "'sort'", "sort_order": "'" + ", ".join(sort_columns) + "'"}
    return _call(spark, table, "rewrite_data_files", **arguments)


def rewrite_position_delete_files(spark: SparkSession, table: str) -> Row | None:
    """Compact the position-delete files left and drop those whose data files are gone.

    :param table: the dotted table name.
    """
    return _call(spark, table, "rewrite_position_delete_files", options="map('rewrite-all', 'true')")


def expire_snapshots(
    spark: SparkSession, table: str, older_than: dt.datetime, retain_last: int
) -> Row | None:
    """Expire the snapshots older than the time-travel window, keeping at least ``retain_last``.

    :param table: the dotted table name.
    :param older_than: snapshots committed before this are expired.
    :param retain_last: ancestors of the current snapshot kept whatever their age.
    """
    return _call(
        spark,
        table,
        "expire_snapshots",
        older_than=timestamp_literal(older_than),
        retain_last=str(retain_last),
    )


def rewrite_manifests(spark: SparkSession, table: str) -> Row | None:
    """Rewrite the manifests into fewer, clustered ones (faster scan planning).

    :param table: the dotted table name.
    """
    return _call(spark, table, "rewrite_manifests")


def remove_orphan_files(spark: SparkSession, table: str, older_than: dt.datetime) -> Row | None:
    """Delete files under the table's location that no metadata references, written before ``older_than``.

    :param table: the dotted table name.
    :param older_than: only files older than this (Iceberg refuses less than a day: a commit in progress
        has files no metadata references yet).
    """
    return _call(spark, table, "remove_orphan_files", older_than=timestamp_literal(older_than))
