"""
Extraction: stream planned LSN windows into Parquet files plus a manifest, as library functions.

:func:`extract_window` writes one window; :func:`extract_windows` does one run's work for a list of
capture instances (plan the windows, extract each, return them as :class:`ChangeWindow`).
CdcExtractOperator calls it; the snapshot copy (``snapshot/table_copy.py``) builds its result with
:class:`ExtractResult`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.extraction.added_column_values import reread_added_columns
from airflow_provider_sqlserver_cdc.extraction.blind_spot import backfill_blind_spot, blind_spot
from airflow_provider_sqlserver_cdc.extraction.ddl_split import window_pieces
from airflow_provider_sqlserver_cdc.extraction.instance_switch import (
    DEFAULT_CREATE_CAPTURE_INSTANCE,
    DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE,
    disable_completed_old,
    follow_schema,
    load_switches,
)
from airflow_provider_sqlserver_cdc.extraction.window_output import OUTPUT_FIELDS, WindowOutput
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE
from airflow_provider_sqlserver_cdc.parquet.manifest_store import write_manifest
from airflow_provider_sqlserver_cdc.parquet.masked_columns import instance_masking
from airflow_provider_sqlserver_cdc.parquet.window_writer import (
    DEFAULT_MAX_FILE_BYTES,
    ParquetWindowWriter,
    join_uri,
    resolve_filesystem,
)
from airflow_provider_sqlserver_cdc.state import read_watermarks
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow, SnapshotDetails, watermark_key
from airflow_provider_sqlserver_cdc.window.contiguity import (
    DEFAULT_ON_GAP,
    ON_GAP,
    AppliedPosition,
    UnappliedChanges,
    backfill_command,
    gap_interval_start,
    guard_window,
)
from airflow_provider_sqlserver_cdc.window.manifest import (
    CHANGES,
    DEFAULT_WINDOW_MODE,
    MANIFEST_NAME,
    OPERATION_NAMES,
    WINDOW_MODES,
    WindowManifest,
    source_description,
    zero_operation_counts,
)
from airflow_provider_sqlserver_cdc.window.planning import LsnWindow, ServerTimeZone, plan_windows
from airflow_provider_sqlserver_cdc.window.schema_drift import (
    DEFAULT_ON_SCHEMA_CHANGE,
    ON_SCHEMA_CHANGE,
    DdlEvent,
)

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable, Sequence

    import pyarrow.fs as pafs

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.lsn import Lsn

PROGRESS_EVERY_S = 30.0
#: the fields a :class:`ChangeWindow` takes from its window's manifest as they are
MANIFEST_FIELDS = (
    "capture_instance",
    "source",
    "kind",
    "mode",
    "from_time",
    "to_time",
    "row_count",
    "operation_counts",
    "applied_through",
    "healed_gap",
)


@dataclass
class ExtractResult:
    """What one window extraction wrote: its manifest, directory and duration."""

    manifest: WindowManifest
    window_uri: str
    seconds: float

    @property
    def manifest_uri(self) -> str:
        """URI of the window's ``_manifest.json``."""
        return join_uri(self.window_uri, MANIFEST_NAME)

    def change_window(
        self,
        state_key: str,
        *,
        to_position_time: str | None = None,
        empty: bool = False,
        snapshot: SnapshotDetails | None = None,
    ) -> ChangeWindow:
        """
        Return the window as it flows to the merge and the watermark.

        :param state_key: the watermark Variable of the capture instance.
        :param to_position_time: UTC commit time of the window's last LSN (ISO 8601).
        :param empty: whether the window holds no transaction.
        :param snapshot: how a snapshot window was taken.
        """
        m = self.manifest
        return ChangeWindow(
            **{name: getattr(m, name) for name in MANIFEST_FIELDS},
            from_position=m.from_lsn,
            to_position=m.to_lsn,
            window_uri=self.window_uri,
            manifest_uri=self.manifest_uri,
            state_key=state_key,
            to_position_time=to_position_time,
            file_count=len(m.files),
            byte_count=sum(f.bytes for f in m.files),
            empty=empty,
            snapshot=snapshot,
        )


