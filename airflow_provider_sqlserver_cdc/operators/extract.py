"""CdcExtractOperator: extract the LSN window of each capture instance into Parquet plus a manifest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_windows
from airflow_provider_sqlserver_cdc.operators.window_task import ChangeWindowTaskOperator
from airflow_provider_sqlserver_cdc.task_defaults import (
    DEFAULT_CREATE_CAPTURE_INSTANCE,
    DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE,
    DEFAULT_ON_GAP,
    DEFAULT_ON_SCHEMA_CHANGE,
    DEFAULT_ROW_FILTER_OPTION,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


class CdcExtractOperator(ChangeWindowTaskOperator):
    """
    Extract the LSN window of one or several capture instances into Parquet files and a manifest.

    Works with dynamic task mapping: ``CdcExtractOperator.partial(...).expand(capture_instance=[...])``.
    Plans and writes the windows with ``extraction.cdc_windows.extract_windows`` and returns to XCom
    ``ChangeWindow.to_xcom()`` per capture instance (a list when several were given): capture
    instance, source, from/to LSN and times, window and manifest URIs, row and operation counts,
    and ``state_key`` (the watermark Variable that WatermarkCommitOperator advances after the merge).

    Takes the arguments of :class:`ChangeWindowTaskOperator` (capture instance, base path, source
    connection, database, batch size, file size, key check, server time zone, window mode) and:
    :param row_filter_option: ``all update old`` (default; before- and after-images) or ``all``.
    :param reader: ``auto`` (arrow-odbc unless a captured column is a (max)/LOB type), ``arrow-odbc`` or ``pyodbc``.
    :param on_gap: what to do when the source holds changes between what the target has applied
        (the watermark) and this run's window, e.g. after missed intervals: ``heal`` (default) extends
        the window back over them and logs a warning; ``fail`` fails before writing anything, naming
        the gap and the ``airflow backfill create`` command that fills it (docs/backfill.md).
    :param on_schema_change: a DDL on the source table in the window that makes the capture instance
        miss or change data (a column added, a captured column dropped or retyped): ``fail``
        (default) fails before writing anything, naming the DDL and how to follow it with a second
        capture instance; ``ignore`` replicates the captured columns as they are (docs/schema-changes.md).
        A newer capture instance of the table is switched to at its start LSN, with the rows changed in
        between back-filled by primary key (then a table's windows are a list).
    :param create_capture_instance: create the table's next capture instance when a DDL needs one (db_owner).
    :param disable_old_capture_instance: disable the old capture instance once the target holds every change
        up to the switch (db_owner).
    """

    template_fields: Sequence[str] = (*ChangeWindowTaskOperator.template_fields, "on_gap", "on_schema_change")
    records_failures = True

    def __init__(
        self,
        *,
        row_filter_option: str = DEFAULT_ROW_FILTER_OPTION,
        reader: str = "auto",
        on_gap: str = DEFAULT_ON_GAP,
        on_schema_change: str = DEFAULT_ON_SCHEMA_CHANGE,
        create_capture_instance: bool = DEFAULT_CREATE_CAPTURE_INSTANCE,
        disable_old_capture_instance: bool = DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.create_capture_instance = create_capture_instance
        self.disable_old_capture_instance = disable_old_capture_instance
        self.on_gap = on_gap
        self.on_schema_change = on_schema_change
        self.row_filter_option = row_filter_option
        self.reader = reader

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        return self.write_change_windows(
            context,
            extract_windows,
            row_filter_option=self.row_filter_option,
            reader=self.reader,
            on_gap=self.on_gap,
            on_schema_change=self.on_schema_change,
            create_capture_instance=self.create_capture_instance,
            disable_old_capture_instance=self.disable_old_capture_instance,
        )
