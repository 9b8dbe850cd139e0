"""CaptureJobStatus: whether the capture job seems to run, in one sentence."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow_provider_sqlserver_cdc.hooks.capture_job import CaptureJobStatus
from airflow_provider_sqlserver_cdc.lsn import Lsn


def test_capture_job_status_describes_a_stopped_job():
    now = datetime(2026, 3, 1, 12, 0)
    stopped = CaptureJobStatus(
        True, 5, now, Lsn.from_hex("0x0000002A000001F00003"), now - timedelta(minutes=10)
    )
    assert not stopped.seems_running
    assert "STOPPED" in stopped.describe() and "600 s behind" in stopped.describe()
    running = CaptureJobStatus(True, 5, now, Lsn.zero(), now - timedelta(seconds=3))
    assert running.seems_running and "appears to be running" in running.describe()
    missing = CaptureJobStatus(False, None, now, Lsn.zero(), None)
    assert "no capture job is configured" in missing.describe()


def test_a_recent_log_scan_means_running_even_when_the_max_lsn_is_old():
    now = datetime(2026, 3, 1, 12, 0)
    idle = CaptureJobStatus(True, 5, now, Lsn.zero(), now - timedelta(hours=2), now - timedelta(seconds=4))
    assert idle.seems_running
    assert "last log scan ended 2026-03-01 11:59:56" in idle.describe()