def extract_window(
    hook: SqlServerCdcHook,
    instance: CaptureInstance,
    window: LsnWindow,
    *,
    base_uri: str,
    tz: ServerTimeZone,
    database: str,
    row_filter_option: str = tsql.DEFAULT_ROW_FILTER_OPTION,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    dag_id: str | None = None,
    run_id: str | None = None,
    log: logging.Logger | None = None,
    reader: str = "auto",
    applied_through: Lsn | None = None,
    healed_gap: UnappliedChanges | None = None,
    ddl_events: Sequence[DdlEvent] = (),
    stream: str | None = None,
    masking: ColumnMasking | None = None,
) -> ExtractResult:
    """
    Stream one window into ``{base_uri}/{capture_instance}/{from_lsn}_{to_lsn}/`` and write its manifest last.

    Memory is bounded by ``batch_size``; a re-run replaces the window's files.

    :param hook: the source hook.
    :param instance: the capture instance with columns and key columns loaded.
    :param window: the LSN window.
    :param base_uri: local path or filesystem URI of the windows' base directory.
    :param tz: the server's time zone.
    :param database: the source database name (for the manifest).
    :param row_filter_option: ``all`` or ``all update old``.
    :param batch_size: rows per record batch.
    :param max_file_bytes: roll to a new Parquet file at this size.
    :param dag_id: recorded in the manifest.
    :param run_id: recorded in the manifest.
    :param log: where progress goes.
    :param reader: ``auto``, ``arrow-odbc`` or ``pyodbc`` (see SqlServerCdcHook.stream_changes).
    :param applied_through: the applied-through LSN the window continues (``window.contiguity``).
    :param healed_gap: the missed changes the window was extended back to take in.
    :param ddl_events: the DDL run on the source table inside the window (``cdc.ddl_history``).
    :param stream: the name the window is filed and merged under when ``instance`` is a later capture
        instance of the stream's table (``extraction.instance_switch``); default ``instance.name``.
    :param masking: the column masking rules; the table's are applied before Parquet is written.
    """
    started = time.monotonic()
    filesystem, base_path = resolve_filesystem(base_uri)
    name = stream or instance.name
    window_dir = f"{base_path}/{name}/{window.directory_name}"
    schema = hook.changes_schema(instance)
    table_masking = instance_masking(masking, instance)
    counts = zero_operation_counts()
    rows = 0
    last_report = started
    writer = ParquetWindowWriter(
        filesystem, window_dir, schema, max_file_bytes=max_file_bytes, masking=table_masking
    )
    with writer:
        for batch in hook.stream_changes(
            instance, window, tz=tz, row_filter_option=row_filter_option, batch_size=batch_size, reader=reader
        ):
            writer.write_batch(batch)
            rows += batch.num_rows
            ops = pc.value_counts(batch.column("__$operation")).to_pylist()
            for entry in ops:
                counts[OPERATION_NAMES[entry["values"]]] += entry["counts"]
            now = time.monotonic()
            if log is not None and now - last_report >= PROGRESS_EVERY_S:
                log.info(
                    "%s: %d rows so far, %.0f rows/s", instance.name, rows, rows / max(now - started, 1e-9)
                )
                last_report = now
    manifest = writer.manifest(
        CHANGES,
        instance,
        capture_instance=name,
        source=source_description(hook.server, database, instance),
        **window.manifest_range(),
        row_filter_option=row_filter_option,
        operation_counts=counts,
        dag_id=dag_id,
        run_id=run_id,
        applied_through=applied_through.hex if applied_through is not None else None,
        healed_gap=healed_gap.to_xcom() if healed_gap is not None else None,
        ddl_events=[e.to_manifest() for e in ddl_events] or None,
        read_instance=instance.name if name != instance.name else None,
    )
    return finish_window(filesystem, window_dir, manifest, base_uri=base_uri, started=started, log=log)


def finish_window(
    filesystem: pafs.FileSystem,
    window_dir: str,
    manifest: WindowManifest,
    *,
    base_uri: str,
    started: float,
    log: logging.Logger | None = None,
) -> ExtractResult:
    """
    Write a window's manifest, last and atomically, and return what the window holds.

    :param filesystem: the filesystem of the windows.
    :param window_dir: the window directory's path on ``filesystem``: ``{base}/{capture_instance}/{name}``.
    :param manifest: the window's manifest (its files already closed).
    :param base_uri: the windows' base directory as the user gave it.
    :param started: ``time.monotonic()`` when the window's extraction started.
    :param log: where the summary goes.
    """
    manifest_path = write_manifest(filesystem, window_dir, manifest)
    seconds = time.monotonic() - started
    if log is not None:
        log.info(
            "%s: %s window %s..%s done: %d rows (%s) in %d file(s), %.1f s, %.0f rows/s -> %s",
            manifest.capture_instance,
            manifest.kind,
            manifest.from_lsn,
            manifest.to_lsn,
            manifest.row_count,
            ", ".join(f"{k} {v}" for k, v in manifest.operation_counts.items()),
            len(manifest.files),
            seconds,
            manifest.row_count / max(seconds, 1e-9),
            manifest_path,
        )
    window_uri = join_uri(base_uri, manifest.capture_instance, window_dir.rsplit("/", 1)[-1])
    return ExtractResult(manifest, window_uri, seconds)


