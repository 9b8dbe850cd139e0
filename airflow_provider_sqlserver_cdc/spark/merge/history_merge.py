"""The history (SCD type 2) merge: every change of a key is a version, closed by the key's next change.

The history of a key is a function of the set of its change rows, so it does not depend on the
order windows arrive in, nor on how often one arrives:

* the key's change rows are ordered by their LSN position ``(_cdc_start_lsn, _cdc_seqval,
  _cdc_operation)``; an update's before-image is left out when the after-image of the same
  position has the same key (the update kept the key);
* every row is a version: ``_valid_from`` is its commit time, ``_valid_to`` the commit time of
  the key's next row (NULL for the last one); an insert or update after-image is a live version,
  a delete, or the before-image of an update that changed the key, a tombstone
  (``_cdc_deleted``) that closes the live version before it;
* ``_is_current`` is true for the last row of a key when it is live: ``WHERE _is_current`` is the
  current state of the source table.

A batch inserts the rows of its windows that the table lacks (matched on key and position: the
LSN guard, per version) and corrects ``_valid_to`` / ``_is_current`` of the table's rows whose next
row changed, in one MERGE that also records the applied LSN ranges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import (
    COMMIT_TIME,
    DELETED,
    IS_CURRENT,
    OPERATION,
    POSITION_COLUMNS,
    SEQVAL,
    START_LSN,
    VALID_FROM,
    VALID_TO,
)
from airflow_provider_sqlserver_cdc.spark.merge.statements import KeyCondition, quote, quote_table
from airflow_provider_sqlserver_cdc.spark.merge.table_modes import HISTORY, meta_columns
from airflow_provider_sqlserver_cdc.window.net_effect import (
    DELETE,
    DELETING_OPERATIONS,
    INSERT,
    UPDATE_AFTER,
    UPDATE_BEFORE,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The start of the name of the history MERGE's source view (``temporary_view``).
HISTORY_SOURCE_VIEW = "sqlserver_cdc_history_source"
#: The most change rows whose keys are broadcast to the scan of the table (a few MB of keys; beyond it the
#: table's rows are shuffled to meet them).
BROADCAST_KEYS_MAX = 1_000_000
#: Where a row of the MERGE's source comes from: a window (a version to insert) or the table (to correct).
ORIGIN = "_cdc_origin"
FROM_WINDOW = "window"
FROM_TABLE = "table"
_OLD_VALID_TO = "_cdc_old_valid_to"
_OLD_IS_CURRENT = "_cdc_old_is_current"
_AFTER_IMAGE = "_cdc_key_kept"


def version_rows(changes: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """Return a batch's change rows as versions: one per key and position, ``_cdc_deleted`` set.

    Before-images of updates that kept the key are still among them (the reader drops most by
    their update mask); ``history_source`` drops the rest, as it orders each key's rows anyway.
    """
    from pyspark.sql import functions as F

    rows = changes.dropDuplicates([*key_columns, *POSITION_COLUMNS])
    return rows.withColumn(DELETED, F.col(OPERATION).isin(*DELETING_OPERATIONS))


def retired_rows(
    table_rows: DataFrame,
    versions: DataFrame,
    key_columns: Sequence[str],
    snapshot_lsn: str,
    snapshot_time: str | None,
) -> DataFrame:
    """Return tombstones at a snapshot's LSN for the keys live in the table before it but absent from it.

    :param table_rows: every row of the history table.
    :param versions: the snapshot's rows (``version_rows``).
    :param snapshot_lsn: the snapshot's LSN (``0x`` hex).
    :param snapshot_time: when it was taken (ISO 8601), for ``_cdc_commit_time``; None: the newest
        commit time among its rows.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    lsn = F.lit(bytes.fromhex(snapshot_lsn[2:]))
    keys = [F.col(quote(k)) for k in key_columns]
    newest_first = Window.partitionBy(*keys).orderBy(*[F.col(c).desc() for c in POSITION_COLUMNS])
    snapshot_position = F.struct(lsn.alias(START_LSN), lsn.alias(SEQVAL), F.lit(INSERT).alias(OPERATION))
    latest = (
        table_rows.withColumn("_cdc_rank", F.row_number().over(newest_first))
        .where((F.col("_cdc_rank") == 1) & ~F.col(DELETED))
        .where(F.struct(*[F.col(c) for c in POSITION_COLUMNS]) < snapshot_position)
        .join(versions.select(*keys), on=list(key_columns), how="left_anti")
    )
    time = F.lit(snapshot_time).cast("timestamp") if snapshot_time else F.lit(None).cast("timestamp")
    newest = versions.agg(F.max(COMMIT_TIME).alias("_cdc_snapshot_time"))
    positioned = {
        START_LSN: lsn,
        SEQVAL: lsn,
        OPERATION: F.lit(DELETE),
        COMMIT_TIME: F.coalesce(time, F.col("_cdc_snapshot_time")),
        DELETED: F.lit(True),
    }
    return latest.crossJoin(newest).select(
        *[positioned[c].alias(c) if c in positioned else F.col(quote(c)) for c in versions.columns]
    )


