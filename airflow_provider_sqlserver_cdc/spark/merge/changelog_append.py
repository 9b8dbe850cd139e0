"""The change-log append: every change row of a window, once, with its LSN position and operation.

A change log is not merged: there may be no key to match rows by (a table without a primary key
or unique index may hold the same row twice). Exactly-once comes from the applied LSN ranges
instead: a window holds every change of its capture instance whose LSN lies in its range, so the
rows of a window whose LSN lies in a range the table already holds (recorded in the same commit as
the rows that brought it) are already there, and are left out. A window inside the applied ranges
is skipped before it is read (``job._pending``); one that only overlaps them appends the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import START_LSN
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote, quote_table
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import read_window
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, add_range

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from airflow_provider_sqlserver_cdc.spark.merge.targets.base import ChangeBatch


def outside_ranges(ranges: Sequence[LsnRange]) -> Column | None:
    """Return the condition that a row's ``_cdc_start_lsn`` lies in none of ``ranges`` (None: no ranges)."""
    from pyspark.sql import functions as F

    if not ranges:
        return None
    inside = F.lit(False)
    for first, last in ranges:
        low, high = (F.lit(Lsn.from_int(value).value) for value in (first, last))
        inside = inside | F.col(START_LSN).between(low, high)
    return ~inside


def changelog_rows(spark: SparkSession, batch: ChangeBatch) -> DataFrame | None:
    """Return the batch's change rows the table lacks, every before-image kept; None when there are none.

    Windows are taken in LSN order; each leaves out the rows inside the ranges the table held
    before the batch (``batch.applied_before``) or that an earlier window of the batch brought.
    """
    held = {ci: list(ranges) for ci, ranges in batch.applied_before.items()}
    frames = []
    for window in sorted(batch.windows, key=lambda w: w.manifest.lsn_range):
        manifest = window.manifest
        ranges = held.get(manifest.capture_instance, [])
        if manifest.row_count > 0:
            rows = read_window(spark, window, batch.plan.table, keep_before_images=True)
            condition = outside_ranges(ranges)
            frames.append(rows if condition is None else rows.where(condition))
        held[manifest.capture_instance] = add_range(ranges, *manifest.lsn_range)
    if not frames:
        return None
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame, allowMissingColumns=True)
    return rows


def table_shaped(rows: DataFrame, table_columns: Sequence[tuple[str, str]]) -> DataFrame:
    """Return ``rows`` with the table's columns in its order: NULL for a column the windows lack.

    :param table_columns: the table's column names and Spark SQL types.
    """
    from pyspark.sql import functions as F

    present = {c.lower(): c for c in rows.columns}
    return rows.select(
        *[
            F.col(quote(present[name.lower()])).cast(sql_type).alias(name)
            if name.lower() in present
            else F.lit(None).cast(sql_type).alias(name)
            for name, sql_type in table_columns
        ]
    )


def changelog_frame(spark: SparkSession, batch: ChangeBatch) -> DataFrame:
    """Return the rows to append for a batch (``changelog_rows``), shaped as the table's columns."""
    schema = spark.table(quote_table(batch.plan.table)).schema
    rows = changelog_rows(spark, batch)
    if rows is None:  # empty windows: the commit records their ranges
        rows = spark.createDataFrame([], schema)
    return table_shaped(rows, [(f.name, f.dataType.simpleString()) for f in schema.fields])
