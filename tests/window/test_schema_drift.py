"""Schema drift: DDL in a window that makes the capture instance miss data fails the extract, loudly.

The classification is checked on its own; the extraction against the simulator, whose capture job
records ``cdc.ddl_history`` as SQL Server does (the watermark Variables are a dict here: no
Airflow metadata database is needed for the extraction library).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from server_clock import ZONE, local
from simulator_extraction import extract

from airflow_provider_sqlserver_cdc import state
from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn
from airflow_provider_sqlserver_cdc.errors import SchemaChangeError
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.schema_drift import DdlEvent, named_identifiers, schema_drift
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase


def col(name: str, sql_type: str = "int", max_length: int = 4, precision: int = 10, scale: int = 0):
    return CapturedColumn(name, 1, sql_type, max_length, precision, scale)


def event(command: str) -> DdlEvent:
    return DdlEvent(command, Lsn.from_int(5))


CAPTURED = [col("id"), col("note", "varchar", 10, 0, 0)]


def test_added_column_is_not_captured():
    drift = schema_drift(
        CAPTURED, [*CAPTURED, col("loyalty")], [event("ALTER TABLE dbo.t ADD loyalty int NULL")]
    )
    assert drift.added == ("loyalty",) and drift.loses_data


def test_dropped_and_retyped_captured_columns():
    drift = schema_drift(
        CAPTURED,
        [col("id", "bigint", 8, 19)],
        [
            event("ALTER TABLE [dbo].[t] ALTER COLUMN [id] bigint NOT NULL"),
            event('ALTER TABLE t DROP COLUMN "note"'),
        ],
    )
    assert drift.dropped == ("note",)
    assert drift.altered == (("id", "int", "bigint"),)
    assert "varchar" not in drift.describe() and "id changed type from int" in drift.describe()


def test_ddl_that_changes_nothing_captured_loses_nothing():
    source = [*CAPTURED, col("audit")]  # a column the instance was created without, on purpose
    drift = schema_drift(CAPTURED, source, [event("ALTER TABLE dbo.t DROP COLUMN tmp")])
    assert not drift.loses_data and drift.events
    assert not schema_drift(CAPTURED, source, []).events


def test_named_identifiers_unquote():
    assert {"a]b", "x y", "c"} <= named_identifiers('ALTER TABLE t ADD [a]]b] int, "x y" int, c int')


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SIM", sqlserver_simulator.airflow_connection("shop"))
    store: dict[str, str] = {}
    monkeypatch.setattr(
        state,
        "_variable",
        lambda: type("V", (), {"get": staticmethod(lambda k, default=None: store.get(k, default))}),
    )
    tables = {"orders": "order_id int NOT NULL PRIMARY KEY, note nvarchar(20) NULL"}
    return ClockedCdcDatabase(sqlserver_simulator, "shop", tables, time_zone=ZONE, start=local(9, 0))


def test_a_column_added_inside_the_window_fails_the_extract_before_writing(source, tmp_path):
    source.commit_at(local(10, 5), ("INSERT INTO dbo.orders VALUES (1, N'a')",))
    source.commit_at(local(10, 10), ("ALTER TABLE dbo.orders ADD loyalty int NULL",))
    source.commit_at(local(10, 15), ("UPDATE dbo.orders SET loyalty = 7, note = N'b' WHERE order_id = 1",))
    source.capture(until=local(11, 5))
    with pytest.raises(SchemaChangeError) as info:
        extract(tmp_path)
    message = str(info.value)
    for part in (
        "dbo_orders",
        "loyalty",
        "ALTER TABLE dbo.orders ADD loyalty int NULL",
        "@capture_instance = N'dbo_orders_v2'",
    ):
        assert part in message
    assert not (tmp_path / "lake").exists()

    [window] = extract(tmp_path, on_schema_change="ignore")
    manifest = json.loads(Path(window.manifest_uri).read_text())
    assert [e["command"] for e in manifest["ddl_events"]] == ["ALTER TABLE dbo.orders ADD loyalty int NULL"]
    assert window.row_count == 3  # the insert and the update's two images, without the new column


def test_ddl_on_a_column_the_instance_does_not_capture_goes_on(source, tmp_path):
    source.commit_at(local(9, 30), ("ALTER TABLE dbo.orders ADD scratch int NULL",))  # before the window
    source.commit_at(local(10, 5), ("INSERT INTO dbo.orders (order_id, note) VALUES (1, N'a')",))
    source.commit_at(local(10, 10), ("ALTER TABLE dbo.orders DROP COLUMN scratch",))
    source.capture(until=local(11, 5))
    [window] = extract(tmp_path)
    manifest = json.loads(Path(window.manifest_uri).read_text())
    assert [e["command"] for e in manifest["ddl_events"]] == ["ALTER TABLE dbo.orders DROP COLUMN scratch"]
