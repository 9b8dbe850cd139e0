"""The capture job: a background thread per database that scans the log like SQL Server Agent's job.

With ``continuous = 1`` the job runs up to ``maxscans`` scan cycles of up to ``maxtrans``
transactions each, then waits ``pollinginterval`` seconds, and repeats. ``sys.sp_cdc_stop_job``
stops the thread (SQL Server Agent being down: the change tables and the max LSN stop advancing
while the source keeps changing) and ``sys.sp_cdc_start_job`` starts it again. As in SQL Server,
settings changed with ``sys.sp_cdc_change_job`` take effect when the job is next started.
"""

from __future__ import annotations

import logging
import threading

from sqlserver_cdc_simulator.cdc.database_state import (
    CaptureJobSettings,
    CdcDatabase,
)
from sqlserver_cdc_simulator.errors import SqlError

log = logging.getLogger(__name__)


class CaptureJob:
    """
    The running capture job of one database.

    :param state: the database's CDC state.
    """

    def __init__(self, state: CdcDatabase) -> None:
        self.state = state
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._settings = CaptureJobSettings()

    @property
    def running(self) -> bool:
        """Whether the job's thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the job with the settings currently in ``msdb.dbo.cdc_jobs``."""
        if self.running:
            return
        settings = self.state.capture_job or CaptureJobSettings()
        self._settings = CaptureJobSettings(
            job_id=settings.job_id,
            maxtrans=settings.maxtrans,
            maxscans=settings.maxscans,
            continuous=settings.continuous,
            pollinginterval=settings.pollinginterval,
        )
        self._stop.clear()
        self.state.capture_running = True
        name = f"cdc.{self.state.database.name}_capture"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0, *, disable: bool = False) -> None:
        """
        Stop the job and wait for its current scan to finish.

        :param disable: also record that the job is stopped (``sp_cdc_stop_job``), so it does not start
            again after a restart of the simulator.
        """
        if disable:
            self.state.capture_running = False
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        settings = self._settings
        while not self._stop.is_set():
            if not self.state.database_exists():
                return  # the database was dropped: its capture job goes with it
            try:
                for _ in range(max(1, settings.maxscans)):
                    if self._stop.is_set():
                        return
                    session = self.state.scan(max_transactions=settings.maxtrans)
                    if session.tran_count < settings.maxtrans:
                        break
            except SqlError as error:  # recorded in sys.dm_cdc_errors; the next cycle retries
                log.warning("CDC capture scan failed for database %s: %s", self.state.database.name, error)
            except Exception:  # the job must survive a failed scan, as Agent retries the job
                log.exception("CDC capture scan failed for database %s", self.state.database.name)
            if not settings.continuous:
                return
            self._stop.wait(max(settings.pollinginterval, 0.05))
