"""LsnSensor.poke and LsnTrigger.run against the simulator (server zone UTC+05:30).

The deferrable sensor's timeout, ``soft_fail`` and trigger errors run in a one-sensor DAG with
``dag.test()`` below; the full pipeline DAG is in tests/operators/test_watermark.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os

import pytest
from server_clock import ZONE, local, utc

from airflow_provider_sqlserver_cdc.errors import WatermarkMissingError
from airflow_provider_sqlserver_cdc.sensors.lsn import LsnSensor
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test
from airflow_provider_sqlserver_cdc.triggers.lsn import LsnTrigger
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase


@pytest.fixture
def sim(sqlserver_simulator, monkeypatch):
    orders = {"orders": "order_id int NOT NULL PRIMARY KEY"}
    db = ClockedCdcDatabase(sqlserver_simulator, "shop", orders, time_zone=ZONE, start=local(10, 0))
    sqlserver_simulator.clock.set(local(10, 5), frozen=True)
    db.cursor.execute("INSERT INTO dbo.orders VALUES (1)")
    db.capture()
    monkeypatch.setenv("AIRFLOW_CONN_SIM", sqlserver_simulator.airflow_connection("shop"))
    return sqlserver_simulator


def test_poke_waits_until_the_capture_job_reaches_the_interval_end(sim):
    sensor = LsnSensor(task_id="wait", sqlserver_cdc_conn_id="sim", poke_interval=1)
    context = {"data_interval_end": utc(10, 10)}
    assert sensor.poke(context) is False  # max LSN maps to 10:05 server time
    sim.clock.set(local(10, 9), frozen=True)
    sim.run_capture_scan("shop")
    assert sensor.poke(context) is False
    sim.clock.set(local(10, 10), frozen=True)
    sim.run_capture_scan("shop")
    assert sensor.poke(context) is True


def test_poke_in_watermark_mode_needs_a_watermark(sim):
    sensor = LsnSensor(
        task_id="wait", capture_instance="dbo_orders", sqlserver_cdc_conn_id="sim", window_mode="watermark"
    )
    sensor._watermarks = lambda hook: {
        "dbo_orders": None
    }  # no Variable outside a task: the edge of this test
    with pytest.raises(WatermarkMissingError, match="dbo_orders"):
        sensor.poke({})


def test_watermark_mode_reads_the_watermark_of_the_resolved_capture_instance(sim, monkeypatch):
    """``schema.table`` reads the same Variable as CdcExtractOperator writes (keyed by instance name)."""
    import airflow_provider_sqlserver_cdc.state as state_module

    keys: list[str] = []
    # Variables are not readable outside a task: record the key at that edge instead.
    monkeypatch.setattr(state_module, "read_watermark", lambda key: keys.append(key))
    sensor = LsnSensor(
        task_id="wait", capture_instance="dbo.orders", sqlserver_cdc_conn_id="sim", window_mode="watermark"
    )
    with sensor.source_hook() as hook:
        marks = sensor._watermarks(hook)
    assert marks == {"dbo_orders": None}
    assert keys == ["sqlserver_cdc__sim__shop__dbo_orders"]


def test_trigger_fires_once_the_capture_job_catches_up(sim):
    trigger = LsnTrigger(
        sqlserver_cdc_conn_id="sim",
        window_mode="interval",
        data_interval_end=utc(10, 10).isoformat(),
        poll_interval=0.2,
    )

    async def scenario():
        events = trigger.run()
        first = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(1.0)
        assert not first.done()  # still waiting: the max LSN maps to 10:05
        sim.clock.set(local(10, 12), frozen=True)
        await asyncio.to_thread(sim.run_capture_scan, "shop")
        return await asyncio.wait_for(first, timeout=30)

    event = asyncio.run(scenario())
    assert event.payload["status"] == "success"
    assert "2026-03-02 10:12:00" in event.payload["message"]


def test_trigger_timeout_reports_the_capture_job(sim):
    sim.clock.set(local(10, 30), frozen=True)
    trigger = LsnTrigger(
        sqlserver_cdc_conn_id="sim",
        window_mode="interval",
        data_interval_end=utc(10, 10).isoformat(),
        poll_interval=0.1,
        timeout_at=(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=0.5)).isoformat(),
    )

    async def first_event():
        async for event in trigger.run():
            return event

    event = asyncio.run(first_event())
    assert event.payload["status"] == "timeout"
    assert "STOPPED" in event.payload["message"] and "1500 s behind" in event.payload["message"]


def test_execute_complete_fails_skips_or_raises_the_reason():
    from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

    timeout = {"status": "timeout", "message": "not yet. Capture job: STOPPED."}
    with pytest.raises(AirflowSensorTimeout, match="LsnSensor timed out: not yet. Capture job: STOPPED."):
        LsnSensor(task_id="wait").execute_complete({}, timeout)
    with pytest.raises(AirflowSkipException, match="Capture job: STOPPED"):
        LsnSensor(task_id="wait", soft_fail=True).execute_complete({}, timeout)
    error = {"status": "error", "message": "CaptureInstanceNotFoundError: no dbo_gone"}
    # Not an AirflowException, so soft_fail does not turn it into a skip.
    with pytest.raises(RuntimeError, match="LsnTrigger failed: CaptureInstanceNotFoundError: no dbo_gone"):
        LsnSensor(task_id="wait", soft_fail=True).resume_execution("execute_complete", {"event": error}, {})


@pytest.mark.parametrize("soft_fail", [False, True], ids=["fails", "soft_fail"])
def test_the_deferral_timing_out_says_where_the_capture_job_is(sim, soft_fail, capsys):
    """The deferral's own timeout (the triggerer did not report in time) behaves like the trigger's."""
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

    sim.clock.set(local(10, 30), frozen=True)
    sensor = LsnSensor(task_id="wait", sqlserver_cdc_conn_id="sim", soft_fail=soft_fail)
    failure = {"error": TriggerFailureReason.TRIGGER_TIMEOUT}
    expected = AirflowSkipException if soft_fail else AirflowSensorTimeout
    with pytest.raises(expected) as raised:
        sensor.resume_execution(TRIGGER_FAIL_REPR, failure, {})
    said = capsys.readouterr().out if soft_fail else str(raised.value)  # the skip: in the log
    assert "LsnSensor timed out" in said and "appears to be STOPPED" in said, said


@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
def test_soft_fail_still_fails_on_real_errors(sim, monkeypatch, deferrable):
    from airflow_provider_sqlserver_cdc.errors import CaptureInstanceNotFoundError, SqlServerLoginError

    context = {"data_interval_end": utc(10, 10)}
    unknown = LsnSensor(
        task_id="wait",
        sqlserver_cdc_conn_id="sim",
        capture_instance="dbo_gone",
        window_mode="watermark",
        soft_fail=True,
        deferrable=deferrable,
    )
    with pytest.raises(CaptureInstanceNotFoundError, match="dbo_gone"):
        unknown.execute(context)
    conn = json.loads(os.environ["AIRFLOW_CONN_SIM"])
    monkeypatch.setenv("AIRFLOW_CONN_SIM", json.dumps({**conn, "password": "wrong"}))
    refused = LsnSensor(task_id="wait", sqlserver_cdc_conn_id="sim", soft_fail=True, deferrable=deferrable)
    with pytest.raises(SqlServerLoginError):
        refused.execute(context)


# --- the deferrable sensor in a real DAG run (dag.test() runs the trigger in line) ---------------

SENSOR_DAG = """
from __future__ import annotations

