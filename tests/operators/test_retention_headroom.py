"""CdcRetentionHeadroomOperator on the simulator: warn, then fail before the CDC cleanup deletes an unapplied change."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from airflow_provider_sqlserver_cdc.errors import RetentionHeadroomError
from airflow_provider_sqlserver_cdc.hooks.change_tracking import version_lsn
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.operators.retention_headroom import CdcRetentionHeadroomOperator
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase

ZONE = "Asia/Kolkata"  # UTC+05:30: commit times are server-local, the headroom is computed in UTC


def local(hour: int, minute: int) -> dt.datetime:
    return dt.datetime(2026, 3, 2, hour, minute)


@pytest.fixture
def shop(sqlserver_simulator, monkeypatch):
    """dbo.orders: the target holds everything up to 10:01 (the watermark), not the change of 10:02; retention 60 min."""
    db = ClockedCdcDatabase(
        sqlserver_simulator,
        "shop",
        {"orders": "id int NOT NULL PRIMARY KEY"},
        time_zone=ZONE,
        start=local(9, 0),
    )
    db.commit_at(local(10, 0), ("INSERT INTO dbo.orders VALUES (?)", 1))
    db.capture(until=local(10, 1))
    applied_through = Lsn(db.cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0])
    db.commit_at(local(10, 2), ("INSERT INTO dbo.orders VALUES (?)", 2))
    db.capture(until=local(10, 3))
    db.cursor.execute("EXEC sys.sp_cdc_change_job @job_type = N'cleanup', @retention = 60")
    monkeypatch.setenv("AIRFLOW_CONN_SIM", sqlserver_simulator.airflow_connection("shop"))
    key = watermark_key("sim", "shop", "dbo_orders")
    monkeypatch.setenv(f"AIRFLOW_VAR_{key.upper()}", json.dumps({"lsn": applied_through.hex}))
    return db


def at(db: ClockedCdcDatabase, when: dt.datetime, *, cleanup: bool = False) -> None:
    """Move the server clock (the capture job keeps up with it); with ``cleanup``, run the cleanup job."""
    db.capture(until=when)
    if cleanup:
        db.cursor.execute("EXEC sys.sp_cdc_start_job @job_type = N'cleanup'")


def unapplied_rows(db: ClockedCdcDatabase) -> list[int]:
    return [row[0] for row in db.cursor.execute("SELECT id FROM cdc.dbo_orders_CT ORDER BY __$start_lsn")]


def check() -> CdcRetentionHeadroomOperator:
    return CdcRetentionHeadroomOperator(
        task_id="retention_headroom",
        capture_instances=["dbo_orders"],
        sqlserver_cdc_conn_id="sim",
        warning_minutes=45,
        critical_minutes=10,
    )


def test_warns_then_fails_before_the_cleanup_deletes_the_first_unapplied_change(shop, capsys):
    # 10:31: from 11:01 on (10:01 + 60 min) a cleanup may pass the watermark: 30 minutes left, a warning.
    at(shop, local(10, 31), cleanup=True)
    (report,) = check().execute({})
    assert report["status"] == "warning" and report["minutes_left"] == 30.0
    assert report["gap_time"] == "2026-03-02T05:31:00+00:00"  # 11:01 in Kolkata
    assert report["deletion_time"] == "2026-03-02T05:32:00+00:00"  # the 10:02 change, from 11:02 on
    assert report["backlog_age_seconds"] == 29 * 60 and report["lag_seconds"] == 30 * 60
    logged = capsys.readouterr().out  # the task logger (structlog) writes to stdout outside a task run
    assert "warning" in logged and "dbo_orders: 30 minutes left" in logged and "sp_cdc_change_job" in logged

    # 10:56: 5 minutes left, below the critical 10: the task fails naming the instance, minutes and remedy ...
    at(shop, local(10, 56), cleanup=True)
    with pytest.raises(RetentionHeadroomError) as failed:
        check().execute({})
    message = str(failed.value)
    assert "dbo_orders: 5 minutes left" in message
    assert "@retention = <minutes>" in message and "apply the backlog" in message
    # ... while the cleanup, which has just run, still keeps the change: the alert came before the loss.
    assert unapplied_rows(shop) == [1, 2]

    # 11:05: the cleanup deletes it; the check now says the watermark was passed.
    at(shop, local(11, 5), cleanup=True)
    assert 2 not in unapplied_rows(shop)
    with pytest.raises(RetentionHeadroomError, match="past the applied-through LSN"):
        check().execute({})


def test_everything_applied_leaves_the_whole_retention(shop, monkeypatch):
    max_lsn = Lsn(shop.cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0])
    key = watermark_key("sim", "shop", "dbo_orders")
    monkeypatch.setenv(f"AIRFLOW_VAR_{key.upper()}", json.dumps({"lsn": max_lsn.hex}))
    at(shop, local(10, 13))
    (report,) = check().execute({})
    assert report["status"] == "ok" and report["minutes_left"] == 50.0  # complete up to 10:03
    assert report["oldest_unapplied_lsn"] is None and report["backlog_age_seconds"] == 0
    assert report["lag_seconds"] == 10 * 60


def test_no_watermark_is_not_an_alarm(shop, monkeypatch):
    monkeypatch.delenv(f"AIRFLOW_VAR_{watermark_key('sim', 'shop', 'dbo_orders').upper()}")
    (report,) = check().execute({})
    assert report["status"] == "no_watermark" and report["minutes_left"] is None


def test_thresholds_must_be_ordered():
    with pytest.raises(ValueError, match="critical_minutes <= warning_minutes"):
        CdcRetentionHeadroomOperator(
            task_id="h", capture_instances=["x"], warning_minutes=10, critical_minutes=20
        )


# --- Change Tracking ---------------------------------------------------------------------------------


def utc(hour: int, minute: int) -> dt.datetime:
    return dt.datetime(2026, 3, 2, hour, minute, tzinfo=dt.UTC)


@pytest.fixture
def tracked(sqlserver_simulator, monkeypatch):
    """ctshop.dbo.items with CHANGE_RETENTION 60 minutes: version 1 at 10:00 synchronized, version 2 at 10:02 not."""
    sim = sqlserver_simulator
    sim.clock.set(utc(9, 0), frozen=True)
    sim.execute("CREATE DATABASE ctshop")
    sim.execute(
        "ALTER DATABASE ctshop SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 60 MINUTES, AUTO_CLEANUP = ON)"
    )
    sim.execute(
        "CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY); ALTER TABLE dbo.items ENABLE CHANGE_TRACKING",
        "ctshop",
    )
    sim.clock.set(utc(10, 0), frozen=True)
    sim.execute("INSERT INTO dbo.items VALUES (1)", "ctshop")
    sim.clock.set(utc(10, 2), frozen=True)
    sim.execute("INSERT INTO dbo.items VALUES (2)", "ctshop")
    monkeypatch.setenv("AIRFLOW_CONN_SIM", sim.airflow_connection("ctshop"))
    key = watermark_key("sim", "ctshop", "dbo_items")
    monkeypatch.setenv(f"AIRFLOW_VAR_{key.upper()}", json.dumps({"lsn": version_lsn(1).hex}))
    return sim


def test_change_tracking_warns_then_fails_before_the_min_valid_version_passes_the_watermark(tracked):
    check = CdcRetentionHeadroomOperator(
        task_id="retention_headroom",
        capture_instances=[],
        change_tracking_tables=["dbo.items"],
        sqlserver_cdc_conn_id="sim",
        warning_minutes=45,
        critical_minutes=10,
    )
    # Version 2 (10:02, a smalldatetime: taken as 10:01) leaves the retention at 11:01.
    tracked.clock.set(utc(10, 31), frozen=True)
    (report,) = check.execute({})
    assert report["status"] == "warning" and report["minutes_left"] == 30.0
    tracked.clock.set(utc(10, 56), frozen=True)
    with pytest.raises(RetentionHeadroomError) as failed:
        check.execute({})
    assert "dbo_items: 5 minutes left before the Change Tracking cleanup" in str(failed.value)
    assert "CHANGE_RETENTION = <n> DAYS" in str(failed.value)
    tracked.clock.set(utc(11, 5), frozen=True)
    with pytest.raises(
        RetentionHeadroomError, match="CHANGE_TRACKING_MIN_VALID_VERSION is 2, above the synchronized"
    ):
        check.execute({})
