"""
The blind spot of a capture-instance switch, back-filled by primary key.

Between the first DDL on a table and the start of its new capture instance, the old instance's
change rows lack (or blank) the changed columns and the new instance has nothing. For every key
the old instance changed in that range, the row is read again from the source table by primary
key, in one snapshot-isolation transaction whose begin LSN ``P`` is recorded. The rows are written
as a window of their own: upserts (a key no longer there: a delete) all positioned at ``P``. The
merge's LSN guard then keeps every change after ``P`` authoritative, and a change at or before
``P`` cannot overwrite what the back-fill read (it already holds it). The window covers the blind
range itself, so a replay of the interval is recognised as applied and skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.column_masking import ColumnMaskingError
from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.hooks.consistent_point import ConsistentRead, ConsistentSnapshot
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.manifest_store import write_manifest
from airflow_provider_sqlserver_cdc.parquet.masked_columns import instance_masking
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_converter
from airflow_provider_sqlserver_cdc.parquet.window_writer import (
    ParquetWindowWriter,
    join_uri,
    resolve_filesystem,
)
from airflow_provider_sqlserver_cdc.window.manifest import (
    CHANGES,
    OPERATION_NAMES,
    WindowManifest,
    source_description,
    zero_operation_counts,
)
from airflow_provider_sqlserver_cdc.window.net_effect import DELETE, UPDATE_AFTER

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
    from airflow_provider_sqlserver_cdc.extraction.instance_switch import InstanceSwitch
    from airflow_provider_sqlserver_cdc.hooks.consistent_point import SnapshotPoint
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow

#: Keys looked up per query.
KEYS_PER_QUERY = 200
START_LSN = "__$start_lsn"


@dataclass(frozen=True)
class BlindSpot:
    """The LSN range of an old-instance window that the old instance does not capture faithfully."""

    first: Lsn
    last: Lsn
    ddl_lsn: Lsn


def blind_spot(hook: SqlServerCdcHook, switch: InstanceSwitch, part: LsnWindow) -> BlindSpot | None:
    """
    Return the part of an old-instance window between the table's first DDL and the switch, if any.

    :param hook: the source hook.
    :param switch: the stream's instances (``new`` set: the switch exists or was just created).
    :param part: a window part read from ``switch.old``.
    """
    start = switch.switch_lsn
    if start is None or part.is_empty or part.from_lsn >= start:
        return None
    before = Lsn.from_int(int(start) - 1)
    events = hook.get_ddl_events(switch.old.name, switch.old.start_lsn, before)
    if not events:
        return None
    ddl = events[0].lsn
    first, last = max(ddl, part.from_lsn), min(part.to_lsn, before)
    return BlindSpot(first, last, ddl) if first <= last else None


def changed_keys(
    window_dir: str, files: Sequence[str], key_columns: Sequence[str], spot: BlindSpot, filesystem: Any
) -> list[tuple[Any, ...]]:
    """
    Return the distinct keys of a written window's change rows inside the blind spot, in first-seen order.

    :param window_dir: the window directory on ``filesystem``.
    :param files: its Parquet files, relative to it.
    :param key_columns: the key column names.
    :param spot: the blind spot.
    :param filesystem: the windows' filesystem.
    """
    keys: dict[tuple[Any, ...], None] = {}
    low, high = pa.scalar(spot.first.value, pa.binary()), pa.scalar(spot.last.value, pa.binary())
    for name in files:
        table = pq.read_table(
            f"{window_dir}/{name}", filesystem=filesystem, columns=[START_LSN, *key_columns]
        )
        lsn = table.column(START_LSN)
        inside = pc.and_(pc.greater_equal(lsn, low), pc.less_equal(lsn, high))
        rows = table.filter(inside)
        for key in zip(*(rows.column(k).to_pylist() for k in key_columns), strict=True):
            keys.setdefault(tuple(key), None)
    return list(keys)


def _normal(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def read_rows_by_key(
    snapshot: ConsistentSnapshot,
    instance: CaptureInstance,
    key_columns: Sequence[CapturedColumn],
    keys: Sequence[tuple[Any, ...]],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """
    Return the current rows of ``keys`` in the snapshot, and the keys the table no longer has.

    :param snapshot: the established snapshot transaction.
    :param instance: the capture instance whose columns are read (the new one).
    :param key_columns: the key columns in index order.
    :param keys: the keys to look up.
    """
    assert snapshot.reader is not None
    positions = [next(i for i, c in enumerate(instance.columns) if c.name == k.name) for k in key_columns]
    found: list[tuple[Any, ...]] = []
    seen: set[tuple[Any, ...]] = set()
    cursor = snapshot.reader.cursor()
    try:
        for start in range(0, len(keys), KEYS_PER_QUERY):
            chunk = keys[start : start + KEYS_PER_QUERY]
            sql = tsql.rows_by_key_query(
                instance.source_schema, instance.source_table, instance.columns, key_columns, len(chunk)
            )
            cursor.execute(sql, *[value for key in chunk for value in key])
            for row in cursor.fetchall():
                found.append(tuple(row))
                seen.add(tuple(_normal(row[p]) for p in positions))
    finally:
        cursor.close()
    missing = [key for key in keys if tuple(_normal(v) for v in key) not in seen]
    return found, missing


def upsert_batch(
    instance: CaptureInstance,
    schema: pa.Schema,
    found: Sequence[tuple[Any, ...]],
    missing: Sequence[tuple[Any, ...]],
    key_names: Sequence[str],
    lsn: Lsn,
    commit_time: datetime,
) -> pa.RecordBatch:
    """Return upserts of the found rows and deletes of the missing keys, all at ``lsn``, as one record batch."""
    width = len(instance.columns)
    keys = {name.lower(): i for i, name in enumerate(key_names)}
    deleted = [
        tuple(key[keys[c.name.lower()]] if c.name.lower() in keys else None for c in instance.columns)
        for key in missing
    ]
    rows = [*found, *deleted]
    operations = [UPDATE_AFTER] * len(found) + [DELETE] * len(deleted)
    highest = max((c.ordinal for c in instance.columns), default=1)
    mask = sum(1 << (c.ordinal - 1) for c in instance.columns).to_bytes(max(1, (highest + 7) // 8), "big")
    count = len(rows)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in range(width)]
    arrays: list[pa.Array] = [
        pa.repeat(pa.scalar(lsn.value, pa.binary()), count),
        pa.repeat(pa.scalar(lsn.value, pa.binary()), count),
        pa.array(operations, pa.int32()),
        pa.repeat(pa.scalar(mask, pa.binary()), count),
        pa.repeat(pa.scalar(commit_time, pa.timestamp("us", tz="UTC")), count),
    ]
    arrays.extend(
        column_converter(c)(list(values)) for c, values in zip(instance.columns, columns, strict=True)
    )
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def upsert_manifest(
    hook: SqlServerCdcHook,
    database: str,
    stream: str,
    instance: CaptureInstance,
    writer: ParquetWindowWriter,
    first: Lsn,
    last: Lsn,
    *,
    counts: dict[str, int],
    like: WindowManifest,
    point: SnapshotPoint,
    key_columns: Sequence[str] | None = None,
    **backfill: Any,
) -> WindowManifest:
    """
    Return the manifest of a window of rows read from ``instance``'s table at one consistent LSN.

    :param hook: the source hook.
    :param database: the source database.
    :param stream: the stream the window is filed under.
    :param instance: the capture instance whose columns were read.
    :param writer: the window's writer, its files closed (their files and masking).
    :param first: the first LSN the window covers.
    :param last: the last LSN the window covers.
    :param counts: rows per operation name.
    :param like: a window of the same run (its mode, row filter option, DAG and run ids).
    :param point: the consistent read the rows come from (recorded as ``backfill``).
    :param key_columns: the key column names; default ``instance.key_columns``.
    :param backfill: what else the ``backfill`` record holds (after ``consistent_lsn`` and ``method``).
    """
    return writer.manifest(
        CHANGES,
        instance,
        capture_instance=stream,
        key_columns=key_columns,
        source=source_description(hook.server, database, instance),
        from_lsn=first,
        to_lsn=last,
        mode=like.mode,
        row_filter_option=like.row_filter_option,
        operation_counts=counts,
        dag_id=like.dag_id,
        run_id=like.run_id,
        read_instance=instance.name if instance.name != stream else None,
        backfill={"consistent_lsn": point.lsn.hex, "method": point.method, **backfill},
    )


def backfill_blind_spot(
    hook: SqlServerCdcHook,
    switch: InstanceSwitch,
    spot: BlindSpot,
    old_part: WindowManifest,
    output: WindowOutput,
) -> tuple[WindowManifest, str, float] | None:
    """
    Re-read the keys the old instance changed in the blind spot and write them as a window; None if none changed.

    Returns the window's manifest, its URI and the seconds it took.

    :param hook: the source hook.
    :param switch: the stream's instances, ``new`` set (its columns are read).
    :param spot: the blind spot inside ``old_part``.
    :param old_part: the manifest of the old instance's window part, already written.
    :param output: where and how the window is written; a table whose key is masked cannot be re-read by key.
    """
    assert switch.new is not None
    started = time.monotonic()
    filesystem, base_path = resolve_filesystem(output.base_uri)
    stream_dir = f"{base_path}/{switch.stream}"
    part_dir = f"{stream_dir}/{old_part.from_lsn}_{old_part.to_lsn}"
    key_names = list(switch.old.key_columns)
    keys = changed_keys(part_dir, [f.path for f in old_part.files], key_names, spot, filesystem)
    if not keys:
        return None
    new = switch.new
    table_masking = instance_masking(output.masking, new)
    hashed = [k for k in key_names if table_masking is not None and table_masking.rule(k) is not None]
    if hashed:
        raise ColumnMaskingError(
            f"column masking of {new.source}: {len(keys)} row(s) changed between the DDL at {spot.ddl_lsn.hex} "
            f"and the start of {new.name} must be re-read by key, but the key column(s) {', '.join(hashed)} "
            "are hashed in the staged windows, so their values are unknown. Re-snapshot the table instead: "
            f'trigger the DAG with conf {{"resnapshot": ["{switch.stream}"]}} (docs/column-masking.md)'
        )
    by_name = {c.name.lower(): c for c in new.columns}
    key_columns = [by_name[k.lower()] for k in key_names]
    with ConsistentSnapshot(hook, new, ConsistentRead(allow_table_lock_fallback=True)) as snapshot:
        point = snapshot.point
        assert point is not None
        found, missing = read_rows_by_key(snapshot, new, key_columns, keys)
    schema = hook.changes_schema(new)
    name = f"{spot.first.hex}_{spot.last.hex}_backfill"
    writer = ParquetWindowWriter(
        filesystem,
        f"{stream_dir}/{name}",
        schema,
        max_file_bytes=output.max_file_bytes,
        masking=table_masking,
    )
    with writer:
        writer.write_batch(upsert_batch(new, schema, found, missing, key_names, point.lsn, point.utc_time))
    counts = zero_operation_counts()
    counts[OPERATION_NAMES[UPDATE_AFTER]] = len(found)
    counts[OPERATION_NAMES[DELETE]] = len(missing)
    manifest = upsert_manifest(
        hook,
        output.database,
        switch.stream,
        new,
        writer,
        spot.first,
        spot.last,
        counts=counts,
        like=old_part,
        point=point,
        key_columns=key_names,
        ddl_lsn=spot.ddl_lsn.hex,
        old_instance=switch.old.name,
        keys=len(keys),
        deleted=len(missing),
    )
    write_manifest(filesystem, f"{stream_dir}/{name}", manifest)
    seconds = time.monotonic() - started
    if output.log is not None:
        output.log.warning(
            "%s: blind spot %s..%s (DDL at %s, %s starts at %s): %d key(s) changed in %s re-read from %s by "
            "primary key at LSN %s (%d no longer there) in %.1f s",
            switch.stream,
            spot.first.hex,
            spot.last.hex,
            spot.ddl_lsn.hex,
            new.name,
            new.start_lsn.hex,
            len(keys),
            switch.old.name,
            new.source,
            point.lsn.hex,
            len(missing),
            seconds,
        )
    return manifest, join_uri(output.base_uri, switch.stream, name), seconds
