"""CdcExtractOperator: extract the LSN window of each capture instance into Parquet plus a manifest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE, SqlServerCdcHook
from airflow_provider_sqlserver_cdc.operators.window_task import WindowTaskMixin
from airflow_provider_sqlserver_cdc.parquet.window_writer import DEFAULT_MAX_FILE_BYTES
from airflow_provider_sqlserver_cdc.window.extraction import extract_windows

if TYPE_CHECKING:
    from airflow.sdk import Context


class CdcExtractOperator(WindowTaskMixin, BaseOperator):
    """
    Extract the LSN window of one or several capture instances into Parquet files and a manifest.

    Works with dynamic task mapping: ``CdcExtractOperator.partial(...).expand(capture_instance=[...])``.
    Plans and writes the windows with ``window.extraction.extract_windows`` and returns to XCom
    ``ChangeWindow.to_xcom()`` per capture instance (a list when several were given): capture
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

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        return self.write_windows(
            context,
            extract_windows,
            window_mode=self.window_mode,
            data_interval_start=context.get("data_interval_start"),
            data_interval_end=context.get("data_interval_end"),
            row_filter_option=self.row_filter_option,
            batch_size=self.batch_size,
            max_file_bytes=self.max_file_bytes,
            reader=self.reader,
        )