import datetime as dt
import json
import os

import pendulum
from airflow.sdk import DAG, BaseHook

from airflow_provider_sqlserver_cdc.sensors.lsn import LsnSensor

cfg = json.loads(os.environ["CDC_TEST_CONFIG"])

if cfg.get("trigger_password"):
    # Only the trigger's (async) lookup gets a wrong password: the task's own check passes.
    lookup = BaseHook.aget_connection.__func__

    async def aget_connection(cls, conn_id):
        conn = await lookup(cls, conn_id)
        conn.password = cfg["trigger_password"]
        return conn

    BaseHook.aget_connection = classmethod(aget_connection)

with DAG(
    "lsn_sensor", schedule=dt.timedelta(minutes=10), start_date=pendulum.datetime(2020, 1, 1, tz="UTC")
) as dag:
    LsnSensor(
        task_id="wait",
        sqlserver_cdc_conn_id="sim",
        deferrable=True,
        poke_interval=0.5,
        timeout=cfg["timeout"],
        soft_fail=cfg["soft_fail"],
    )"""


def run_sensor_dag(tmp_path, **cfg) -> tuple[str | None, str]:
    """Run the one-sensor DAG with ``dag.test()`` in a subprocess; return the sensor's state and the output."""
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lsn_sensor_dag.py").write_text(SENSOR_DAG)
    env = {**os.environ, "CDC_TEST_CONFIG": json.dumps(cfg)}
    run = run_dag_test(
        "lsn_sensor", dags_folder=dags, env=env, logical_date=utc(10, 10), cwd=tmp_path, timeout=300
    )
    return run.task_states.get("wait"), run.output


@pytest.fixture
def stopped_job(sim, airflow_db):
    """The capture job stopped at 10:05 and the server clock at 10:30: the 10:00-10:10 interval never completes."""
    sim.clock.set(local(10, 30), frozen=True)
    return sim


@pytest.mark.slow
def test_deferred_sensor_times_out_failed_with_the_capture_job_in_the_log(stopped_job, tmp_path):
    state, output = run_sensor_dag(tmp_path, timeout=2, soft_fail=False)
    assert state == "failed", output[-4000:]
    assert "AirflowSensorTimeout" in output and "LsnSensor timed out" in output
    assert "appears to be STOPPED" in output and "1500 s behind the server clock" in output


@pytest.mark.slow
def test_deferred_sensor_with_soft_fail_is_skipped_on_timeout(stopped_job, tmp_path):
    state, output = run_sensor_dag(tmp_path, timeout=2, soft_fail=True)
    assert state == "skipped", output[-4000:]
    assert "LsnSensor timed out" in output and "appears to be STOPPED" in output


@pytest.mark.slow
def test_an_error_in_the_trigger_fails_the_task_with_the_reason_even_with_soft_fail(stopped_job, tmp_path):
    state, output = run_sensor_dag(tmp_path, timeout=60, soft_fail=True, trigger_password="wrong")
    assert state == "failed", output[-4000:]
    assert "LsnTrigger failed: SqlServerLoginError" in output and "Login failed" in output
