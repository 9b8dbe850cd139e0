"""A capture job stopped by a narrowing ALTER COLUMN: the sensor's timeout says so, with SQL Server's way out.

SQL Server alters the change table's column when a captured column's type changes; when a change
row it already holds does not fit the narrower type, the capture process fails with error 2628 (or
8115) on every scan and captures nothing further (known-issues-and-errors-change-data-capture.md,
"DDL changes to source tables"). The max LSN then stops, the run's sensor waits, and its timeout
must name the failure instead of calling the job "running".
"""

from __future__ import annotations

import datetime as dt

import pyodbc
import pytest

from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.sensors.lsn import LsnSensor
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase

DAY = dt.datetime(2026, 3, 2)  # server-local, UTC


def at(hh: int, mm: int) -> dt.datetime:
    return DAY.replace(hour=hh, minute=mm)


def test_a_capture_job_failing_on_a_narrowed_column_is_reported_with_the_remedy(
    sqlserver_simulator, monkeypatch
):
    monkeypatch.setenv("AIRFLOW_CONN_SIM", sqlserver_simulator.airflow_connection("shop"))
    tables = {"orders": "id int NOT NULL PRIMARY KEY, name varchar(40) NULL"}
    db = ClockedCdcDatabase(sqlserver_simulator, "shop", tables, time_zone="UTC", start=at(10, 0))
    db.commit_at(at(10, 5), ("INSERT INTO dbo.orders VALUES (1, 'a name longer than ten')",))
    db.commit_at(at(10, 6), ("UPDATE dbo.orders SET name = 'short' WHERE id = 1",))
    db.capture()
    hook = SqlServerCdcHook("sim")
    try:
        assert hook.get_capture_job_status().last_error is None
        # the table's row fits varchar(10); the change table's first row does not
        db.commit_at(at(10, 10), ("ALTER TABLE dbo.orders ALTER COLUMN name varchar(10) NULL",))
        with pytest.raises(pyodbc.Error, match="2628"):  # a log scan (the job's, run here) fails on the ALTER
            db.cursor.execute("EXEC sys.sp_cdc_scan")
        sqlserver_simulator.clock.set(at(10, 30), frozen=True)
        status = hook.get_capture_job_status()
    finally:
        hook.close()
    said = status.describe()
    for part in ("FAILING", "error 2628", "cdc.dbo_orders_CT", "column 'name'", "disable and re-enable CDC"):
        assert part in said, (part, said)

    # the deferred sensor timing out (the triggerer's own deadline) reports the same state
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import AirflowSensorTimeout

    sensor = LsnSensor(task_id="wait", sqlserver_cdc_conn_id="sim")
    with pytest.raises(AirflowSensorTimeout) as raised:
        sensor.resume_execution(TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, {})
    assert "FAILING" in str(raised.value) and "error 2628" in str(raised.value)
