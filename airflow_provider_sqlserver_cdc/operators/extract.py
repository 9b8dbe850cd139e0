"""CdcExtractOperator: stream the LSN window of each capture instance into Parquet plus a manifest."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
from airflow.sdk import BaseOperator

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names, require_key_columns
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE, SqlServerCdcHook
from airflow_provider_sqlserver_cdc.parquet.manifest import (
    MANIFEST_NAME,
    OPERATION_NAMES,
    WindowManifest,
    column_descriptions,
    source_description,
    write_manifest,
    zero_operation_counts,
)
from airflow_provider_sqlserver_cdc.parquet.window_writer import (
    DEFAULT_MAX_FILE_BYTES,
    ParquetWindowWriter,
    join_uri,
    resolve_filesystem,
)
from airflow_provider_sqlserver_cdc.state import read_watermark, watermark_key
from airflow_provider_sqlserver_cdc.windows import MODES, LsnWindow, ServerTimeZone, plan_windows

if TYPE_CHECKING:
    import logging

    from airflow.sdk import Context

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance

PROGRESS_EVERY_S = 30.0


@dataclass
class ExtractResult:
    """What one window extraction produced (becomes the XCom value)."""

    manifest: WindowManifest
    window_uri: str
    seconds: float

    @property
    def manifest_uri(self) -> str:
        """URI of the window's ``_manifest.json``."""
        return join_uri(self.window_uri, MANIFEST_NAME)

    def to_xcom(self, state_key: str, to_lsn_time: str | None, *, empty: bool = False) -> dict[str, Any]:
        """Small JSON description of the window; never row data."""
        m = self.manifest
        return {
            "empty": empty,
            "capture_instance": m.capture_instance,
            "source": m.source,
            "kind": m.kind,
            "mode": m.mode,
            "from_lsn": m.from_lsn,
            "to_lsn": m.to_lsn,
            "from_time": m.from_time,
            "to_time": m.to_time,
            "to_lsn_time": to_lsn_time,
            "window_uri": self.window_uri,
            "manifest_uri": self.manifest_uri,
            "row_count": m.row_count,
            "operation_counts": m.operation_counts,
            "file_count": len(m.files),
            "bytes": sum(f.bytes for f in m.files),
            "state_key": state_key,
        }


