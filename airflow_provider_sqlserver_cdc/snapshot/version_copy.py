"""
Initial copy of a Change Tracking table, consistent with a change tracking version.

One SNAPSHOT transaction reads ``CHANGE_TRACKING_CURRENT_VERSION()`` and then the whole table: the
rows are exactly the table as of that version (SQL Server documents this as the way to obtain
initial data for change tracking; track-changes/work-with-change-tracking-sql-server.md). No lock
is taken, unlike the CDC snapshot, which must pin an LSN. The window has the snapshot layout and
manifest of ``table_copy`` (every row an insert at ``version_lsn(version)``), so the merge and the
watermark treat it as any snapshot; the next change window starts after that version.

A copy is one transaction and does not resume: a failed copy starts over (its retry rewrites the
window). Snapshot isolation must be allowed in the database (ALLOW_SNAPSHOT_ISOLATION ON).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.extraction.cdc_windows import finish_window
from airflow_provider_sqlserver_cdc.extraction.column_changes import columns_before, record_columns
from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.hooks.change_reader import changes_schema
from airflow_provider_sqlserver_cdc.hooks.change_tracking import database_not_tracked_error, version_lsn
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_converter, column_descriptions
from airflow_provider_sqlserver_cdc.parquet.window_writer import (
    resolve_filesystem,
)
from airflow_provider_sqlserver_cdc.snapshot.table_copy import rows_to_snapshot_batch, update_mask_all
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow, SnapshotDetails, watermark_key
from airflow_provider_sqlserver_cdc.window.manifest import (
    SNAPSHOT,
    zero_operation_counts,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook

METHOD = "snapshot_isolation"


def snapshot_tracked_table(
    hook: ChangeTrackingHook,
    instance: CaptureInstance,
    output: WindowOutput,
    *,
    conn_id: str,
) -> ChangeWindow:
    """
    Copy one tracked table as of a version into ``{base_uri}/{name}/0x0…0_{version}/``; return its window.

    :param hook: the source hook.
    :param instance: the tracked table (:meth:`ChangeTrackingHook.get_tracked_table`).
    :param output: where and how the window is written (the table's masking applied before Parquet);
        its database is part of the watermark key.
    :param conn_id: the source connection id (watermark key).
    """
    started = time.monotonic()
    filesystem, base_path = resolve_filesystem(output.base_uri)
    schema = changes_schema(instance)
    converters = [column_converter(c) for c in instance.columns]
    mask = update_mask_all(instance.columns)
    rows = 0
    with hook.snapshot_transaction() as conn:
        read_at = hook.read_in_transaction(conn, tsql.SERVER_NOW)
        version = hook.read_in_transaction(conn, tsql.CT_CURRENT_VERSION)
        if version is None:
            raise database_not_tracked_error(
                f"{hook.server}, database {hook.database} (table {instance.source})"
            )
        position = version_lsn(int(version))
        window_dir = f"{base_path}/{instance.name}/{Lsn.zero().hex}_{position.hex}"
        commit_time = read_at.astimezone(UTC) if isinstance(read_at, datetime) else datetime.now(UTC)
        writer = output.writer(filesystem, window_dir, schema, instance)
        with writer:
            cursor = conn.cursor()
            try:
                cursor.execute(
                    tsql.snapshot_chunk_query(
                        instance.source_schema, instance.source_table, instance.columns, [], after_key=False
                    )
                )
                while chunk := cursor.fetchmany(output.batch_size):
                    writer.write_batch(
                        rows_to_snapshot_batch(
                            chunk, schema, converters, lsn=position, mask=mask, commit_time=commit_time
                        )
                    )
                    rows += len(chunk)
            finally:
                cursor.close()
    manifest = output.manifest(
        writer,
        SNAPSHOT,
        instance,
        server=hook.server,
        to_lsn=position,
        to_time=commit_time,
        operation_counts={**zero_operation_counts(), "insert": rows},
    )
    log = output.log
    result = finish_window(
        filesystem, window_dir, manifest, base_uri=output.base_uri, started=started, log=log
    )
    table_dir = f"{base_path}/{instance.name}"
    record_columns(
        filesystem,
        table_dir,
        position,
        column_descriptions(instance),
        columns_before(filesystem, table_dir, position),
    )
    if log is not None:
        log.info("%s: snapshot at change tracking version %s (%d rows)", instance.name, version, rows)
    return result.change_window(
        watermark_key(conn_id, output.database, instance.name),
        to_position_time=commit_time.isoformat(),
        snapshot=SnapshotDetails(
            method=METHOD, read_positions=(position.hex,), consistent_after=position.hex
        ),
    )


def snapshot_tracked_tables(
    hook: ChangeTrackingHook,
    names: Sequence[str],
    *,
    conn_id: str,
    base_uri: str,
    **copy_options: Any,
) -> list[ChangeWindow]:
    """
    Snapshot each named tracked table (``schema.table``); return the windows in the order of ``names``.

    :param copy_options: the other fields of :class:`WindowOutput` (``batch_size``, ``dag_id``, ...).
    """
    copy_options.pop("require_keys", None)  # a tracked table always has its primary key
    output = WindowOutput(base_uri, hook.source_database(), **copy_options)
    return [
        snapshot_tracked_table(hook, instance, output, conn_id=conn_id)
        for instance in hook.get_tracked_tables(names)
    ]
