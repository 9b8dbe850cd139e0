"""How far the capture job (SQL Server Agent) has got, and whether it seems to run."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc import tsql

if TYPE_CHECKING:
    import pyodbc

    from airflow_provider_sqlserver_cdc.lsn import Lsn


@dataclass(frozen=True)
class CaptureJobStatus:
    """
    How far the capture job (SQL Server Agent) has got.

    :param configured: whether ``msdb.dbo.cdc_jobs`` lists a capture job for the database.
    :param polling_interval_s: the job's polling interval in seconds.
    :param server_now: the server's local clock.
    :param max_lsn: ``sys.fn_cdc_get_max_lsn()``.
    :param max_lsn_time: the local commit time mapped to the max LSN.
    :param last_scan_end: the end of the latest log scan session (server local), when readable.
    :param last_error: the error the latest log scan session failed with (``sys.dm_cdc_errors``), if any.
    """

    configured: bool | None
    polling_interval_s: int | None
    server_now: datetime
    max_lsn: Lsn
    max_lsn_time: datetime | None
    last_scan_end: datetime | None = None
    last_error: str | None = None

    @property
    def lag(self) -> timedelta | None:
        """How far the max LSN's commit time is behind the server clock."""
        return None if self.max_lsn_time is None else self.server_now - self.max_lsn_time

    @property
    def seems_running(self) -> bool:
        """Whether the capture job appears to be running (it keeps the max LSN's time close to now)."""
        if self.configured is False:
            return False
        limit = timedelta(seconds=max(60, 10 * (self.polling_interval_s or 5)))
        if self.last_scan_end is not None and self.server_now - self.last_scan_end <= limit:
            return True
        return self.lag is not None and self.lag <= limit

    def describe(self) -> str:
        """One human sentence for logs and error messages."""
        parts = []
        if self.configured is False:
            parts.append("no capture job is configured in msdb.dbo.cdc_jobs for this database")
        elif self.last_error is not None:
            parts.append(
                f"the capture job is FAILING: its latest log scan stopped with {self.last_error} "
                "(sys.dm_cdc_errors), and nothing from that transaction on is captured. After a column "
                "change the change table cannot take (an ALTER COLUMN narrower than values it already "
                "holds: errors 2628 and 8115), SQL Server's way out is to consume the change data, then "
                "disable and re-enable CDC on the table (sys.sp_cdc_disable_table, sys.sp_cdc_enable_table) "
                "and re-snapshot the target (docs/schema-changes.md)"
            )
        elif self.seems_running:
            parts.append("the capture job appears to be running")
        else:
            parts.append(
                "the capture job appears to be STOPPED (SQL Server Agent down or sys.sp_cdc_stop_job); "
                "start it with EXEC sys.sp_cdc_start_job"
            )
        if self.max_lsn_time is not None:
            parts.append(
                f"max LSN {self.max_lsn.hex} maps to {self.max_lsn_time.isoformat(sep=' ')} server time, "
                f"{self.lag.total_seconds():.0f} s behind the server clock ({self.server_now.isoformat(sep=' ')})"
            )
        else:
            parts.append(f"max LSN {self.max_lsn.hex} has no mapped time yet")
        if self.last_scan_end is not None:
            parts.append(f"last log scan ended {self.last_scan_end.isoformat(sep=' ')}")
        return "; ".join(parts)


def read_capture_job(
    conn: pyodbc.Connection, log: logging.Logger
) -> tuple[bool | None, int | None, datetime | None]:
    """
    Read whether a capture job is configured, its polling interval and the end of the last log scan.

    Each is None when this login may not read it (``msdb.dbo.cdc_jobs``, ``sys.dm_cdc_log_scan_sessions``).

    :param conn: a pyodbc connection to the database.
    :param log: where unreadable sources are noted (debug).
    """
    import pyodbc

    configured: bool | None = None
    polling: int | None = None
    last_scan: datetime | None = None
    cursor = conn.cursor()
    try:
        try:
            rows = cursor.execute(tsql.CAPTURE_JOB).fetchall()
            capture = [r for r in rows if str(r[0]).lower() == "capture"]
            configured = bool(capture)
            polling = int(capture[0][1]) if capture and capture[0][1] is not None else None
        except pyodbc.Error:
            log.debug("msdb.dbo.cdc_jobs is not readable with this login")
        try:
            row = cursor.execute(tsql.LAST_LOG_SCAN).fetchone()
            last_scan = row[1] if row else None
        except pyodbc.Error:
            log.debug("sys.dm_cdc_log_scan_sessions is not readable with this login")
    finally:
        cursor.close()
    return configured, polling, last_scan


def read_last_scan_error(conn: pyodbc.Connection, log: logging.Logger) -> str | None:
    """
    Return the error the latest log scan session failed with, in words, or None (none, or not readable).

    :param conn: a pyodbc connection to the database.
    :param log: where an unreadable ``sys.dm_cdc_errors`` is noted (debug).
    """
    import pyodbc

    cursor = conn.cursor()
    try:
        row = cursor.execute(tsql.LAST_SCAN_ERROR).fetchone()
    except pyodbc.Error:
        log.debug("sys.dm_cdc_errors is not readable with this login")
        return None
    finally:
        cursor.close()
    if row is None:
        return None
    number, message, start_lsn = row
    return f"error {number} at the transaction of LSN {start_lsn} ({message})"
