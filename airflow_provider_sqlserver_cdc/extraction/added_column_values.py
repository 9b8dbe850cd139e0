"""
The values of columns added to a CDC table, re-read once from the source for the rows that hold one.

``ALTER TABLE … ADD c … NOT NULL DEFAULT x`` (or ``DEFAULT x WITH VALUES``) gives every existing row
a value without a change event, and a row changed before the new capture instance started holds
its value of ``c`` only in the source. Neither instance has those values: the old one never
captures ``c``, the new one only changes after its ``start_lsn``, and the blind-spot back-fill
(``extraction.blind_spot``) only the keys changed in between. So when a stream's windows first carry
columns its previous windows did not (the run that reads the new instance, or back-fills with its
columns), the extract reads every row that holds a non-NULL value in one of them
(``tsql.ct_rows_with_values_query``, the query Change Tracking uses for the same case), in one
snapshot-isolation transaction whose LSN ``P`` it records, and writes them as a window of their own:
upserts at ``P``, so the LSN guard keeps every later change authoritative. It is streamed in batches
of ``batch_size`` rows into files of at most ``max_file_bytes``: memory stays bounded whatever the
table's size.

It happens once: the stream's column lists are kept in ``{base}/{stream}/_column_history.json``
(``extraction.column_changes``, as for Change Tracking), and the window's list is recorded after it. A
run that is extracted but never merged leaves the list before it, as the next window starts at the
target's applied LSN: that run re-reads again. The window covers the run window's last LSN only
(directory ``{last}_{last}_added``), so a replay of the interval is recognised as applied and skipped.
A column added as NULL without a default re-reads only the rows set since, which the back-fill
and the new instance also bring: the cost is one scan of the table per schema change.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.extraction.blind_spot import upsert_batch, upsert_manifest
from airflow_provider_sqlserver_cdc.extraction.column_changes import (
    HISTORY_NAME,
    added_columns,
    columns_before,
    newest_window_columns,
    record_columns,
)
from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.hooks.consistent_point import ConsistentRead, ConsistentSnapshot
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.manifest_store import write_manifest
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_descriptions
from airflow_provider_sqlserver_cdc.parquet.window_writer import (
    join_uri,
    resolve_filesystem,
)
from airflow_provider_sqlserver_cdc.window.manifest import (
    OPERATION_NAMES,
    WindowManifest,
    zero_operation_counts,
)
from airflow_provider_sqlserver_cdc.window.net_effect import UPDATE_AFTER

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow

SUFFIX = "_added"


def reread_added_columns(
    hook: SqlServerCdcHook,
    stream: str,
    carried: CaptureInstance,
    window: LsnWindow,
    output: WindowOutput,
    *,
    like: WindowManifest,
) -> tuple[WindowManifest, str, float] | None:
    """
    Re-read the rows holding a value in a column the stream's windows did not carry before; None when none was added.

    Returns the window's manifest, its URI and the seconds it took. Records the run's column list.

    :param hook: the source hook.
    :param stream: the stream's name (its windows' directory).
    :param carried: the instance whose columns the run's newest window carries (columns loaded).
    :param window: the stream's window of this run (after the contiguity guard).
    :param output: where and how the window is written (the table's masking applied before Parquet).
    :param like: a window of the run (its mode, row filter option, DAG and run ids).
    """
    if window.is_empty:
        return None
    started = time.monotonic()
    filesystem, base_path = resolve_filesystem(output.base_uri)
    stream_dir = f"{base_path}/{stream}"
    before = stream_columns_before(filesystem, stream_dir, window.from_lsn)
    columns = column_descriptions(carried)
    added = added_columns(before, carried.columns) if before is not None else []
    result = None
    if added:
        result = _reread(
            hook,
            stream,
            carried,
            added,
            window.to_lsn,
            output,
            filesystem=filesystem,
            stream_dir=stream_dir,
            like=like,
        )
        log = output.log
        if log is not None:
            manifest = result[0]
            log.warning(
                "%s: column(s) %s added to %s since the stream's previous windows: %d row(s) holding a value in "
                "them re-read from the source at LSN %s (%s) in %.1f s",
                stream,
                ", ".join(added),
                carried.source,
                manifest.row_count,
                (manifest.backfill or {}).get("consistent_lsn"),
                (manifest.backfill or {}).get("method"),
                time.monotonic() - started,
            )
    record_columns(filesystem, stream_dir, window.to_lsn, columns, before)
    return result


def stream_columns_before(filesystem: Any, stream_dir: str, first: Lsn) -> list[dict[str, Any]] | None:
    """
    Return the columns the stream's windows carried before ``first``, or None when unknown.

    From the column history when the stream has one, else from the newest window that starts before
    ``first``: the first run's snapshot ends at its own LSN, which can be past the next window's start.

    :param filesystem: the windows' filesystem.
    :param stream_dir: ``{base}/{stream}`` on it.
    :param first: the first LSN of the run's window.
    """
    import pyarrow.fs as pafs

    if filesystem.get_file_info(f"{stream_dir}/{HISTORY_NAME}").type != pafs.FileType.NotFound:
        return columns_before(filesystem, stream_dir, Lsn.from_int(max(0, int(first) - 1)))
    return newest_window_columns(filesystem, stream_dir, lambda start, end: start <= end and start < first)


def _reread(
    hook: SqlServerCdcHook,
    stream: str,
    carried: CaptureInstance,
    added: list[str],
    last: Lsn,
    output: WindowOutput,
    *,
    filesystem: Any,
    stream_dir: str,
    like: WindowManifest,
) -> tuple[WindowManifest, str, float]:
    """Stream the rows holding a value in ``added`` into the window ``{last}_{last}_added``."""
    started = time.monotonic()
    schema = hook.changes_schema(carried)
    key_names = list(carried.key_columns)
    name = f"{last.hex}_{last.hex}{SUFFIX}"
    sql = tsql.ct_rows_with_values_query(carried.source_schema, carried.source_table, carried.columns, added)
    rows = 0
    writer = output.writer(filesystem, f"{stream_dir}/{name}", schema, carried)
    with (
        writer,
        ConsistentSnapshot(hook, carried, ConsistentRead(allow_table_lock_fallback=True)) as snapshot,
    ):
        point = snapshot.point
        assert point is not None and snapshot.reader is not None
        cursor = snapshot.reader.cursor()
        try:
            cursor.execute(sql)
            while chunk := cursor.fetchmany(output.batch_size):
                found = [tuple(row) for row in chunk]
                writer.write_batch(
                    upsert_batch(carried, schema, found, [], key_names, point.lsn, point.utc_time)
                )
                rows += len(found)
        finally:
            cursor.close()
    counts = zero_operation_counts()
    counts[OPERATION_NAMES[UPDATE_AFTER]] = rows
    manifest = upsert_manifest(
        hook,
        output.database,
        stream,
        carried,
        writer,
        last,
        last,
        counts=counts,
        like=like,
        point=point,
        added_columns=added,
        rows=rows,
    )
    write_manifest(filesystem, f"{stream_dir}/{name}", manifest)
    return manifest, join_uri(output.base_uri, stream, name), time.monotonic() - started
