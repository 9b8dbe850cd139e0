"""The rewrite strategy: the whole table written once with a change window's net effect applied.

The rows are those the MERGE (``statements.merge_sql``) would leave, read from the current snapshot
of the target (with its current schema: a time-travel read would take the snapshot's, without the
columns schema evolution just added):

* a target row whose key the window holds takes the window's row when that is newer (the LSN guard
  on ``_cdc_start_lsn``, ``_cdc_seqval``, ``_cdc_operation``), and is dropped when that row is a
  delete under hard deletes; columns the window lacks keep the target's values, as the MERGE's
  ``UPDATE SET`` leaves them;
* a window row whose key the target lacks is added (not a delete, under hard deletes);
* every other target row is kept as it is.

The target is joined with the net effect broadcast (when it fits in memory), so its rows are not
shuffled; only its key columns are, to find the window's new keys. The rows replace the table's
files in one Iceberg overwrite that validates, at serializable isolation, that no other writer
added or deleted data since the snapshot read: a concurrent commit fails it as it fails a MERGE,
and the job retries (``job._commit_retrying``). The snapshot validated from is taken before the
rows are read, so a commit between the two fails the overwrite too (retried, never lost). Delete files go with the data files they apply to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import DELETED, TARGET_META_COLUMNS
from airflow_provider_sqlserver_cdc.spark.merge.statements import newer_condition, quote, quote_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Session settings of the overwrite: no shuffle to the writers (rows stay in the files of the scan
#: task that read them; ``fanout-enabled`` lets a task write several partitions).
REWRITE_CONF = {"spark.sql.iceberg.distribution-mode": "none"}
#: Bytes a net-effect row is assumed to take in the broadcast hash table (a generous guess for the
#: usual tables; the share of the driver's memory below bounds the total).
BROADCAST_ROW_BYTES = 256
#: The broadcast net effect may take this share of the driver's heap; a larger window is joined
#: with a shuffle of the target instead.
BROADCAST_HEAP_SHARE = 0.125


def current_snapshot_id(table: object) -> int | None:
    """Return the id of an Iceberg ``Table``'s current snapshot (None for a table without one).

    :param table: the Iceberg ``Table`` (Java API, through py4j), refreshed.
    """
    snapshot = table.currentSnapshot()  # type: ignore[attr-defined]
    return None if snapshot is None else int(snapshot.snapshotId())


def broadcast_fits(spark: SparkSession, change_rows: int) -> bool:
    """Say whether a net effect of at most ``change_rows`` rows may be broadcast to the target's scan tasks.

    :param change_rows: the rows of the windows (the net effect has at most as many).
    """
    heap = int(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory())
    return change_rows * BROADCAST_ROW_BYTES <= heap * BROADCAST_HEAP_SHARE


def rewrite_sql(
    table: str,
    target_columns: Sequence[tuple[str, str]],
    source_view: str,
    columns: Sequence[str],
    key_columns: Sequence[str],
    hard: bool,
    broadcast: bool,
) -> str:
    """Return the query of the table's rows once the net effect in ``source_view`` is applied.

    :param target_columns: the target's columns, in order: (name, Spark SQL type).
    :param source_view: the net effect (``net_effect_frame``): one row per key.
    :param columns: the captured columns the window writes (as ``merge_sql`` takes them).
    :param key_columns: the key columns.
    :param hard: drop deleted keys instead of flagging them.
    :param broadcast: broadcast the net effect to the target's scan tasks.
    """
    written = {c.lower() for c in (*columns, *(name for name, _, _ in TARGET_META_COLUMNS))}
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in key_columns)
    matched = f"s.{quote(key_columns[0])} IS NOT NULL"
    take = f"({matched} AND {newer_condition('s', 't')})"
    kept, added = [], []
    for name, sql_type in target_columns:
        column = quote(name)
        if name.lower() in written:
            kept.append(
                f"CASE WHEN {take} THEN CAST(s.{column} AS {sql_type}) ELSE t.{column} END AS {column}"
            )
            added.append(f"CAST(s.{column} AS {sql_type}) AS {column}")
        else:
            kept.append(f"t.{column}")
            added.append(f"CAST(NULL AS {sql_type}) AS {column}")
    hint = "/*+ BROADCAST(s) */ " if broadcast else ""
    target = quote_table(table)
    keys = ", ".join(f"t.{quote(k)}" for k in key_columns)
    on_matched = " AND ".join(f"m.{quote(k)} = s.{quote(k)}" for k in key_columns)
    # The window's keys the target holds, from the target's key columns probed against the broadcast
    # net effect (no shuffle of the target): at most one per window key, so it is broadcast in turn.
    matched_keys = f"SELECT {hint}{keys} FROM {target} t LEFT SEMI JOIN {source_view} s ON {on}"
    return (
        f"SELECT {hint}{', '.join(kept)} FROM {target} t LEFT JOIN {source_view} s ON {on}"
        + (f" WHERE NOT ({take} AND s.{DELETED})" if hard else "")
        + f" UNION ALL SELECT {'/*+ BROADCAST(m) */ ' if broadcast else ''}{', '.join(added)} "
        f"FROM {source_view} s LEFT ANTI JOIN ({matched_keys}) m ON {on_matched}"
        + (f" WHERE NOT s.{DELETED}" if hard else "")
    )


def overwrite_table(frame: DataFrame, table: str, snapshot_id: int | None) -> None:
    """Replace every file of ``table`` with ``frame``'s rows in one commit, failing if another writer came between.

    Serializable isolation from ``snapshot_id`` (the snapshot ``frame`` read): Iceberg refuses the
    commit when data files were added or deleted, or delete files added, since then (a
    ``ValidationException``, which the job treats as a commit conflict).

    :param frame: the table's new rows (``rewrite_sql``), with the target's columns.
    :param snapshot_id: the snapshot the rows were read from; None when the table had none.
    """
    from pyspark.sql import functions as F

    writer = frame.writeTo(quote_table(table)).option("isolation-level", "serializable")
    writer = writer.option("fanout-enabled", "true")
    if snapshot_id is not None:
        writer = writer.option("validate-from-snapshot-id", str(snapshot_id))
    writer.overwrite(F.lit(True))
