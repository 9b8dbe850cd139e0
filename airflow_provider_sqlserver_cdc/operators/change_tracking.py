"""Operators of the Change Tracking source: load plan, snapshot and version-window extraction.

They take the arguments of their CDC counterparts and push XComs of the same shape, so
CdcSparkMergeOperator and WatermarkCommitOperator take their windows unchanged. Tables are named
``schema.table``; windows, watermarks and targets use ``schema_table``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.hooks.change_tracking_source import ChangeTrackingSourceMixin
from airflow_provider_sqlserver_cdc.operators.source_reads import LoadPlanOperator
from airflow_provider_sqlserver_cdc.operators.window_task import ChangeWindowTaskOperator, WindowTaskOperator
from airflow_provider_sqlserver_cdc.snapshot.load_plan import EXTRACT, SNAPSHOT

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


class ChangeTrackingExtractOperator(ChangeTrackingSourceMixin, ChangeWindowTaskOperator):
    """
    Extract each tracked table's version window ``(last, stop]`` into Parquet plus manifest.

    Takes the arguments of :class:`ChangeWindowTaskOperator` (``capture_instance`` names the tables as
    ``schema.table``); ``window_mode`` ``interval`` takes the data interval's versions through
    ``sys.dm_tran_commit_table`` when readable, else watermark-based, as the log says.
    """

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        from airflow_provider_sqlserver_cdc.extraction.version_windows import extract_version_windows

        return self.write_change_windows(context, extract_version_windows)


class ChangeTrackingLoadPlanOperator(ChangeTrackingSourceMixin, LoadPlanOperator):
    """
    Decide per tracked table whether this run snapshots it or extracts its next version window.

    Snapshot when no watermark is stored or a re-snapshot is requested (``dag_run.conf =
    {"resnapshot": ["dbo_orders"]}`` or the ``resnapshot`` argument). When
    ``CHANGE_TRACKING_MIN_VALID_VERSION`` is above the watermark (retention passed, table truncated,
    tracking re-enabled) the task fails naming the table and the remedy, unless
    ``auto_resnapshot`` is on: then the table is snapshotted again. Pushes the XCom keys
    ``snapshot`` and ``extract`` (lists of ``schema.table``) as CdcLoadPlanOperator does.

    Takes the arguments of :class:`LoadPlanOperator` (source connection, database, ``resnapshot``) and:

    :param tables: the tracked tables, ``schema.table``.
    :param auto_resnapshot: snapshot a table again when its changes after the watermark were cleaned up.
    """

    template_fields: Sequence[str] = ("tables", *LoadPlanOperator.template_fields)

    def __init__(self, *, tables: list[str], auto_resnapshot: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tables = tables
        self.auto_resnapshot = auto_resnapshot

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from airflow_provider_sqlserver_cdc.hooks.change_tracking import lsn_version, retention_error
        from airflow_provider_sqlserver_cdc.state import read_watermark
        from airflow_provider_sqlserver_cdc.window.change_window import watermark_key

        requested = self.requested_resnapshots(context)
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
        self.push_plan(context, split)
        return decisions
