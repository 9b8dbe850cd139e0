"""
Copy one captured table into a snapshot window: key-range chunks read inside one consistent transaction.

The output is a window directory like a change window's (docs/architecture.md), kind
``snapshot``: every row is an insert (operation 2) tagged with the snapshot LSN. Chunks are
read with keyset pagination on the key columns (``TOP (n) ... WHERE key > last ORDER BY key``)
in the snapshot transaction; after each chunk its part files are closed and the progress file
records them with the chunk's last key, so a failed copy resumes after the last completed chunk.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.extraction.cdc_windows import (
    ExtractResult,
    finish_window,
)
from airflow_provider_sqlserver_cdc.extraction.instance_switch import load_switches
from airflow_provider_sqlserver_cdc.extraction.window_output import OUTPUT_FIELDS, WindowOutput
from airflow_provider_sqlserver_cdc.hooks.consistent_point import (
    ConsistentRead,
    ConsistentSnapshot,
    SnapshotPoint,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.masked_columns import instance_masking
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_converter, column_descriptions
from airflow_provider_sqlserver_cdc.parquet.window_writer import (
    ParquetWindowWriter,
    resolve_filesystem,
)
from airflow_provider_sqlserver_cdc.snapshot.progress import (
    ChunkRecord,
    SnapshotProgress,
    encode_key_value,
    read_progress,
    remove_progress,
    write_progress,
)
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow, SnapshotDetails, watermark_key
from airflow_provider_sqlserver_cdc.window.manifest import (
    MANIFEST_NAME,
    SNAPSHOT,
    WindowManifest,
    build_manifest,
    source_description,
    zero_operation_counts,
)

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook

DEFAULT_CHUNK_ROWS = 500_000
#: ``chunk_rows`` of a table whose key is hashed: the whole table in one chunk (no key kept in clear)
ONE_CHUNK = 2_147_483_647
INSERT = 2


@dataclass
class SnapshotResult:
    """What a snapshot produced (it flows on as :meth:`change_window`)."""

    extract: ExtractResult
    progress: SnapshotProgress
    resumed_chunks: int = 0
    lock_held_s: float | None = None

    @property
    def chunks_read(self) -> int:
        """Chunks this run read (the progress file's chunks after those it resumed from)."""
        return len(self.progress.chunks) - self.resumed_chunks

    @property
    def manifest(self) -> WindowManifest:
        """The snapshot's manifest."""
        return self.extract.manifest

    def change_window(self, state_key: str) -> ChangeWindow:
        """The snapshot as a window of kind ``snapshot`` (to_lsn = the snapshot LSN), with how it was taken."""
        return self.extract.change_window(
            state_key,
            to_position_time=self.progress.snapshot_time,
            snapshot=SnapshotDetails(
                method=self.progress.method,
                read_positions=tuple(self.progress.read_lsns),
                consistent_after=max(self.progress.read_lsns, key=Lsn.from_hex),
                resumed_chunks=self.resumed_chunks,
                lock_held_ms=None if self.lock_held_s is None else round(self.lock_held_s * 1000, 1),
            ),
        )


def update_mask_all(columns: Sequence[CapturedColumn]) -> bytes:
    """``__$update_mask`` of an insert: every captured column's bit set (SQL Server's layout)."""
    highest = max((c.ordinal for c in columns), default=1)
    value = 0
    for column in columns:
        value |= 1 << (column.ordinal - 1)
    return value.to_bytes(max(1, (highest + 7) // 8), "big")


def chunk_key_columns(instance: CaptureInstance) -> list[CapturedColumn]:
    """
    The captured key columns to paginate on, or ``[]`` to read the table in one query.

    Pagination needs every key column captured and NOT NULL (a unique index may allow one NULL,
    and NULL does not compare).
    """
    by_name = {c.name: c for c in instance.columns}
    keys = [by_name.get(name) for name in instance.key_columns]
    if not keys or any(k is None or k.nullable for k in keys):
        return []
    return [k for k in keys if k is not None]


def metadata_columns(
    count: int, *, lsn: Lsn, operation: int, mask: bytes, commit_time: datetime
) -> list[pa.Array]:
    """The five metadata columns of a window batch whose ``count`` rows share position, operation and mask."""
    return [
        pa.repeat(pa.scalar(lsn.value, pa.binary()), count),
        pa.repeat(pa.scalar(lsn.value, pa.binary()), count),
        pa.repeat(pa.scalar(operation, pa.int32()), count),
        pa.repeat(pa.scalar(mask, pa.binary()), count),
        pa.repeat(pa.scalar(commit_time, pa.timestamp("us", tz="UTC")), count),
    ]


def rows_to_snapshot_batch(
    rows: Sequence[Sequence[Any]],
    schema: pa.Schema,
    converters: Sequence[Any],
    *,
    lsn: Lsn,
    mask: bytes,
    commit_time: datetime,
) -> pa.RecordBatch:
    """Turn driver rows of the chunk query into a record batch of inserts at the snapshot LSN."""
    cols = list(zip(*rows, strict=True))
    arrays = metadata_columns(len(rows), lsn=lsn, operation=INSERT, mask=mask, commit_time=commit_time)
    arrays.extend(convert(values) for convert, values in zip(converters, cols, strict=True))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def resume_problem(
    progress: SnapshotProgress,
    *,
    instance: CaptureInstance,
    source: dict[str, str],
    columns: list[dict[str, Any]],
    key_columns: list[str],
    min_lsn: Lsn,
    filesystem: pafs.FileSystem,
    instance_dir: str,
) -> str | None:
    """
    Why an unfinished snapshot cannot be resumed, or None when it can.

    It can when the table and capture instance are unchanged, the part files of its completed
    chunks are intact, and CDC still holds every change after its snapshot LSN
    (``sys.fn_cdc_get_min_lsn`` is not above the LSN right after it): the rows read later are
    newer than the snapshot LSN, and the change windows from that LSN on bring every row to the
    same state (see docs/snapshot.md).
    """
    if progress.capture_instance != instance.name or progress.source != source:
        return f"it was taken of another source ({progress.source})"
    if progress.instance_start_lsn != instance.start_lsn.hex:
        return (
            f"the capture instance was re-created (start_lsn {progress.instance_start_lsn} -> "
            f"{instance.start_lsn.hex})"
        )
    if progress.columns != columns or progress.key_columns != key_columns:
        return "the captured columns or key columns changed"
    lsn = Lsn.from_hex(progress.snapshot_lsn)
    if min_lsn.is_zero:
        return "sys.fn_cdc_get_min_lsn returned 0 (instance unknown or not permitted)"
    if min_lsn > lsn:
        return (
            f"the CDC cleanup job removed changes after its snapshot LSN {lsn.hex} (low-water mark now "
            f"{min_lsn.hex}), so the rows read before the failure can no longer be brought up to date"
        )
    window_dir = f"{instance_dir}/{progress.window_dir}"
    for entry in progress.files:
        info = filesystem.get_file_info(f"{window_dir}/{entry.path}")
        if info.type != pafs.FileType.File or info.size != entry.bytes:
            return f"part file {entry.path} is missing or has another size"
    return None


def _remove_strays(filesystem: pafs.FileSystem, window_dir: str, keep: set[str]) -> None:
    """Delete what a failed chunk left in the window directory (parts not in the progress file)."""
    if filesystem.get_file_info(window_dir).type != pafs.FileType.Directory:
        filesystem.create_dir(window_dir, recursive=True)
        return
    for info in filesystem.get_file_info(pafs.FileSelector(window_dir)):
        if info.base_name not in keep and info.type == pafs.FileType.File:
            filesystem.delete_file(info.path)


def _discard(filesystem: pafs.FileSystem, instance_dir: str, progress: SnapshotProgress) -> None:
    """Remove an abandoned snapshot's directory (it never got a manifest) and its progress file."""
    window_dir = f"{instance_dir}/{progress.window_dir}"
    has_manifest = filesystem.get_file_info(f"{window_dir}/{MANIFEST_NAME}").type == pafs.FileType.File
    if not has_manifest and filesystem.get_file_info(window_dir).type == pafs.FileType.Directory:
        filesystem.delete_dir(window_dir)
    remove_progress(filesystem, instance_dir)


def _resume(
    filesystem: pafs.FileSystem,
    instance_dir: str,
    progress: SnapshotProgress,
    point: SnapshotPoint,
    schema: pa.Schema,
    output: WindowOutput,
    instance: CaptureInstance,
) -> tuple[SnapshotProgress, ParquetWindowWriter]:
    """Continue an unfinished snapshot: drop what the failed chunk left, append to its part files."""
    if not progress.finished:
        progress.read_lsns.append(point.lsn.hex)
    window_dir = f"{instance_dir}/{progress.window_dir}"
    _remove_strays(filesystem, window_dir, {f.path for f in progress.files})
    writer = output.writer(filesystem, window_dir, schema, instance)
    writer.files = list(progress.files)
    return progress, writer


def _read_chunk(
    reader: Any,
    sql: str,
    params: Sequence[Any],
    writer: ParquetWindowWriter,
    to_batch: Callable[[Sequence[Sequence[Any]]], pa.RecordBatch],
    batch_size: int,
) -> tuple[int, Any]:
    """Stream one chunk query into the writer, ``batch_size`` rows at a time; return its row count and last row."""
    rows_in_chunk = 0
    last_row = None
    cursor = reader.cursor()
    try:
        cursor.execute(sql, *params)
        while True:
            rows = cursor.fetchmany(batch_size)
            if not rows:
                break
            writer.write_batch(to_batch(rows))
            rows_in_chunk += len(rows)
            last_row = rows[-1]
    except BaseException:
        writer.abort()
        raise
    finally:
        cursor.close()
    return rows_in_chunk, last_row


def snapshot_manifest(
    progress: SnapshotProgress,
    *,
    key_columns: Sequence[str],
    dag_id: str | None = None,
    run_id: str | None = None,
) -> WindowManifest:
    """The manifest of a completed snapshot: kind and mode ``snapshot``, ``0x0…0`` .. snapshot LSN, all inserts."""
    return build_manifest(
        SNAPSHOT,
        capture_instance=progress.capture_instance,
        source=progress.source,
        to_lsn=Lsn.from_hex(progress.snapshot_lsn),
        to_time=progress.snapshot_time,
        key_columns=key_columns,
        columns=progress.columns,
        files=progress.files,
        operation_counts={**zero_operation_counts(), "insert": progress.rows},
        dag_id=dag_id,
        run_id=run_id,
    )


def snapshot_capture_instance(
    hook: SqlServerCdcHook,
    instance: CaptureInstance,
    *,
    output: WindowOutput,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    resume: bool = True,
    on_chunk: Callable[[SnapshotProgress], None] | None = None,
    read: ConsistentRead | None = None,
) -> SnapshotResult:
    """
    Copy the source table of ``instance`` into ``{base_uri}/{ci}/{0x0…0}_{snapshot_lsn}/`` and write its manifest.

    Memory is bounded by ``output.batch_size`` rows; the table is read in chunks of ``chunk_rows``
    rows in key order, each recorded in the progress file once its part files are closed.

    :param hook: the source hook.
    :param instance: the capture instance with columns and key columns loaded.
    :param output: where the window goes and how it is written (base URI, database, batch and file size
        (files roll at every chunk end too), run ids, masking, log). A table whose key is hashed is
        copied in one chunk: a chunk's last key would be kept in clear in the progress file.
    :param chunk_rows: rows per key-range chunk (the unit of resumption).
    :param resume: continue an unfinished snapshot of this capture instance when still valid.
    :param on_chunk: called after each chunk is recorded (progress reporting; tests interleave writes here).
    :param read: how the consistent read fixes its point (default: snapshot isolation).
    """
    import pyodbc

    if chunk_rows <= 0:
        raise ValueError("chunk_rows must be positive")
    if not instance.columns:
        raise ValueError(f"Capture instance {instance.name!r} was loaded without its columns")
    started = time.monotonic()
    log = output.log
    filesystem, base_path = resolve_filesystem(output.base_uri)
    instance_dir = f"{base_path}/{instance.name}"
    source = source_description(hook.server, output.database, instance)
    table_masking = instance_masking(output.masking, instance)
    columns = column_descriptions(instance)
    if table_masking is not None:
        columns = table_masking.manifest_columns(columns)
        if any(table_masking.rule(k) for k in instance.key_columns):
            chunk_rows = ONE_CHUNK
    keys = chunk_key_columns(instance)
    key_names = [k.name for k in keys]
    key_index = [next(i for i, c in enumerate(instance.columns) if c.name == k.name) for k in keys]
    schema = hook.changes_schema(instance)
    converters = [column_converter(c) for c in instance.columns]
    mask = update_mask_all(instance.columns)

    previous = read_progress(filesystem, instance_dir)
    problem = None
    if previous is not None and not resume:
        problem = "resume=False"
    elif previous is not None:
        problem = resume_problem(
            previous,
            instance=instance,
            source=source,
            columns=columns,
            key_columns=key_names,
            min_lsn=hook.get_min_lsn(instance.name),
            filesystem=filesystem,
            instance_dir=instance_dir,
        )

    snapshot = ConsistentSnapshot(hook, instance, read)
    with snapshot:
        point = snapshot.point
        reader = snapshot.reader
        assert point is not None and reader is not None
        if previous is not None and problem is None:
            progress, writer = _resume(filesystem, instance_dir, previous, point, schema, output, instance)
            resumed_chunks = len(progress.chunks)
            if log is not None:
                log.info(
                    "%s: resuming the snapshot at %s after %d chunk(s), %d rows; this transaction reads at %s",
                    instance.name,
                    progress.snapshot_lsn,
                    resumed_chunks,
                    progress.rows,
                    point.lsn.hex,
                )
        else:
            if previous is not None:
                if log is not None:
                    log.warning(
                        "%s: the unfinished snapshot at %s cannot be resumed (%s); starting a new one",
                        instance.name,
                        previous.snapshot_lsn,
                        problem,
                    )
                _discard(filesystem, instance_dir, previous)
            progress = SnapshotProgress(
                capture_instance=instance.name,
                source=source,
                instance_start_lsn=instance.start_lsn.hex,
                snapshot_lsn=point.lsn.hex,
                snapshot_time=point.utc_time.isoformat(),
                method=point.method,
                window_dir=f"{Lsn.zero().hex}_{point.lsn.hex}",
                columns=columns,
                key_columns=key_names,
                read_lsns=[point.lsn.hex],
                started_at=datetime.now(UTC).isoformat(),
            )
            window_dir = f"{instance_dir}/{progress.window_dir}"
            writer = output.writer(filesystem, window_dir, schema, instance).open()
            write_progress(filesystem, instance_dir, progress)
            resumed_chunks = 0
        if log is not None:
            log.info(
                "%s: snapshot of %s consistent at %s (%s; table lock held %s), chunks of %s rows",
                instance.name,
                instance.source,
                progress.snapshot_lsn,
                point.method,
                "for the whole copy"
                if snapshot.lock_held_s is None
                else f"{snapshot.lock_held_s * 1000:.1f} ms",
                chunk_rows if keys else "all",
            )
        tag = Lsn.from_hex(progress.snapshot_lsn)
        commit_time = datetime.fromisoformat(progress.snapshot_time)

        def to_batch(rows: Sequence[Sequence[Any]]) -> pa.RecordBatch:
            return rows_to_snapshot_batch(
                rows, schema, converters, lsn=tag, mask=mask, commit_time=commit_time
            )

        last_key = progress.chunks[-1].last_key_values() if progress.chunks else None
        while not progress.finished:
            after = last_key is not None
            sql = tsql.snapshot_chunk_query(
                instance.source_schema, instance.source_table, instance.columns, keys, after_key=after
            )
            params: list[Any] = [chunk_rows] if keys else []
            if after:
                params += tsql.keyset_parameters(last_key)
            files_before = len(writer.files)
            try:
                rows_in_chunk, last_row = _read_chunk(
                    reader, sql, params, writer, to_batch, output.batch_size
                )
            except pyodbc.Error as err:
                raise snapshot.translate_error(err, f"reading chunk {len(progress.chunks) + 1}") from None
            writer.close()
            done = not keys or rows_in_chunk < chunk_rows or last_row is None
            last_key = None if done else [last_row[i] for i in key_index]
            progress.chunks.append(
                ChunkRecord(
                    files=writer.files[files_before:],
                    rows=rows_in_chunk,
                    last_key=None if last_key is None else [encode_key_value(v) for v in last_key],
                )
            )
            write_progress(filesystem, instance_dir, progress)
            if on_chunk is not None:
                on_chunk(progress)
            if log is not None:
                log.info(
                    "%s: chunk %d done, %d rows (%d in total), %.0f rows/s",
                    instance.name,
                    len(progress.chunks),
                    rows_in_chunk,
                    progress.rows,
                    progress.rows / max(time.monotonic() - started, 1e-9),
                )

    manifest = snapshot_manifest(
        progress, key_columns=instance.key_columns, dag_id=output.dag_id, run_id=output.run_id
    )
    manifest.masking = table_masking.to_manifest() if table_masking else None
    extract = finish_window(
        filesystem, writer.window_dir, manifest, base_uri=output.base_uri, started=started, log=log
    )
    remove_progress(filesystem, instance_dir)
    return SnapshotResult(
        extract,
        progress,
        resumed_chunks=resumed_chunks,
        lock_held_s=snapshot.lock_held_s,
    )


def snapshot_windows(
    hook: SqlServerCdcHook,
    names: Sequence[str],
    *,
    conn_id: str,
    base_uri: str,
    require_keys: bool = True,
    **copy_options: Any,
) -> list[ChangeWindow]:
    """
    Snapshot each named capture instance; return the snapshot windows in the order of ``names``.

    :param hook: the source hook.
    :param names: capture instance names, or ``schema.table`` for the newest instance of a table.
    :param conn_id: the Airflow connection id of the source (part of the watermark key).
    :param base_uri: local path or filesystem URI of the windows' base directory.
    :param require_keys: raise NoKeyColumnsError for an instance without key columns.
    :param copy_options: further arguments of :func:`snapshot_capture_instance` (chunk_rows, method, ...).
    """
    database = hook.source_database()
    output = WindowOutput(base_uri, database, **{k: v for k, v in copy_options.items() if k in OUTPUT_FIELDS})
    table_options = {k: v for k, v in copy_options.items() if k not in OUTPUT_FIELDS}
    switches, _ = load_switches(
        hook, names, lambda stream: watermark_key(conn_id, database, stream), require_keys=require_keys
    )
    # A switched table is copied with its newest instance's columns, filed under its stream's name.
    instances = [replace(s.newest, name=s.stream) for s in switches]
    return [
        snapshot_capture_instance(hook, instance, output=output, **table_options).change_window(
            watermark_key(conn_id, database, instance.name)
        )
        for instance in instances
    ]
