"""
Change Tracking windows: version ranges ``(last, stop]`` extracted into the CDC window format.

A window of a tracked table is planned as the last synchronized version (exclusive) and a stop
version (inclusive), and extracted inside one SNAPSHOT transaction that reads
``CHANGE_TRACKING_CURRENT_VERSION()``, ``CHANGE_TRACKING_MIN_VALID_VERSION()`` and
``CHANGETABLE(CHANGES t, last)`` LEFT JOIN ``t``, so versions and row values agree. Each changed key
is one row: operation 2 (``I``), 4 (``U``) or 1 (``D``, key columns only), at position
``(version_lsn(SYS_CHANGE_VERSION), version_lsn(SYS_CHANGE_VERSION))``. The manifest's ``from_lsn`` /
``to_lsn`` are ``version_lsn(last + 1)`` / ``version_lsn(stop)``, so the merge job, its position guard
and its applied-range bookkeeping treat the window as any CDC window.

What CT cannot give (said in the log of every window): the values between two versions (a key
changed three times is one row with the values as of the extraction) and before-images.

Window modes:

- ``interval``: the data interval maps to versions through ``sys.dm_tran_commit_table`` (the last
  version committed before each bound) when the login can read it (VIEW SERVER STATE); otherwise
  the window falls back to ``watermark`` and the log says so.
- ``watermark``: from the stored watermark to the current version.

An interval window starts at the stored watermark (the target's applied-through version), not at
the interval's first version. Below it, CHANGETABLE would give nothing the target lacks (it has no
history: each key once, with its current values) and would fail once that version is cleaned up;
above it, CHANGETABLE from the watermark takes in whatever earlier runs missed, so the contiguity
guard's "heal" is what a Change Tracking window always does. A re-run or an out-of-order backfill
of an interval the target holds is therefore an empty window: nothing is read, nothing changes.

A row's version may lie above ``stop``: CHANGETABLE reports a key's *latest* change, and the row's
values are those of that latest version, so the row is kept with its true version (dropping it
would lose the key's change inside the window). The position guard makes the later window that
carries the same row again a no-op.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.extraction.cdc_windows import ExtractResult, finish_window
from airflow_provider_sqlserver_cdc.extraction.column_changes import (
    added_columns,
    column_hash,
    columns_before,
    describe_column_changes,
    record_columns,
)
from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.hooks.change_reader import changes_schema
from airflow_provider_sqlserver_cdc.hooks.change_tracking import (
    ChangeTrackingNotEnabledError,
    lsn_version,
    retention_error,
    version_lsn,
)
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_converter, column_descriptions
from airflow_provider_sqlserver_cdc.parquet.window_writer import (
    ParquetWindowWriter,
    resolve_filesystem,
)
from airflow_provider_sqlserver_cdc.state import read_watermarks
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow, watermark_key
from airflow_provider_sqlserver_cdc.window.manifest import (
    CHANGES,
    WINDOW_MODES,
    zero_operation_counts,
)
from airflow_provider_sqlserver_cdc.window.net_effect import DELETE, INSERT, OPERATION_NAMES, UPDATE_AFTER

if TYPE_CHECKING:
    import logging
    from collections.abc import Mapping, Sequence

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook

#: SYS_CHANGE_OPERATION -> the window format's __$operation
OPERATIONS = {"I": INSERT, "U": UPDATE_AFTER, "D": DELETE}
#: the manifest's row_filter_option of a Change Tracking window: net changes, no before-images
ROW_FILTER_OPTION = "change tracking net changes"
LIMITS = (
    "change tracking gives each changed key once, with its values as of the read: values between two "
    "versions and before-images are not available"
)


@dataclass(frozen=True)
class VersionWindow:
    """
    A planned version range ``(last_version, stop_version]`` of one tracked table.

    :param last_version: the last synchronized version (exclusive).
    :param stop_version: the last version of the window (inclusive); None: the current version when read.
    :param mode: ``interval`` or ``watermark`` (what the range was cut from).
    :param from_time: UTC start of the data interval (interval mode).
    :param to_time: UTC end of the data interval (interval mode).
    """

    last_version: int
    stop_version: int | None
    mode: str
    from_time: datetime | None = None
    to_time: datetime | None = None


def plan_version_window(
    hook: ChangeTrackingHook,
    instance: CaptureInstance,
    *,
    mode: str,
    watermark_version: int | None,
    data_interval_start: datetime | None = None,
    data_interval_end: datetime | None = None,
    log: logging.Logger | None = None,
) -> VersionWindow:
    """
    Plan one table's window: versions of the data interval when the commit table is readable, else after the watermark.

    :param hook: the source hook.
    :param instance: the tracked table.
    :param mode: ``interval`` or ``watermark``.
    :param watermark_version: the table's stored watermark as a version (None: none stored).
    :param data_interval_start: aware start of the run's data interval (interval mode).
    :param data_interval_end: aware end of the run's data interval (interval mode).
    :param log: where the plan is explained.
    """
    if mode not in WINDOW_MODES:
        raise ValueError(f"window_mode must be one of {WINDOW_MODES}, got {mode!r}")
    if mode == "interval":
        if data_interval_start is None or data_interval_end is None:
            raise ValueError("interval mode needs data_interval_start and data_interval_end")
        first = hook.version_at(data_interval_start.astimezone(UTC))
        last = hook.version_at(data_interval_end.astimezone(UTC)) if first is not None else None
        if first is not None and last is not None:
            if watermark_version is None:
                return VersionWindow(
                    first, max(first, last), "interval", data_interval_start, data_interval_end
                )
            if log is not None and watermark_version < first:
                log.warning(
                    "%s: the target holds changes up to version %d only, the interval starts after %d: "
                    "this window starts at the watermark to take in the versions in between",
                    instance.name,
                    watermark_version,
                    first,
                )
            if log is not None and last <= watermark_version:
                log.info(
                    "%s: the target already holds the interval's versions (up to %d; watermark %d): "
                    "an empty window (a re-run or a backfill)",
                    instance.name,
                    last,
                    watermark_version,
                )
            # CHANGETABLE has no history (each key once, with its current values): read from an older
            # version, it gives nothing the target lacks, and fails once that version is cleaned up.
            stop = max(watermark_version, last)
            return VersionWindow(watermark_version, stop, "interval", data_interval_start, data_interval_end)
        if log is not None:
            log.warning(
                "%s: sys.dm_tran_commit_table is not readable (GRANT VIEW SERVER STATE to map the data "
                "interval to versions): this window is watermark-based, from the stored watermark to the "
                "current version",
                instance.name,
            )
    if watermark_version is None:
        raise ChangeTrackingNotEnabledError(
            f"{instance.name}: no watermark is stored, so there is no version to continue from; snapshot the "
            "table first (the pipeline's plan task does when no watermark exists)"
        )
    return VersionWindow(watermark_version, None, "watermark")


def _batch(rows: Sequence[Sequence[Any]], schema: pa.Schema, converters: Sequence[Any]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True))
    positions = [version_lsn(int(v)).value for v in columns[0]]
    operations = [OPERATIONS[str(op).strip().upper()] for op in columns[1]]
    count = len(rows)
    arrays = [
        pa.array(positions, pa.binary()),
        pa.array(positions, pa.binary()),
        pa.array(operations, pa.int32()),
        pa.nulls(count, pa.binary()),
        pa.nulls(count, pa.timestamp("us", tz="UTC")),
    ]
    arrays.extend(convert(values) for convert, values in zip(converters, columns[2:], strict=True))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def extract_version_window(
    hook: ChangeTrackingHook,
    instance: CaptureInstance,
    window: VersionWindow,
    output: WindowOutput,
) -> tuple[ExtractResult, bool]:
    """
    Extract one version window into ``{base_uri}/{name}/{from}_{to}/`` and write its manifest last.

    Returns the result and whether the window is empty (no version in the range; not queried).
    When columns were added to the table since its previous window, the window also re-reads, in
    the same SNAPSHOT transaction, every row that holds a value in one of them (see the module).

    :param hook: the source hook.
    :param instance: the tracked table (:meth:`ChangeTrackingHook.get_tracked_table`).
    :param window: the planned version range.
    :param output: where and how the window is written (the table's masking applied before Parquet).
    :raises ChangeTrackingRetentionError: the last version is below the table's min valid version.
    """
    started = time.monotonic()
    filesystem, base_path = resolve_filesystem(output.base_uri)
    schema = changes_schema(instance)
    converters = [column_converter(c) for c in instance.columns]
    counts = zero_operation_counts()
    last = window.last_version
    table_dir = f"{base_path}/{instance.name}"
    before = columns_before(filesystem, table_dir, version_lsn(last))
    added = added_columns(before, instance.columns) if before is not None else []
    rows = reread = 0
    with hook.snapshot_transaction() as conn:
        current = int(hook.read_in_transaction(conn, tsql.CT_CURRENT_VERSION) or 0)
        stop = current if window.stop_version is None else min(window.stop_version, current)
        min_valid = hook.read_in_transaction(
            conn, tsql.ct_min_valid_version_query(instance.source_schema, instance.source_table)
        )
        if min_valid is None:
            raise ChangeTrackingNotEnabledError(
                f"{instance.source}: CHANGE_TRACKING_MIN_VALID_VERSION is NULL: the table is no longer tracked. "
                f"Run ALTER TABLE {instance.source} ENABLE CHANGE_TRACKING and re-snapshot it."
            )
        if last < int(min_valid):
            raise retention_error(instance, output.database, last, int(min_valid))
        if stop < last:
            raise ChangeTrackingNotEnabledError(
                f"{instance.source}: CHANGE_TRACKING_CURRENT_VERSION() is {current}, below the last synchronized "
                f"version {last}: the database was restored or is a secondary that is behind. Wait for it, or "
                "re-snapshot the table."
            )
        empty = stop == last
        directory = f"{version_lsn(last + 1).hex}_{version_lsn(stop).hex}"
        writer = output.writer(filesystem, f"{table_dir}/{directory}", schema, instance)
        with writer:
            if not empty:
                changes = tsql.ct_changes_query(
                    instance.source_schema, instance.source_table, instance.columns, instance.key_columns
                )
                rows = _copy_rows(
                    conn, changes, (last,), writer, schema, converters, counts, output.batch_size
                )
                if added:
                    # Rows unchanged since the DDL are not in CHANGETABLE, but hold the added columns'
                    # values (DEFAULT ... WITH VALUES, NOT NULL DEFAULT): they go in as updates at `stop`,
                    # where their values hold (a key changed after `last` is also a CHANGETABLE row, and
                    # the merge keeps each key's newest position).
                    reread = _copy_rows(
                        conn,
                        tsql.ct_rows_with_values_query(
                            instance.source_schema, instance.source_table, instance.columns, added
                        ),
                        (),
                        writer,
                        schema,
                        converters,
                        counts,
                        output.batch_size,
                        version=stop,
                    )
                    rows += reread
    log = output.log
    if log is not None:
        log.info("%s: versions (%d, %d], %s window; %s", instance.name, last, stop, window.mode, LIMITS)
        _log_column_changes(instance, before, added, reread, empty, log)
    manifest = output.manifest(
        writer,
        CHANGES,
        instance,
        server=hook.server,
        from_lsn=version_lsn(last if empty else last + 1),
        to_lsn=version_lsn(stop),
        from_time=window.from_time,
        to_time=window.to_time,
        mode=window.mode,
        row_filter_option=ROW_FILTER_OPTION,
        operation_counts=counts,
    )
    window_dir = f"{table_dir}/{directory}"
    result = finish_window(
        filesystem, window_dir, manifest, base_uri=output.base_uri, started=started, log=log
    )
    if not empty:
        record_columns(filesystem, table_dir, version_lsn(stop), column_descriptions(instance), before)
    return result, empty


def _copy_rows(
    conn: Any,
    sql: str,
    params: Sequence[Any],
    writer: ParquetWindowWriter,
    schema: pa.Schema,
    converters: Sequence[Any],
    counts: dict[str, int],
    batch_size: int,
    *,
    version: int | None = None,
) -> int:
    """
    Stream ``sql``'s rows into the window; return how many.

    :param version: None: the rows start with version and operation (:func:`tsql.ct_changes_query`);
        else they hold the columns only and go in as updates at this version.
    """
    rows = 0
    cursor = conn.cursor()
    try:
        cursor.execute(sql, *params)
        while chunk := cursor.fetchmany(batch_size):
            if version is not None:
                chunk = [(version, "U", *row) for row in chunk]
            batch = _batch(chunk, schema, converters)
            writer.write_batch(batch)
            rows += len(chunk)
            for op in batch.column("__$operation").to_pylist():
                counts[OPERATION_NAMES[op]] += 1
    finally:
        cursor.close()
    return rows


def _log_column_changes(
    instance: CaptureInstance,
    before: Sequence[Mapping[str, Any]] | None,
    added: Sequence[str],
    reread: int,
    empty: bool,
    log: logging.Logger,
) -> None:
    """Say how the table's columns changed since its previous window, and what the window did about it."""
    after = column_descriptions(instance)
    changes = describe_column_changes(before, after) if before is not None else []
    if not changes:
        return
    if empty:
        done = "no version since the previous window: the next window that holds one takes the change in"
    elif added:
        done = (
            f"the target gets the new column list with this window; besides the changed keys, the {reread} "
            f"row(s) that hold a value in {', '.join(added)} were re-read"
        )
    else:
        done = "the target gets the new column list with this window (the merge widens what it can)"
    log.warning(
        "%s: the table's columns changed since its previous window (%s; column hash %s -> %s): %s",
        instance.name,
        "; ".join(changes),
        column_hash(before or []),
        column_hash(after),
        done,
    )


def extract_version_windows(
    hook: ChangeTrackingHook,
    names: Sequence[str],
    *,
    conn_id: str,
    base_uri: str,
    window_mode: str = "watermark",
    data_interval_start: datetime | None = None,
    data_interval_end: datetime | None = None,
    log: logging.Logger | None = None,
    **extract_options: Any,
) -> list[ChangeWindow]:
    """
    Plan and extract one run's window per tracked table; return them in the order of ``names``.

    :param hook: the source hook.
    :param names: tracked tables as ``schema.table``.
    :param conn_id: the Airflow connection id of the source (part of the watermark key).
    :param base_uri: local path or filesystem URI of the windows' base directory.
    :param window_mode: ``interval`` or ``watermark`` (see the module).
    :param data_interval_start: aware start of the run's data interval (interval mode).
    :param data_interval_end: aware end of the run's data interval (interval mode).
    :param log: where progress goes.
    :param extract_options: the other fields of :class:`WindowOutput` (``batch_size``, ``dag_id``, ...).
    """
    extract_options.pop("require_keys", None)  # a tracked table always has its primary key
    database = hook.source_database()
    output = WindowOutput(base_uri, database, log=log, **extract_options)
    instances = hook.get_tracked_tables(names)
    keys = {i.name: watermark_key(conn_id, database, i.name) for i in instances}
    marks = read_watermarks(keys)
    windows = []
    for instance in instances:
        mark = marks[instance.name]
        planned = plan_version_window(
            hook,
            instance,
            mode=window_mode,
            watermark_version=lsn_version(mark.position) if mark else None,
            data_interval_start=data_interval_start,
            data_interval_end=data_interval_end,
            log=log,
        )
        result, empty = extract_version_window(hook, instance, planned, output)
        windows.append(result.change_window(keys[instance.name], empty=empty))
    return windows