def history_source(versions: DataFrame, table_rows: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """Return the MERGE's source: the versions the table lacks, and table rows whose validity changes.

    :param versions: the batch's versions (``version_rows``, plus any ``retired_rows``).
    :param table_rows: the table's rows of (at least) the batch's keys.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    identity = [*key_columns, *POSITION_COLUMNS]
    held = table_rows.select(
        *[F.col(quote(c)) for c in identity],
        F.col(COMMIT_TIME),
        F.col(DELETED),
        F.col(VALID_TO).alias(_OLD_VALID_TO),
        F.col(IS_CURRENT).alias(_OLD_IS_CURRENT),
        F.lit(FROM_TABLE).alias(ORIGIN),
    )
    new = versions.join(held.select(*[F.col(quote(c)) for c in identity]), on=list(identity), how="left_anti")
    new = new.withColumn(ORIGIN, F.lit(FROM_WINDOW))
    both = new.unionByName(held, allowMissingColumns=True)
    by_position = Window.partitionBy(*[F.col(quote(k)) for k in key_columns]).orderBy(
        *[F.col(c) for c in POSITION_COLUMNS]
    )
    next_lsn = F.lead(START_LSN).over(by_position)
    # A before-image right before the after-image of the same change (LSN and seqval) is the update
    # of a key it kept: not a version. The row before it is closed at the same commit time either way.
    kept_key = F.coalesce(  # false for a key's last row (no next row)
        (F.col(OPERATION) == UPDATE_BEFORE)
        & (F.lead(OPERATION).over(by_position) == UPDATE_AFTER)
        & (next_lsn == F.col(START_LSN))
        & (F.lead(SEQVAL).over(by_position) == F.col(SEQVAL)),
        F.lit(False),
    )
    both = (
        both.withColumn(VALID_FROM, F.col(COMMIT_TIME))
        .withColumn(VALID_TO, F.lead(COMMIT_TIME).over(by_position))
        .withColumn(IS_CURRENT, next_lsn.isNull() & ~F.col(DELETED))
        .withColumn(_AFTER_IMAGE, kept_key)
    )
    changed = ~F.col(_AFTER_IMAGE) & (
        (F.col(ORIGIN) == FROM_WINDOW)
        | ~F.col(VALID_TO).eqNullSafe(F.col(_OLD_VALID_TO))
        | (F.col(IS_CURRENT) != F.col(_OLD_IS_CURRENT))
    )
    return both.where(changed).drop(_OLD_VALID_TO, _OLD_IS_CURRENT, _AFTER_IMAGE)


def history_merge_sql(
    table: str,
    source_view: str,
    columns: Sequence[str],
    key_columns: Sequence[str],
    key_range: KeyCondition | None = None,
) -> str:
    """Return the MERGE that inserts new versions and corrects the validity of the table's rows.

    :param columns: the captured columns the batch writes (key columns included).
    :param key_range: the range of the batch's first key column (``key_filter.KeyRange``): the target
        rows outside it cannot match, and saying so lets Iceberg skip data files by their key bounds.
    """
    identity = [*key_columns, *POSITION_COLUMNS]
    on = " AND ".join(f"t.{quote(c)} = s.{quote(c)}" for c in identity)
    if key_range is not None:
        on += " AND " + key_range.condition("t.")
    keys = {k.lower() for k in key_columns}
    insert_columns = [
        *key_columns,
        *[c for c in columns if c.lower() not in keys],
        *[name for name, _, _ in meta_columns(HISTORY)],
    ]
    insert = (
        f"INSERT ({', '.join(quote(c) for c in insert_columns)}) "
        f"VALUES ({', '.join('s.' + quote(c) for c in insert_columns)})"
    )
    return (
        f"MERGE INTO {quote_table(table)} t USING {source_view} s ON {on} "
        f"WHEN MATCHED AND s.{ORIGIN} = '{FROM_TABLE}' THEN UPDATE SET "
        f"t.{VALID_TO} = s.{VALID_TO}, t.{IS_CURRENT} = s.{IS_CURRENT} "
        f"WHEN NOT MATCHED AND s.{ORIGIN} = '{FROM_WINDOW}' THEN {insert}"
    )


def history_merge_frame(
    spark: SparkSession,
    table: str,
    changes: DataFrame,
    key_columns: Sequence[str],
    snapshot: tuple[str, str | None] | None = None,
    key_range: KeyCondition | None = None,
    change_rows: int | None = None,
) -> DataFrame:
    """Return the MERGE source of a batch into a history table (``history_source``).

    :param changes: the batch's change rows (``window_reader.read_window``, windows unioned).
    :param snapshot: a snapshot's LSN and time: keys it lacks are closed by a tombstone at its LSN.
    :param key_range: the range of the changes' first key column: the table rows read are those in it.
    :param change_rows: the batch's change rows: up to ``BROADCAST_KEYS_MAX`` of them, their keys are
        broadcast to the table scan instead of shuffling the table's rows to meet them.
    """
    from pyspark.sql import functions as F

    versions = version_rows(changes, key_columns)
    table_rows = spark.table(quote_table(table))
    if snapshot is not None:
        retired = retired_rows(table_rows, versions, key_columns, *snapshot)
        versions = versions.unionByName(retired)
    else:
        touched = versions.select(*[F.col(quote(k)) for k in key_columns]).distinct()
        if change_rows is not None and change_rows <= BROADCAST_KEYS_MAX:
            touched = F.broadcast(touched)
        if key_range is not None:
            table_rows = table_rows.where(key_range.condition())
        table_rows = table_rows.join(touched, on=list(key_columns), how="left_semi")
    return history_source(versions, table_rows, key_columns)
