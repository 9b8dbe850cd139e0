"""LsnTrigger: serialization, the async connection lookup and the events it yields, on the simulator."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest
from server_clock import ZONE, local, utc

from airflow_provider_sqlserver_cdc.triggers.lsn import LsnTrigger


def make():
    return LsnTrigger(
        sqlserver_cdc_conn_id="src",
        database="shop",
        server_time_zone="Europe/Berlin",
        window_mode="watermark",
        data_interval_end="2026-01-01T11:00:00+00:00",
        watermarks={"dbo_orders": "0x0000002A000001F00003", "dbo_new": None},
        poll_interval=2.5,
        timeout_at="2026-01-01T12:00:00+00:00",
    )


def first_event(trigger: LsnTrigger) -> dict:
    async def first():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first())


def test_serialize_round_trips_through_json():
    classpath, kwargs = make().serialize()
    assert classpath == "airflow_provider_sqlserver_cdc.triggers.lsn.LsnTrigger"
    kwargs = json.loads(json.dumps(kwargs))
    again = LsnTrigger(**kwargs)
    assert again.serialize() == make().serialize()
    assert vars(again) == vars(make())


def test_serialize_round_trips_through_airflow_serde():
    """The task runner sends trigger kwargs through Airflow's serde (``dag.test()`` does too)."""
    from airflow.sdk.serde import deserialize, serialize

    classpath, kwargs = make().serialize()
    again = LsnTrigger(**deserialize(serialize(kwargs)))
    assert again.serialize() == (classpath, kwargs)


def test_an_unknown_connection_is_an_error_event_with_the_reason():
    payload = first_event(make())
    assert payload["status"] == "error"
    assert "src" in payload["message"] and "isn't defined" in payload["message"]


def test_errors_become_an_error_event(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SRC", json.dumps({"conn_type": "mssql", "host": "nowhere"}))
    trigger = make()

    def boom(connection):
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(trigger, "check", boom)
    assert first_event(trigger) == {"status": "error", "message": "RuntimeError: driver exploded"}


@pytest.fixture
def shop(sqlserver_simulator, monkeypatch):
    """A CDC-enabled ``shop`` whose capture job stopped at 10:05 server time; connection ``src`` in the env."""
    sim = sqlserver_simulator
    sim.clock.set_timezone(ZONE)
    sim.clock.set(local(10, 0), frozen=True)
    cur = sim.connect().cursor()
    for sql in (
        "CREATE DATABASE shop",
        "USE shop",
        "EXEC sys.sp_cdc_enable_db",
        "CREATE TABLE dbo.orders (order_id int NOT NULL PRIMARY KEY)",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL",
        "EXEC sys.sp_cdc_stop_job @job_type = N'capture'",
    ):
        cur.execute(sql)
    sim.clock.set(local(10, 5), frozen=True)
    cur.execute("INSERT INTO dbo.orders VALUES (1)")
    sim.run_capture_scan("shop")

    def use_password(password: str) -> None:
        monkeypatch.setenv(
            "AIRFLOW_CONN_SRC",
            json.dumps(
                {
                    "conn_type": "mssql",
                    "host": sim.host,
                    "port": sim.port,
                    "login": sim.user,
                    "password": password,
                    "schema": "shop",
                    "extra": {"driver": "FreeTDS"},
                }
            ),
        )

    use_password(sim.password)
    sim.use_password = use_password
    return sim


def interval_trigger(end: dt.datetime, **kwargs) -> LsnTrigger:
    return LsnTrigger(
        sqlserver_cdc_conn_id="src", window_mode="interval", data_interval_end=end.isoformat(), **kwargs
    )


def test_run_fetches_the_connection_with_the_async_api(shop, monkeypatch):
    """The connection comes from ``AIRFLOW_CONN_SRC`` through ``aget_connection``; never the sync lookup."""
    from airflow.sdk import BaseHook

    def sync_lookup(*args, **kwargs):
        raise AssertionError("the trigger looked the connection up synchronously")

    monkeypatch.setattr(BaseHook, "get_connection", classmethod(sync_lookup))
    # 10:00 server time (UTC+05:30) is behind the capture job's 10:05: ready at once.
    payload = first_event(interval_trigger(utc(10, 0)))
    assert payload["status"] == "success", payload
    assert "2026-03-02 10:05:00" in payload["message"]


def test_bad_credentials_are_an_error_event_with_the_reason(shop):
    shop.use_password("not-the-password")
    payload = first_event(interval_trigger(utc(10, 0)))
    assert payload["status"] == "error"
    assert "SqlServerLoginError" in payload["message"] and "Login failed" in payload["message"]
    assert "not-the-password" not in payload["message"]


def test_not_ready_in_time_is_a_timeout_event_with_the_capture_job(shop):
    shop.clock.set(local(10, 30), frozen=True)
    trigger = interval_trigger(
        utc(10, 10),
        poll_interval=0.1,
        timeout_at=(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=0.3)).isoformat(),
    )
    payload = first_event(trigger)
    assert payload["status"] == "timeout"
    assert "STOPPED" in payload["message"] and "1500 s behind" in payload["message"]
