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

The target is joined with the net effect, or only its keys and change positions, broadcast (when
it fits in memory), so its rows are not shuffled (``rewrite_sql``). The rows replace the table's
files in one Iceberg overwrite that validates, at serializable isolation, that no other writer
added or deleted data since the snapshot read: a concurrent commit fails it as it fails a MERGE,
and the job retries (``job._commit_retrying``). The snapshot validated from is taken before the
rows are read, so a commit between the two fails the overwrite too (retried, never lost). Delete files go with the data files they apply to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import (
    DELETED,
    POSITION_COLUMNS,
    TARGET_META_COLUMNS,
)
from airflow_provider_sqlserver_cdc.spark.merge.statements import newer_condition, quote, quote_table
from airflow_provider_sqlserver_cdc.spark.merge.write_distribution import UNSHUFFLED_WRITE_CONF

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Session settings of the overwrite: no shuffle to the writers (rows stay in the files of the scan
#: task that read them; ``fanout-enabled`` lets a task write several partitions).
REWRITE_CONF = dict(UNSHUFFLED_WRITE_CONF)
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

    When the window writes every column of the target (the usual case), a target row is either kept
    whole or replaced whole, so only the keys and change positions of the net effect are broadcast
    (``_replacing_sql``); otherwise the net effect's rows are, to fill the columns the window lacks
    from the target (``_updating_sql``).

    :param target_columns: the target's columns, in order: (name, Spark SQL type).
    :param source_view: the net effect (``net_effect_frame``): one row per key.
    :param columns: the captured columns the window writes (as ``merge_sql`` takes them).
    :param key_columns: the key columns.
    :param hard: drop deleted keys instead of flagging them.
    :param broadcast: broadcast the net effect (or its keys and positions) to the target's scan tasks.
    """
    written = {c.lower() for c in (*columns, *(name for name, _, _ in TARGET_META_COLUMNS))}
    if all(name.lower() in written for name, _ in target_columns):
        return _replacing_sql(table, target_columns, source_view, key_columns, hard, broadcast)
    return _updating_sql(table, target_columns, source_view, written, key_columns, hard, broadcast)


def _hint(broadcast: bool, alias: str) -> str:
    return f"/*+ BROADCAST({alias}) */ " if broadcast else ""


def _replacing_sql(
    table: str,
    target_columns: Sequence[tuple[str, str]],
    source_view: str,
    key_columns: Sequence[str],
    hard: bool,
    broadcast: bool,
) -> str:
    """Return the rewrite's rows as target rows no newer change replaces, plus the window rows that win.

    Both are anti joins against narrow broadcasts: the net effect's keys and positions for the
    target's rows, the target's positions of the window's keys for the window's rows.
    """
    target = quote_table(table)
    keys = [quote(k) for k in key_columns]
    positions = ", ".join(f"n.{c}" for c in POSITION_COLUMNS)
    newer_positions = f"SELECT {', '.join(f'n.{k}' for k in keys)}, {positions} FROM {source_view} n"
    on_n = " AND ".join(f"t.{k} = n.{k}" for k in keys)
    kept = ", ".join(f"t.{quote(name)}" for name, _ in target_columns)
    held = (
        f"SELECT {_hint(broadcast, 'n')}{', '.join(f't.{k}' for k in keys)}, "
        f"{', '.join(f't.{c}' for c in POSITION_COLUMNS)} FROM {target} t "
        f"LEFT SEMI JOIN (SELECT {', '.join(f'n.{k}' for k in keys)} FROM {source_view} n) n ON {on_n}"
    )
    added = ", ".join(
        f"CAST(s.{quote(name)} AS {sql_type}) AS {quote(name)}" for name, sql_type in target_columns
    )
    on_m = " AND ".join(f"m.{k} = s.{k}" for k in keys)
    return (
        f"SELECT {_hint(broadcast, 'n')}{kept} FROM {target} t LEFT ANTI JOIN ({newer_positions}) n "
        f"ON {on_n} AND {newer_condition('n', 't')}"
        f" UNION ALL SELECT {_hint(broadcast, 'm')}{added} FROM {source_view} s LEFT ANTI JOIN ({held}) m "
        f"ON {on_m} AND NOT {newer_condition('s', 'm')}" + (f" WHERE NOT s.{DELETED}" if hard else "")
    )


def _updating_sql(
    table: str,
    target_columns: Sequence[tuple[str, str]],
    source_view: str,
    written: set[str],
    key_columns: Sequence[str],
    hard: bool,
    broadcast: bool,
) -> str:
    """Return the rewrite's rows from the target joined with the net effect, column by column.

    A replaced row keeps the target's value in the columns the window lacks, as ``UPDATE SET`` does.
    """
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
    target = quote_table(table)
    keys = ", ".join(f"t.{quote(k)}" for k in key_columns)
    on_matched = " AND ".join(f"m.{quote(k)} = s.{quote(k)}" for k in key_columns)
    # The window's keys the target holds, from the target's key columns probed against the broadcast
    # net effect (no shuffle of the target): at most one per window key, so it is broadcast in turn.
    matched_keys = (
        f"SELECT {_hint(broadcast, 's')}{keys} FROM {target} t LEFT SEMI JOIN {source_view} s ON {on}"
    )
    return (
        f"SELECT {_hint(broadcast, 's')}{', '.join(kept)} FROM {target} t LEFT JOIN {source_view} s ON {on}"
        + (f" WHERE NOT ({take} AND s.{DELETED})" if hard else "")
        + f" UNION ALL SELECT {_hint(broadcast, 'm')}{', '.join(added)} "
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