def extract_window(
    hook: SqlServerCdcHook,
    instance: CaptureInstance,
    window: LsnWindow,
    *,
    base_uri: str,
    tz: ServerTimeZone,
    database: str,
    row_filter_option: str = "all update old",
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    dag_id: str | None = None,
    run_id: str | None = None,
    log: logging.Logger | None = None,
    reader: str = "auto",
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
    """
    started = time.monotonic()
    filesystem, base_path = resolve_filesystem(base_uri)
    window_dir = f"{base_path}/{instance.name}/{window.directory_name}"
    schema = hook.changes_schema(instance)
    counts = zero_operation_counts()
    rows = 0
    last_report = started
    writer = ParquetWindowWriter(filesystem, window_dir, schema, max_file_bytes=max_file_bytes)
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
    manifest = WindowManifest(
        kind="changes",
        capture_instance=instance.name,
        source=source_description(hook.server, database, instance),
        from_lsn=window.from_lsn.hex,
        to_lsn=window.to_lsn.hex,
        from_time=window.from_time.isoformat() if window.from_time else None,
        to_time=window.to_time.isoformat() if window.to_time else None,
        mode=window.mode,
        row_filter_option=row_filter_option,
        key_columns=list(instance.key_columns),
        columns=column_descriptions(instance),
        files=writer.files,
        row_count=rows,
        operation_counts=counts,
        created_at=datetime.now(UTC).isoformat(),
        dag_id=dag_id,
        run_id=run_id,
    )
    manifest_path = write_manifest(filesystem, window_dir, manifest)
    seconds = time.monotonic() - started
    window_uri = join_uri(base_uri, instance.name, window.directory_name)
    if log is not None:
        log.info(
            "%s: window %s..%s done: %d rows (%s) in %d file(s), %.1f s, %.0f rows/s -> %s",
            instance.name,
            window.from_lsn.hex,
            window.to_lsn.hex,
            rows,
            ", ".join(f"{k} {v}" for k, v in counts.items()),
            len(writer.files),
            seconds,
            rows / max(seconds, 1e-9),
            manifest_path,
        )
    return ExtractResult(manifest, window_uri, seconds)


class CdcExtractOperator(BaseOperator):
    """
    Extract the LSN window of one or several capture instances into Parquet files and a manifest.

    Works with dynamic task mapping: ``CdcExtractOperator.partial(...).expand(capture_instance=[...])``.
    Returns to XCom a small dict per capture instance (a list when several were given): capture
    instance, source, from/to LSN and times, window and manifest URIs, row and operation counts,
    and ``state_key`` (the watermark Variable that WatermarkCommitOperator advances after the merge).

    :param capture_instance: a capture instance name (or ``schema.table``), or a list of them.
    :param base_path: local directory or filesystem URI (``s3://…``, ``gs://…``, any fsspec URI) of the windows.
    :param sqlserver_cdc_conn_id: Airflow connection (type ``mssql``) of the source.
    :param database: source database; defaults to the connection's schema.
    :param window_mode: ``interval`` (the run's data interval) or ``watermark`` (after the stored LSN).
    :param row_filter_option: ``all update old`` (default; before- and after-images) or ``all``.
    :param batch_size: rows per Arrow batch; bounds memory.
    :param max_file_bytes: roll to a new Parquet file at this size.
    :param require_key_columns: fail when an instance has no key columns (the merge needs them).
    :param server_time_zone: IANA zone of the server when it observes daylight-saving time.
    :param reader: ``auto`` (arrow-odbc unless a captured column is a (max)/LOB type), ``arrow-odbc`` or ``pyodbc``.
    """

    template_fields: Sequence[str] = (
        "capture_instance",
        "base_path",
        "sqlserver_cdc_conn_id",
        "database",
        "window_mode",
    )
    ui_color = "#cfe2f3"

    def __init__(
        self,
        *,
        capture_instance: str | list[str],
        base_path: str,
        sqlserver_cdc_conn_id: str = SqlServerCdcHook.default_conn_name,
        database: str | None = None,
        window_mode: str = "interval",
        row_filter_option: str = "all update old",
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        require_key_columns: bool = True,
        server_time_zone: str | None = None,
        reader: str = "auto",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.reader = reader
        self.capture_instance = capture_instance
        self.base_path = base_path
        self.sqlserver_cdc_conn_id = sqlserver_cdc_conn_id
        self.database = database
        self.window_mode = window_mode
        self.row_filter_option = row_filter_option
        self.batch_size = batch_size
        self.max_file_bytes = max_file_bytes
        self.require_key_columns = require_key_columns
        self.server_time_zone = server_time_zone

    def _hook(self) -> SqlServerCdcHook:
        return SqlServerCdcHook(
            self.sqlserver_cdc_conn_id, database=self.database, server_time_zone=self.server_time_zone
        )

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        if self.window_mode not in MODES:
            raise ValueError(f"window_mode must be one of {MODES}, got {self.window_mode!r}")
        tsql.validate_row_filter_option(self.row_filter_option)
        names = capture_instance_names(self.capture_instance)
        if not names:
            raise ValueError("capture_instance is empty: give at least one capture instance")
        hook = self._hook()
        try:
            database = hook.database or hook.get_database_name()
            tz = hook.get_server_time_zone()
            instances = hook.get_named_capture_instances(names)
            if self.require_key_columns:
                require_key_columns(instances)
            keys = {i.name: watermark_key(self.sqlserver_cdc_conn_id, database, i.name) for i in instances}
            watermarks = None
            if self.window_mode == "watermark":
                watermarks = {}
                for i in instances:
                    mark = read_watermark(keys[i.name])
                    watermarks[i.name] = mark.position if mark else None
            windows = plan_windows(
                hook,
                instances,
                mode=self.window_mode,
                tz=tz,
                data_interval_start=context.get("data_interval_start"),
                data_interval_end=context.get("data_interval_end"),
                watermarks=watermarks,
            )
            dag_run = context.get("dag_run")
            results = []
            for instance, window in zip(instances, windows, strict=True):
                self.log.info(
                    "%s: %s window %s..%s%s",
                    instance.name,
                    window.mode,
                    window.from_lsn.hex,
                    window.to_lsn.hex,
                    " (empty)" if window.is_empty else "",
                )
                result = extract_window(
                    hook,
                    instance,
                    window,
                    base_uri=self.base_path,
                    tz=tz,
                    database=database,
                    row_filter_option=self.row_filter_option,
                    batch_size=self.batch_size,
                    max_file_bytes=self.max_file_bytes,
                    dag_id=self.dag_id,
                    run_id=getattr(dag_run, "run_id", None),
                    log=self.log,
                    reader=self.reader,
                )
                to_local = hook.map_lsn_to_time(window.to_lsn) if not window.to_lsn.is_zero else None
                to_lsn_time = tz.to_utc(to_local).isoformat() if to_local else None
                results.append(result.to_xcom(keys[instance.name], to_lsn_time, empty=window.is_empty))
        finally:
            hook.close()
        return results[0] if isinstance(self.capture_instance, str) else results
