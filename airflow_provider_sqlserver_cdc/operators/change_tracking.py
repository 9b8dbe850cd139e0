"""Operators of the Change Tracking source: load plan, snapshot and version-window extraction.

They take the arguments of their CDC counterparts and push XComs of the same shape, so
CdcSparkMergeOperator and WatermarkCommitOperator take their windows unchanged. Tables are named
``schema.table``; windows, watermarks and targets use ``schema_table``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_sqlserver_cdc.hooks.change_tracking_source import ChangeTrackingSourceMixin
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.operators.window_task import WindowTaskOperator
from airflow_provider_sqlserver_cdc.snapshot.load_plan import EXTRACT, SNAPSHOT, resnapshot_requests
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_WINDOW_MODE

if TYPE_CHECKING:
    from airflow.sdk import Context


class ChangeTrackingSnapshotOperator(ChangeTrackingSourceMixin, WindowTaskOperator):
    """
    Copy tracked tables, each as of the change tracking version read in the same SNAPSHOT transaction.

    The window has the snapshot layout of CdcSnapshotOperator's (every row an insert at the
    version, encoded as an LSN position). Takes the arguments of :class:`WindowTaskOperator`
    (``capture_instance`` names the tables as ``schema.table``).
    """

    template_fields: Sequence[str] = ("capture_instance", "base_path", "sqlserver_cdc_conn_id", "database")
    ui_color = "#fce5cd"

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        from airflow_provider_sqlserver_cdc.snapshot.version_copy import snapshot_tracked_tables

        return self.write_windows(context, snapshot_tracked_tables)


class ChangeTrackingExtractOperator(ChangeTrackingSourceMixin, WindowTaskOperator):
    """
    Extract each tracked table's version window ``(last, stop]`` into Parquet plus manifest.

    Takes the arguments of :class:`WindowTaskOperator` (``capture_instance`` names the tables as
    ``schema.table``) and:

    :param window_mode: ``interval`` (the data interval's versions through ``sys.dm_tran_commit_table``
        when readable, else watermark-based, as the log says) or ``watermark`` (after the stored version).
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

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        from airflow_provider_sqlserver_cdc.extraction.version_windows import extract_version_windows

        return self.write_windows(
            context,
            extract_version_windows,
            window_mode=self.window_mode,
            data_interval_start=context.get("data_interval_start"),
            data_interval_end=context.get("data_interval_end"),
        )


class ChangeTrackingLoadPlanOperator(ChangeTrackingSourceMixin, BaseOperator):
    """
    Decide per tracked table whether this run snapshots it or extracts its next version window.

    Snapshot when no watermark is stored or a re-snapshot is requested (``dag_run.conf =
    {"resnapshot": ["dbo_orders"]}`` or the ``resnapshot`` argument). When
    ``CHANGE_TRACKING_MIN_VALID_VERSION`` is above the watermark (retention passed, table truncated,
    tracking re-enabled) the task fails naming the table and the remedy, unless
    ``auto_resnapshot`` is on: then the table is snapshotted again. Pushes the XCom keys
    ``snapshot`` and ``extract`` (lists of ``schema.table``) as CdcLoadPlanOperator does.

    :param tables: the tracked tables, ``schema.table``.
    :param sqlserver_cdc_conn_id: Airflow connection (type ``mssql``) of the source.
    :param database: source database; defaults to the connection's schema.
    :param resnapshot: tables to snapshot again in every run of this task (templated).
    :param auto_resnapshot: snapshot a table again when its changes after the watermark were cleaned up.
    """

    template_fields: Sequence[str] = ("tables", "sqlserver_cdc_conn_id", "database", "resnapshot")
    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        tables: list[str],
        sqlserver_cdc_conn_id: str = SqlServerCdcHook.default_conn_name,
        database: str | None = None,
        resnapshot: list[str] | None = None,
        auto_resnapshot: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tables = tables
        self.sqlserver_cdc_conn_id = sqlserver_cdc_conn_id
        self.database = database
        self.resnapshot = resnapshot or []
        self.auto_resnapshot = auto_resnapshot

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from airflow_provider_sqlserver_cdc.hooks.change_tracking import lsn_version, retention_error
        from airflow_provider_sqlserver_cdc.state import read_watermark
        from airflow_provider_sqlserver_cdc.window.change_window import watermark_key

        requested = set(self.resnapshot) | resnapshot_requests(getattr(context.get("dag_run"), "conf", None))
        decisions = []
        split: dict[str, list[str]] = {SNAPSHOT: [], EXTRACT: []}
        with self.source_hook() as hook:
            database = hook.source_database()
            for name in self.tables:
                table = hook.get_tracked_table(name)
                mark = read_watermark(watermark_key(self.sqlserver_cdc_conn_id, database, table.name))
                if mark is None:
                    action, reason = SNAPSHOT, "no watermark is stored: the table has not been loaded yet"
                elif name in requested or table.name in requested:
                    action, reason = SNAPSHOT, "a re-snapshot was requested"
                else:
                    last = lsn_version(mark.position)
                    min_valid = hook.min_valid_version(table)
                    if min_valid is not None and last < min_valid:
                        error = retention_error(table, database, last, min_valid)
                        if not self.auto_resnapshot:
                            raise error
                        self.log.warning("%s; auto_resnapshot is on: snapshotting it again", error)
                        action, reason = SNAPSHOT, f"retention gap: min valid version {min_valid} > {last}"
                    else:
                        action, reason = EXTRACT, f"continue after version {last}"
                self.log.info("%s: %s (%s)", name, action, reason)
                split[action].append(name)
                decisions.append(
                    {"table": name, "capture_instance": table.name, "action": action, "reason": reason}
                )
        ti = context["ti"]
        ti.xcom_push(key=SNAPSHOT, value=split[SNAPSHOT])
        ti.xcom_push(key=EXTRACT, value=split[EXTRACT])
        return decisions
