"""
Time to loss: how long until SQL Server's CDC cleanup job passes what the target has applied.

The cleanup job (``sys.sp_MScdc_cleanup_job``) subtracts its retention (minutes, ``msdb.dbo.cdc_jobs``)
from the largest ``tran_end_time`` of ``cdc.lsn_time_mapping``, moves each capture instance's
low-water mark to the first LSN committed at or after that time, and deletes the changes below
it. That largest commit time never runs ahead of the server clock, so an LSN committed at ``t``
stays at or above the low-water mark at least until the server clock passes ``t + retention``.
When the job runs on its schedule (daily by default) that happens later, never sooner.

Two moments follow for a capture instance whose target is complete up to its watermark's
applied-through LSN (committed at ``a``), whose oldest change not applied yet was committed at ``u``:

- from ``a + retention`` on, a cleanup may move the low-water mark past the watermark: the next
  window's start is below it, which the pipeline cannot tell from lost changes (a retention gap:
  the plan re-snapshots the table, ``window.planning.clamp_to_instance``);
- from ``u + retention`` on, it may delete that change itself.

``a <= u``, so the headroom is measured to the first: ``a + retention - now``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.errors import SqlServerCdcError
from airflow_provider_sqlserver_cdc.lsn import Lsn

if TYPE_CHECKING:
    import pyodbc

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.window.planning import ServerTimeZone

OK = "ok"
WARNING = "warning"
CRITICAL = "critical"
LOST = "lost"
NO_WATERMARK = "no_watermark"

CHANGE_TRACKING_REMEDY = (
    "apply the backlog now, or raise the database's CHANGE_RETENTION: ALTER DATABASE [<db>] SET "
    "CHANGE_TRACKING (CHANGE_RETENTION = <n> DAYS) (docs/operations.md, 'Time to loss')"
)
RETENTION_UNIT_MINUTES = {"MINUTES": 1, "HOURS": 60, "DAYS": 1440}

REMEDY = (
    "apply the backlog now (trigger the replication DAG, or fix what keeps its runs from succeeding), "
    "or give the cleanup job a longer retention: EXEC sys.sp_cdc_change_job @job_type = N'cleanup', "
    "@retention = <minutes> (docs/operations.md, 'Time to loss')"
)


@dataclass(frozen=True)
class RetentionHeadroom:
    """
    One capture instance's time to loss.

    :param capture_instance: the capture instance read (the one that answers for the stream now).
    :param stream: the name the watermark is kept under (the capture instance, or the table's stream).
    :param retention_minutes: the cleanup job's retention.
    :param applied_through: the watermark's applied-through LSN; None: no watermark (the plan snapshots).
    :param min_lsn: the instance's low-water mark (``sys.fn_cdc_get_min_lsn``).
    :param oldest_unapplied_lsn: the first change after ``applied_through``; None when there is none.
    :param oldest_unapplied_time: its commit time, UTC.
    :param server_now: the server's clock, UTC.
    :param applied_through_time: the commit time (UTC) ``applied_through`` maps to: the target is
        complete up to it.
    :param lost: the cleanup's low-water mark is past the first LSN after ``applied_through``.
    :param position_kind: ``lsn`` (CDC) or ``version`` (Change Tracking: the LSNs encode versions,
        ``hooks.change_tracking.version_lsn``; the "low-water mark" is the min valid version).
    """

    capture_instance: str
    stream: str
    retention_minutes: int
    applied_through: Lsn | None
    min_lsn: Lsn
    oldest_unapplied_lsn: Lsn | None
    oldest_unapplied_time: datetime | None
    server_now: datetime
    applied_through_time: datetime | None = None
    lost: bool = False
    position_kind: str = "lsn"

    @property
    def lag_seconds(self) -> float | None:
        """Server clock minus the commit time the target is complete up to (None without a watermark)."""
        if self.applied_through_time is None:
            return None
        return max(0.0, (self.server_now - self.applied_through_time).total_seconds())

    @property
    def backlog_age_seconds(self) -> float | None:
        """Age of the oldest change not applied yet (0 when none; None without a watermark)."""
        if self.applied_through is None:
            return None
        if self.oldest_unapplied_time is None:
            return 0.0
        return max(0.0, (self.server_now - self.oldest_unapplied_time).total_seconds())

    @property
    def gap_time(self) -> datetime | None:
        """The earliest time (UTC) a cleanup may move the low-water mark past the watermark; None without one."""
        if self.applied_through is None:
            return None
        start = self.applied_through_time or self.oldest_unapplied_time or self.server_now
        return start + timedelta(minutes=self.retention_minutes)

    @property
    def deletion_time(self) -> datetime | None:
        """The earliest time (UTC) a cleanup may delete the oldest unapplied change; None when there is none."""
        if self.oldest_unapplied_time is None:
            return None
        return self.oldest_unapplied_time + timedelta(minutes=self.retention_minutes)

    @property
    def minutes_left(self) -> float | None:
        """Minutes until :attr:`gap_time` (0 once passed); None without a watermark."""
        if self.applied_through is None:
            return None
        if self.lost:
            return 0.0
        assert self.gap_time is not None
        return max(0.0, (self.gap_time - self.server_now).total_seconds() / 60)

    def status(self, *, warning_minutes: float, critical_minutes: float) -> str:
        """``ok``, ``warning``, ``critical``, ``lost`` or ``no_watermark``."""
        if self.applied_through is None:
            return NO_WATERMARK
        if self.lost:
            return LOST
        left = self.minutes_left or 0.0
        if left < critical_minutes:
            return CRITICAL
        if left < warning_minutes:
            return WARNING
        return OK

    def describe(self) -> str:
        """One sentence for logs and errors: the instance, the minutes left and why."""
        if self.applied_through is None:
            return f"{self.stream}: no watermark yet (the plan snapshots it), nothing to lose"
        name = (
            self.stream
            if self.stream == self.capture_instance
            else f"{self.stream} ({self.capture_instance})"
        )
        if self.position_kind == "version":
            return self._describe_version(name)
        if self.lost:
            return (
                f"{name}: the CDC cleanup already moved the low-water mark to {self.min_lsn.hex}, past the "
                f"applied-through LSN {self.applied_through.hex}: changes after it may be deleted, and the next "
                "run finds a retention gap and re-snapshots the table (docs/operations.md, 'Time to loss')"
            )
        head = (
            f"{name}: {self.minutes_left:.0f} minutes left before the CDC cleanup (retention "
            f"{self.retention_minutes} min) may pass the applied-through LSN {self.applied_through.hex} "
            f"(committed {_text(self.applied_through_time)}; server clock {_text(self.server_now)})"
        )
        if self.oldest_unapplied_lsn is None:
            return f"{head}; every captured change is applied"
        return (
            f"{head}; the oldest unapplied change, LSN {self.oldest_unapplied_lsn.hex} committed "
            f"{_text(self.oldest_unapplied_time)}, may be deleted from {_text(self.deletion_time)}"
        )

    def _describe_version(self, name: str) -> str:
        from airflow_provider_sqlserver_cdc.hooks.change_tracking import lsn_version

        assert self.applied_through is not None
        applied = lsn_version(self.applied_through)
        if self.lost:
            return (
                f"{name}: CHANGE_TRACKING_MIN_VALID_VERSION is {lsn_version(self.min_lsn)}, above the synchronized "
                f"version {applied}: the Change Tracking cleanup removed changes after it; re-snapshot the table "
                "(docs/change-tracking.md)"
            )
        head = (
            f"{name}: {self.minutes_left:.0f} minutes left before the Change Tracking cleanup (CHANGE_RETENTION "
            f"{self.retention_minutes} min) may pass the synchronized version {applied}"
        )
        if self.oldest_unapplied_time is None:
            return f"{head}; no version committed after it"
        return f"{head}, whose next version committed {_text(self.oldest_unapplied_time)}"

    def to_dict(self, *, warning_minutes: float, critical_minutes: float) -> dict[str, Any]:
        """A JSON-serialisable summary (XCom, metrics)."""
        return {
            "capture_instance": self.capture_instance,
            "stream": self.stream,
            "status": self.status(warning_minutes=warning_minutes, critical_minutes=critical_minutes),
            "minutes_left": None if self.minutes_left is None else round(self.minutes_left, 1),
            "retention_minutes": self.retention_minutes,
            "applied_through": self.applied_through.hex if self.applied_through else None,
            "oldest_unapplied_lsn": self.oldest_unapplied_lsn.hex if self.oldest_unapplied_lsn else None,
            "oldest_unapplied_time": _text(self.oldest_unapplied_time),
            "gap_time": _text(self.gap_time),
            "deletion_time": _text(self.deletion_time),
            "lag_seconds": self.lag_seconds,
            "backlog_age_seconds": self.backlog_age_seconds,
        }


def _text(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def read_cleanup_retention(conn: pyodbc.Connection, log: logging.Logger) -> int | None:
    """
    Return the cleanup job's retention in minutes, or None when no cleanup job is readable.

    Reads ``msdb.dbo.cdc_jobs`` (SELECT on msdb), else ``sys.sp_cdc_help_jobs`` (db_owner).

    :param conn: a pyodbc connection to the CDC-enabled database.
    :param log: where unreadable sources are noted (debug).
    """
    import pyodbc

    cursor = conn.cursor()
    try:
        try:
            row = cursor.execute(tsql.CLEANUP_RETENTION).fetchone()
            if row is not None and row[0] is not None:
                return int(row[0])
        except pyodbc.Error:
            log.debug("msdb.dbo.cdc_jobs is not readable with this login; trying sys.sp_cdc_help_jobs")
        try:
            cursor.execute(tsql.HELP_JOBS)
            names = [d[0].lower() for d in cursor.description or ()]
            for row in cursor.fetchall():
                job = dict(zip(names, row, strict=False))
                if str(job.get("job_type", "")).lower() == "cleanup" and job.get("retention") is not None:
                    return int(job["retention"])
        except pyodbc.Error:
            log.debug("sys.sp_cdc_help_jobs is not readable with this login")
    finally:
        cursor.close()
    return None


def read_retention_headroom(
    hook: SqlServerCdcHook,
    capture_instance: str,
    applied_through: Lsn | None,
    *,
    retention_minutes: int,
    time_zone: ServerTimeZone,
    server_now: datetime,
    max_lsn: Lsn,
    stream: str | None = None,
) -> RetentionHeadroom:
    """
    Read one capture instance's time to loss.

    :param hook: the source hook.
    :param capture_instance: the capture instance whose change table holds the changes.
    :param applied_through: the watermark's applied-through LSN (None: no watermark).
    :param retention_minutes: the cleanup job's retention (:func:`read_cleanup_retention`).
    :param time_zone: the server's time zone (commit times are server-local).
    :param server_now: the server's clock, aware.
    :param max_lsn: ``sys.fn_cdc_get_max_lsn()``.
    :param stream: the watermark's name for it, when not the capture instance's.
    """
    min_lsn = hook.get_min_lsn(capture_instance)
    oldest: Lsn | None = None
    oldest_time: datetime | None = None
    lost = False
    through_time: datetime | None = None
    if applied_through is not None and not applied_through.is_zero:
        local = hook.map_lsn_to_time(applied_through)
        through_time = time_zone.to_utc(local) if local is not None else None
    if applied_through is not None and applied_through < max_lsn:
        start = hook.increment_lsn(applied_through)
        if not min_lsn.is_zero and start < min_lsn:
            lost, start = True, min_lsn
        oldest = hook.first_change_lsn(capture_instance, start, max_lsn)
        if oldest is not None:
            local = hook.map_lsn_to_time(oldest)
            oldest_time = time_zone.to_utc(local) if local is not None else None
    return RetentionHeadroom(
        capture_instance=capture_instance,
        stream=stream or capture_instance,
        retention_minutes=retention_minutes,
        applied_through=applied_through,
        min_lsn=min_lsn,
        oldest_unapplied_lsn=oldest,
        oldest_unapplied_time=oldest_time,
        server_now=server_now.astimezone(UTC),
        applied_through_time=through_time,
        lost=lost,
    )


def read_headroom(
    hook: SqlServerCdcHook,
    applied: dict[str, tuple[str, Lsn | None]],
    *,
    retention_minutes: int | None = None,
    log: logging.Logger,
) -> list[RetentionHeadroom]:
    """
    Read the time to loss of several streams at one server clock reading.

    :param hook: the source hook.
    :param applied: stream -> (the capture instance answering for it now, its applied-through LSN or None).
    :param retention_minutes: the cleanup job's retention when this login cannot read it (it is read
        from ``msdb.dbo.cdc_jobs`` / ``sys.sp_cdc_help_jobs`` first).
    :param log: where unreadable sources are noted.
    :raises SqlServerCdcError: no retention is readable and none was given.
    """
    retention = read_cleanup_retention(hook.get_conn(), log)
    if retention is None:
        if retention_minutes is None:
            raise SqlServerCdcError(
                f"cannot read the CDC cleanup job's retention on {hook.server}, database {hook.database}: "
                "msdb.dbo.cdc_jobs has no cleanup row for it or this login may not read it (GRANT SELECT ON "
                "msdb.dbo.cdc_jobs, or db_owner for sys.sp_cdc_help_jobs). Grant one, or set the retention "
                "in minutes (retention_headroom.retention_minutes)"
            )
        retention = retention_minutes
    zone = hook.get_server_time_zone()
    now = hook.get_server_now()
    max_lsn = hook.get_max_lsn()
    return [
        read_retention_headroom(
            hook,
            instance,
            through,
            retention_minutes=retention,
            time_zone=zone,
            server_now=now,
            max_lsn=max_lsn,
            stream=stream,
        )
        for stream, (instance, through) in applied.items()
    ]


def read_change_tracking_headroom(
    hook: ChangeTrackingHook,
    applied: dict[str, tuple[CaptureInstance, int | None]],
) -> list[RetentionHeadroom]:
    """
    Read the time to loss of Change Tracking tables.

    The automatic cleanup removes change information committed before ``now - CHANGE_RETENTION``;
    a table's ``CHANGE_TRACKING_MIN_VALID_VERSION`` then rises past its synchronized version ``s``
    once the first version after ``s`` (database-wide: ``sys.dm_tran_commit_table``, VIEW SERVER
    STATE) is that old. Its ``commit_time`` is a smalldatetime (nearest minute): taken a minute early.
    Versions are carried as LSNs (``version_lsn``) with ``position_kind="version"``.

    :param hook: a ChangeTrackingHook of the database.
    :param applied: stream -> (the tracked table, its synchronized version or None).
    """
    from airflow_provider_sqlserver_cdc.hooks.change_tracking import version_lsn

    rows = hook.query(tsql.CT_DATABASE_RETENTION, doing="reading the database's CHANGE_RETENTION")
    value, units = rows[0] if rows else (None, None)
    if value is None or str(units).upper() not in RETENTION_UNIT_MINUTES:
        raise SqlServerCdcError(
            f"cannot read CHANGE_RETENTION of database {hook.database} on {hook.server} "
            f"(sys.change_tracking_databases gave {rows!r}): is change tracking on for the database?"
        )
    retention = int(value) * RETENTION_UNIT_MINUTES[str(units).upper()]
    now = hook.get_server_now().astimezone(UTC)
    reports = []
    for stream, (table, version) in applied.items():
        min_valid = hook.min_valid_version(table) or 0
        next_commit: datetime | None = None
        if version is not None:
            found = hook.query_value(
                tsql.CT_FIRST_COMMIT_AFTER, version, doing=f"reading the commit after version {version}"
            )
            if isinstance(found, datetime):
                next_commit = found.replace(tzinfo=UTC) - timedelta(minutes=1)
        reports.append(
            RetentionHeadroom(
                capture_instance=table.name,
                stream=stream,
                retention_minutes=retention,
                applied_through=None if version is None else version_lsn(version),
                min_lsn=version_lsn(min_valid),
                oldest_unapplied_lsn=None if next_commit is None else version_lsn(int(version or 0) + 1),
                oldest_unapplied_time=next_commit,
                server_now=now,
                applied_through_time=next_commit or now,
                lost=version is not None and version < min_valid,
                position_kind="version",
            )
        )
    return reports
