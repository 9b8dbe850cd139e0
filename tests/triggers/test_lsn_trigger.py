from __future__ import annotations

import asyncio
import json

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


def test_serialize_round_trips_through_json():
    classpath, kwargs = make().serialize()
    assert classpath == "airflow_provider_sqlserver_cdc.triggers.lsn.LsnTrigger"
    kwargs = json.loads(json.dumps(kwargs))
    again = LsnTrigger(**kwargs)
    assert again.serialize() == make().serialize()


def test_errors_become_an_error_event(monkeypatch):
    trigger = make()

    def boom():
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(trigger, "check", boom)

    async def first():
        async for event in trigger.run():
            return event.payload

    payload = asyncio.run(first())
    assert payload == {"status": "error", "message": "RuntimeError: driver exploded"}