def extract_windows(
    hook: SqlServerCdcHook,
    names: Sequence[str],
    *,
    conn_id: str,
    base_uri: str,
    window_mode: str = DEFAULT_WINDOW_MODE,
    data_interval_start: datetime | None = None,
    data_interval_end: datetime | None = None,
    row_filter_option: str = tsql.DEFAULT_ROW_FILTER_OPTION,
    require_keys: bool = True,
    on_gap: str = DEFAULT_ON_GAP,
    on_schema_change: str = DEFAULT_ON_SCHEMA_CHANGE,
    create_capture_instance: bool = DEFAULT_CREATE_CAPTURE_INSTANCE,
    disable_old_capture_instance: bool = DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE,
    log: logging.Logger | None = None,
    **extract_options: Any,
) -> list[ChangeWindow]:
    """
    Plan one run's window per capture instance and extract each; return them in the order of ``names``.

    :param hook: the source hook.
    :param names: capture instance names, or ``schema.table`` for the newest instance of a table.
    :param conn_id: the Airflow connection id of the source (part of the watermark key).
    :param base_uri: local path or filesystem URI of the windows' base directory.
    :param window_mode: ``interval`` (the run's data interval) or ``watermark`` (after the stored LSN).
    :param data_interval_start: aware start of the run's data interval (interval mode).
    :param data_interval_end: aware end of the run's data interval (interval mode).
    :param row_filter_option: ``all`` or ``all update old``.
    :param require_keys: raise NoKeyColumnsError for an instance without key columns.
    :param on_gap: unapplied changes before an interval window (``window.contiguity``): ``heal``
        extends the window back over them, ``fail`` raises ContiguityGapError before writing anything.
    :param on_schema_change: a DDL in a window that makes the capture instance miss or change data
        (``window.schema_drift``): ``fail`` raises SchemaChangeError before writing anything,
        ``ignore`` records it in the manifest and goes on. A newer capture instance of the table (made
        by a DBA, or here with ``create_capture_instance``) is switched to at its start LSN, and the
        rows changed in between are back-filled by primary key (``extraction.instance_switch``,
        ``extraction.blind_spot``).
    :param create_capture_instance: create the table's next capture instance when a DDL needs one
        (``sys.sp_cdc_enable_table``; the login needs db_owner).
    :param disable_old_capture_instance: disable the old capture instance once the target holds every
        change up to the switch (``sys.sp_cdc_disable_table``; db_owner).
    :param log: where progress goes.
    :param extract_options: further arguments of :func:`extract_window` (``batch_size``,
        ``max_file_bytes``, ``dag_id``, ``run_id``, ``reader``).
    """
    for name, value, allowed in (
        ("window_mode", window_mode, WINDOW_MODES),
        ("on_gap", on_gap, ON_GAP),
        ("on_schema_change", on_schema_change, ON_SCHEMA_CHANGE),
    ):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    tsql.validate_row_filter_option(row_filter_option)
    database = hook.source_database()
    streams, catalog = load_switches(
        hook, names, lambda name: watermark_key(conn_id, database, name), require_keys=require_keys
    )
    tz = hook.get_server_time_zone()
    keys = {s.stream: watermark_key(conn_id, database, s.stream) for s in streams}
    marks = read_watermarks(keys)
    instances = [s.old for s in streams]
    watermarks = None
    if window_mode == "watermark":
        watermarks = {s.old.name: marks[s.stream].position if marks[s.stream] else None for s in streams}
    planned = plan_windows(
        hook,
        instances,
        mode=window_mode,
        tz=tz,
        data_interval_start=data_interval_start,
        data_interval_end=data_interval_end,
        watermarks=watermarks,
        applied_through={s.old.name: marks[s.stream].position if marks[s.stream] else None for s in streams},
    )
    if disable_old_capture_instance:
        # After planning: a window that still starts before the switch (the run that created the new
        # instance back-filled past its own interval) reads the old instance once more.
        streams = [
            disable_completed_old(
                hook,
                s,
                marks[s.stream].position if marks[s.stream] else None,
                state_key=keys[s.stream],
                needed_from=window.from_lsn,
                log=log,
            )
            for s, window in zip(streams, planned, strict=True)
        ]
    remedy = _backfill_remedy(extract_options.get("dag_id"), data_interval_start, data_interval_end)
    guarded_windows = []
    for switch, window in zip(streams, planned, strict=True):
        mark = marks[switch.stream]
        applied = (
            AppliedPosition(mark.position, tuple(mark.held_ranges), mark.recorded_through)
            if mark is not None
            else None
        )
        guarded = guard_window(
            hook,
            switch.old,
            window,
            applied,
            tz,
            on_gap=on_gap,
            remedy=remedy,
        )
        window = guarded.window
        switch, events = follow_schema(
            hook,
            switch,
            window,
            catalog,
            on_schema_change=on_schema_change,
            create_capture_instance=create_capture_instance,
            state_key=keys[switch.stream],
            log=log,
        )
        guarded_windows.append((switch, guarded, events))
        if guarded.healed is not None and log is not None:
            gap = guarded.healed
            log.warning(
                "%s: healing a gap: %d change row(s) at LSN %s..%s (committed %s .. %s) were never applied; "
                "the target holds every change up to %s. This run's window now starts there: %s..%s",
                switch.stream,
                gap.rows,
                gap.first_lsn.hex,
                gap.last_lsn.hex,
                gap.first_time.isoformat() if gap.first_time else "?",
                gap.last_time.isoformat() if gap.last_time else "?",
                gap.applied_through.hex,
                window.from_lsn.hex,
                window.to_lsn.hex,
            )
    output = WindowOutput(
        base_uri, database, log=log, **{k: v for k, v in extract_options.items() if k in OUTPUT_FIELDS}
    )
    windows = []
    for switch, guarded, events in guarded_windows:
        carried, to_time = None, None
        for number, (instance, part) in enumerate(window_pieces(hook, switch, guarded.window, events)):
            if log is not None:
                log.info(
                    "%s: %s window %s..%s%s%s",
                    switch.stream,
                    part.mode,
                    part.from_lsn.hex,
                    part.to_lsn.hex,
                    " (empty)" if part.is_empty else "",
                    f" read from {instance.name}" if instance.name != switch.stream else "",
                )
            result = extract_window(
                hook,
                instance,
                part,
                base_uri=base_uri,
                tz=tz,
                database=database,
                row_filter_option=row_filter_option,
                log=log,
                applied_through=guarded.applied_through if number == 0 else None,
                healed_gap=guarded.healed if number == 0 else None,
                ddl_events=[e for e in events if part.from_lsn <= e.lsn <= part.to_lsn],
                stream=switch.stream,
                **extract_options,
            )
            to_local = hook.map_lsn_to_time(part.to_lsn) if not part.to_lsn.is_zero else None
            to_time = tz.to_utc(to_local).isoformat() if to_local else None
            windows.append(
                result.change_window(keys[switch.stream], to_position_time=to_time, empty=part.is_empty)
            )
            carried = instance
            spot = blind_spot(hook, switch, part) if instance.name == switch.old.name else None
            if spot is not None:
                backfill = backfill_blind_spot(hook, switch, spot, result.manifest, output)
                if backfill is not None:
                    windows.append(ExtractResult(*backfill).change_window(keys[switch.stream]))
                    carried = switch.new
        if switch.new is not None and carried is not None:  # around a switch: columns added since?
            added = reread_added_columns(
                hook, switch.stream, carried, guarded.window, output, like=result.manifest
            )
            if added is not None:
                windows.append(
                    ExtractResult(*added).change_window(keys[switch.stream], to_position_time=to_time)
                )
    return windows


def _backfill_remedy(
    dag_id: str | None, interval_start: datetime | None, interval_end: datetime | None
) -> Callable[[UnappliedChanges], str]:
    """Return what to tell a user whose run found a gap: the backfill that fills it, or how to heal."""

    def remedy(gap: UnappliedChanges) -> str:
        heal = "Or set on_gap='heal' (the default) to take the missed changes into this run's window"
        if dag_id is None or interval_start is None or interval_end is None or gap.first_time is None:
            return f"Run the missed intervals (airflow backfill create) and then this one again. {heal}"
        first = gap_interval_start(gap.first_time, interval_start, interval_end)
        return (
            "Nothing was written. Fill the gap with the runs of the missed intervals, this one included: "
            f"{backfill_command(dag_id, first, interval_start)}. {heal}"
        )

    return remedy
