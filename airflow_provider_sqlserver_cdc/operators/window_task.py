"""WindowTaskOperator, ChangeWindowTaskOperator: what the extract and snapshot operators share."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE
from airflow_provider_sqlserver_cdc.lineage_inputs import report_source_inputs
from airflow_provider_sqlserver_cdc.metrics import WINDOW_SECONDS, timing
from airflow_provider_sqlserver_cdc.operators.failure_record import record_failure
from airflow_provider_sqlserver_cdc.parquet.window_writer import DEFAULT_MAX_FILE_BYTES
from airflow_provider_sqlserver_cdc.shared_storage import check_task_paths
from airflow_provider_sqlserver_cdc.source_task import SourceTaskOperator
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_WINDOW_MODE

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking
    from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow


class WindowTaskOperator(SourceTaskOperator):
    """
    Write one window per capture instance with a library function; return the windows' XCom.

    The base of CdcExtractOperator and CdcSnapshotOperator: the arguments below are theirs too.

    :param capture_instance: a capture instance name (or ``schema.table``), or a list of them.
    :param base_path: local directory or filesystem URI (``s3://…``, ``gs://…``, any fsspec URI)
        of the windows; a local directory only with LocalExecutor or under
        ``[sqlserver_cdc] shared_local_paths`` (checked when the task runs).
    :param sqlserver_cdc_conn_id: Airflow connection of the source.
    :param database: source database; defaults to the connection's schema.
    :param server_time_zone: IANA zone of the server when it observes daylight-saving time.
    :param batch_size: rows per Arrow batch; bounds memory.
    :param max_file_bytes: roll to a new Parquet file at this size.
    :param require_key_columns: fail when an instance has no key columns (the merge needs them).
    :param column_masking: ``{"schema.table.column": "hash" | "mask" | "mask(text)" | "truncate(n)" |
        "drop"}``, applied before Parquet is written (docs/column-masking.md).
    :param masking_salt_conn_id: the Airflow connection (or secrets-backend connection) whose password
        is the salt of ``hash``; read when the task runs, never logged or passed on.
    """

    def __init__(
        self,
        *,
        capture_instance: str | list[str],
        base_path: str,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        require_key_columns: bool = True,
        column_masking: Mapping[str, str] | None = None,
        masking_salt_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if batch_size <= 0:
            raise ValueError(f"{self.task_id}: batch_size must be positive, got {batch_size}")
        self.capture_instance = capture_instance
        self.base_path = base_path
        self.batch_size = batch_size
        self.max_file_bytes = max_file_bytes
        self.require_key_columns = require_key_columns
        self.column_masking = dict(column_masking or {})
        self.masking_salt_conn_id = masking_salt_conn_id

    #: Leave a failure record (``failure_record``) when the task fails, for the pipeline's run outcome.
    records_failures: ClassVar[bool] = False

    def write_windows(
        self, context: Context, write: Callable[..., list[ChangeWindow]], **options: Any
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """
        Call ``write`` with the source hook and the task's common arguments; return the windows' XCom.

        :param context: the task's context.
        :param write: ``extract_windows`` or ``snapshot_windows``.
        :param options: the operator's own arguments of ``write`` (the common ones, ``batch_size`` and
            ``max_file_bytes`` included, are passed here).
        :return: ``ChangeWindow.to_xcom()`` of the window, or the list of them when
            ``capture_instance`` is a list.
        :raises LocalPathError: ``base_path`` is local and the task's executor is distributed.
        """
        try:
            return self._write_windows(context, write, **options)
        except Exception as err:
            if self.records_failures:
                record_failure(context, self.capture_instance, err)
            raise

    def _write_windows(
        self, context: Context, write: Callable[..., list[ChangeWindow]], **options: Any
    ) -> dict[str, Any] | list[dict[str, Any]]:
        check_task_paths({f"base_path of {self.task_id}": self.base_path}, getattr(self, "executor", None))
        if self.column_masking:
            options["masking"] = self.masking_rules()
        started = time.monotonic()
        with self.source_hook() as hook:
            windows = write(
                hook,
                capture_instance_names(self.capture_instance),
                conn_id=self.sqlserver_cdc_conn_id,
                base_uri=self.base_path,
                require_keys=self.require_key_columns,
                dag_id=getattr(self, "dag_id", None),
                run_id=getattr(context.get("dag_run"), "run_id", None),
                log=getattr(self, "log", None),
                batch_size=self.batch_size,
                max_file_bytes=self.max_file_bytes,
                **options,
            )
            report_source_inputs(hook, windows)  # the mssql:// source tables, known now (lineage_inputs.py)
        self.written_windows = windows
        for window in windows:  # the task's time, per window it wrote (metrics.py)
            timing(WINDOW_SECONDS, window.capture_instance, time.monotonic() - started)
        values = [w.to_xcom() for w in windows]
        return values[0] if isinstance(self.capture_instance, str) and len(values) == 1 else values

    def masking_rules(self) -> ColumnMasking:
        """The column masking rules with the salt read from ``masking_salt_conn_id`` (secrets backends included)."""
        from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking

        salt = None
        if self.masking_salt_conn_id:
            from airflow.sdk import BaseHook

            salt = BaseHook.get_connection(self.masking_salt_conn_id).password or None
        return ColumnMasking(self.column_masking, salt=salt)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The OpenLineage of the windows written: source tables in, windows out (lineage.py).

        Called by the OpenLineage provider only; the import needs it.
        """
        from airflow_provider_sqlserver_cdc.lineage import window_task_lineage

        return window_task_lineage(getattr(self, "written_windows", []))


class ChangeWindowTaskOperator(WindowTaskOperator):
    """
    The base of CdcExtractOperator and ChangeTrackingExtractOperator: a run's change windows, by interval or watermark.

    Takes the arguments of :class:`WindowTaskOperator` and:

    :param window_mode: ``interval`` (the run's data interval) or ``watermark`` (after the stored position).
    """

    template_fields: Sequence[str] = (
        "capture_instance",
        "base_path",
        "sqlserver_cdc_conn_id",
        "database",
        "window_mode",
    )
    ui_color = "#cfe2f3"

    def __init__(self, *, window_mode: str = DEFAULT_WINDOW_MODE, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window_mode = window_mode

    def write_change_windows(
        self, context: Context, write: Callable[..., list[ChangeWindow]], **options: Any
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """:meth:`write_windows` with the window mode and the run's data interval."""
        return self.write_windows(
            context,
            write,
            window_mode=self.window_mode,
            data_interval_start=context.get("data_interval_start"),
            data_interval_end=context.get("data_interval_end"),
            **options,
        )
