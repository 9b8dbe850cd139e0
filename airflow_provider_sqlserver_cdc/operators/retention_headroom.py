"""CdcRetentionHeadroomOperator: warn, then fail, before the CDC cleanup deletes changes not yet replicated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names
from airflow_provider_sqlserver_cdc.errors import RetentionHeadroomError
from airflow_provider_sqlserver_cdc.extraction.instance_switch import resolve_streams
from airflow_provider_sqlserver_cdc.hooks.retention_headroom import (
    CHANGE_TRACKING_REMEDY,
    CRITICAL,
    LOST,
    REMEDY,
    WARNING,
    RetentionHeadroom,
    read_change_tracking_headroom,
    read_headroom,
)
from airflow_provider_sqlserver_cdc.metrics import emit_headroom
from airflow_provider_sqlserver_cdc.source_task import SourceTaskOperator
from airflow_provider_sqlserver_cdc.state import read_watermarks
from airflow_provider_sqlserver_cdc.task_defaults import (
    DEFAULT_HEADROOM_CRITICAL_MINUTES,
    DEFAULT_HEADROOM_WARNING_MINUTES,
)
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key

if TYPE_CHECKING:
    from airflow.sdk import Context


class CdcRetentionHeadroomOperator(SourceTaskOperator):
    """
    Check how long until SQL Server's CDC cleanup deletes each capture instance's oldest unapplied change.

    For each capture instance: the first change after its watermark (the LSN the target holds
    everything up to), its commit time plus the cleanup job's retention (``msdb.dbo.cdc_jobs``)
    is the earliest time the cleanup may delete it (``hooks.retention_headroom``). Logs every
    instance's minutes left; below ``warning_minutes`` logs a warning; below ``critical_minutes``,
    or when the cleanup already passed the watermark, fails naming the instances, the minutes
    left and the remedy. Emits the ``retention_headroom_minutes``, ``lag_seconds`` and
    ``backlog_age_seconds`` metrics (``metrics.py``). Reads only: run it in every replication run
    (the factory does) and on its own schedule, so a paused or broken pipeline still alerts.

    :param capture_instances: capture instance names (or ``schema.table``), as the replication lists them. (templated)
    :param sqlserver_cdc_conn_id: Airflow connection of the source (part of the watermark keys). (templated)
    :param database: source database; defaults to the connection's schema. (templated)
    :param server_time_zone: IANA zone of the server when it observes daylight-saving time.
    :param warning_minutes: log a warning below this many minutes left.
    :param critical_minutes: fail below this many minutes left.
    :param retention_minutes: the cleanup retention to assume when the login cannot read
        ``msdb.dbo.cdc_jobs`` or ``sys.sp_cdc_help_jobs``; None: fail naming the grant.
    :param change_tracking_tables: Change Tracking tables (``schema.table``) to check as well: their
        synchronized version against ``CHANGE_TRACKING_MIN_VALID_VERSION`` and the database's
        ``CHANGE_RETENTION`` (needs VIEW SERVER STATE for ``sys.dm_tran_commit_table``). (templated)
    """

    template_fields: Sequence[str] = (
        "capture_instances",
        "sqlserver_cdc_conn_id",
        "database",
        "change_tracking_tables",
    )
    ui_color = "#fce5cd"

    def __init__(
        self,
        *,
        capture_instances: Any,
        warning_minutes: float = DEFAULT_HEADROOM_WARNING_MINUTES,
        critical_minutes: float = DEFAULT_HEADROOM_CRITICAL_MINUTES,
        retention_minutes: int | None = None,
        change_tracking_tables: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not 0 <= critical_minutes <= warning_minutes:
            raise ValueError(
                f"{self.task_id}: need 0 <= critical_minutes <= warning_minutes, got {critical_minutes} "
                f"and {warning_minutes}"
            )
        self.capture_instances = capture_instances
        self.warning_minutes = warning_minutes
        self.critical_minutes = critical_minutes
        self.retention_minutes = retention_minutes
        self.change_tracking_tables = change_tracking_tables

    def execute(self, context: Context) -> list[dict[str, Any]]:
        names = capture_instance_names(self.capture_instances)
        reports: list[RetentionHeadroom] = []
        if names:
            with self.source_hook() as hook:
                database = hook.source_database()
                key = lambda stream: watermark_key(self.sqlserver_cdc_conn_id, database, stream)  # noqa: E731
                streams = resolve_streams(hook, names, key)
                marks = read_watermarks({stream: key(stream) for stream, _ in streams})
                applied = {
                    stream: (instance.name, marks[stream].position if marks[stream] else None)
                    for stream, instance in streams
                }
                reports += read_headroom(
                    hook, applied, retention_minutes=self.retention_minutes, log=self.log
                )
        if self.change_tracking_tables:
            reports += self._change_tracking_reports()
        return self.judge(reports)

    def _change_tracking_reports(self) -> list[RetentionHeadroom]:
        from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook, lsn_version

        hook = ChangeTrackingHook(
            self.sqlserver_cdc_conn_id, database=self.database, server_time_zone=self.server_time_zone
        )
        try:
            database = hook.source_database()
            tables = hook.get_tracked_tables(list(self.change_tracking_tables))
            marks = read_watermarks(
                {t.name: watermark_key(self.sqlserver_cdc_conn_id, database, t.name) for t in tables}
            )
            applied = {
                t.name: (t, lsn_version(marks[t.name].position) if marks[t.name] else None) for t in tables
            }
            return read_change_tracking_headroom(hook, applied)
        finally:
            hook.close()

    def judge(self, reports: Sequence[RetentionHeadroom]) -> list[dict[str, Any]]:
        """Log and emit each report; raise RetentionHeadroomError when one is critical or lost."""
        limits = {"warning_minutes": self.warning_minutes, "critical_minutes": self.critical_minutes}
        alarming = []
        for report in reports:
            status = report.status(**limits)
            emit_headroom(report)
            if status in (CRITICAL, LOST):
                self.log.error("retention headroom %s: %s", status.upper(), report.describe())
                alarming.append(report)
            elif status == WARNING:
                self.log.warning(
                    "retention headroom below %.0f minutes: %s. Remedy: %s",
                    self.warning_minutes,
                    report.describe(),
                    _remedy(report),
                )
            else:
                self.log.info("retention headroom: %s", report.describe())
        if alarming:
            raise RetentionHeadroomError(
                "\n".join(
                    [
                        f"{self.task_id}: {len(alarming)} capture instance(s) below the critical retention "
                        f"headroom of {self.critical_minutes:.0f} minutes:",
                        *(f"- {report.describe()}" for report in alarming),
                        *(f"Remedy: {remedy}" for remedy in dict.fromkeys(_remedy(r) for r in alarming)),
                    ]
                )
            )
        return [report.to_dict(**limits) for report in reports]


def _remedy(report: RetentionHeadroom) -> str:
    return CHANGE_TRACKING_REMEDY if report.position_kind == "version" else REMEDY
