"""The switch to a table's second capture instance at its start LSN, and the blind-spot back-fill by key.

Against the simulator, whose capture job records ``cdc.ddl_history`` and whose
``sys.sp_cdc_enable_table`` starts a new instance at a fresh LSN (as SQL Server's start_lsn: the
instance captures nothing before it), and allows two instances per table (error 22926,
sys-sp-cdc-enable-table-transact-sql.md). The watermark Variables are a dict here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from server_clock import local, utc
from simulator_extraction import extract, orders_source
from variable_store import in_memory_variables

from airflow_provider_sqlserver_cdc.errors import SchemaChangeError
from airflow_provider_sqlserver_cdc.extraction.instance_switch import (
    CaptureInstanceLimitError,
    successor_name,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.lsn import Lsn


@pytest.fixture
def store(monkeypatch) -> dict[str, str]:
    return in_memory_variables(monkeypatch)


@pytest.fixture
def source(sqlserver_simulator, monkeypatch, store):
    db = orders_source(sqlserver_simulator, monkeypatch)
    db.commit_at(local(10, 5), ("INSERT INTO dbo.orders VALUES (1, N'a'), (2, N'b'), (3, N'c')",))
    db.commit_at(local(10, 10), ("ALTER TABLE dbo.orders ADD loyalty int NULL",))
    db.commit_at(
        local(10, 15),
        ("UPDATE dbo.orders SET loyalty = 7, note = N'a2' WHERE order_id = 1",),
        ("INSERT INTO dbo.orders VALUES (4, N'd', 9)",),
        ("DELETE FROM dbo.orders WHERE order_id = 3",),
    )
    return db


def manifest(window) -> dict:
    return json.loads(Path(window.manifest_uri).read_text())


def rows(window) -> list[dict]:
    m = manifest(window)
    return [r for f in m["files"] for r in pq.read_table(Path(window.window_uri) / f["path"]).to_pylist()]


ENABLE_V2 = (
    "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL, "
    "@capture_instance = N'dbo_orders_v2'"
)


def test_a_window_spanning_a_second_instance_is_split_at_its_start_and_the_blind_spot_back_filled(
    source, tmp_path
):
    source.commit_at(local(10, 20), (ENABLE_V2,))  # a DBA creates the second instance
    source.commit_at(local(10, 25), ("UPDATE dbo.orders SET loyalty = 5 WHERE order_id = 2",))
    source.capture(until=local(11, 5))
    old, backfill, new = extract(tmp_path)

    assert {w.capture_instance for w in (old, backfill, new)} == {"dbo_orders"}  # one stream, one state key
    assert len({w.state_key for w in (old, backfill, new)}) == 1
    m_old, m_back, m_new = manifest(old), manifest(backfill), manifest(new)
    start = Lsn.from_hex(m_new["from_lsn"])
    assert Lsn.from_hex(m_old["to_lsn"]) == Lsn.from_int(int(start) - 1)  # no gap, no overlap
    assert m_old["read_instance"] is None and m_new["read_instance"] == "dbo_orders_v2"
    assert "loyalty" not in [c["name"] for c in m_old["columns"]]
    assert "loyalty" in [c["name"] for c in m_new["columns"]]
    assert [r["loyalty"] for r in rows(new) if r["__$operation"] == 4] == [5]

    # the keys the old instance changed after the ADD, read again at one consistent LSN above the switch
    assert m_back["backfill"]["old_instance"] == "dbo_orders"
    assert m_back["backfill"]["method"] == "snapshot_isolation"
    assert Lsn.from_hex(m_back["backfill"]["consistent_lsn"]) >= start
    assert m_old["from_lsn"] <= m_back["from_lsn"] <= m_back["to_lsn"] <= m_old["to_lsn"]
    back = {r["order_id"]: (r["__$operation"], r["note"], r["loyalty"]) for r in rows(backfill)}
    assert back == {1: (4, "a2", 7), 4: (4, "d", 9), 3: (1, None, None)}
    assert {r["__$start_lsn"] for r in rows(backfill)} == {
        Lsn.from_hex(m_back["backfill"]["consistent_lsn"]).value
    }


def test_without_a_second_instance_the_add_fails_and_the_opt_in_creates_one(source, tmp_path, store):
    source.capture(until=local(11, 5))
    with pytest.raises(SchemaChangeError, match="dbo_orders_v2"):
        extract(tmp_path)
    assert not (tmp_path / "lake").exists()

    old, backfill = extract(tmp_path, create_capture_instance=True)
    assert manifest(backfill)["read_instance"] == "dbo_orders_v2"
    assert {r["order_id"] for r in rows(backfill)} == {1, 3, 4}
    assert store["sqlserver_cdc__sim__shop__dbo_orders__source_table"] == "dbo.orders"

    # a DROP before the switch completed would need a third instance: a clear error, nothing written
    source.commit_at(local(11, 10), ("ALTER TABLE dbo.orders DROP COLUMN note",))
    source.capture(until=local(12, 5))
    with pytest.raises(CaptureInstanceLimitError, match="third capture instance"):
        extract(tmp_path, start=utc(11, 0), end=utc(12, 0), create_capture_instance=True)


def test_a_drop_cuts_the_old_part_and_values_of_added_columns_are_re_read_once(source, tmp_path):
    source.capture(until=local(10, 0))
    (first,) = extract(tmp_path, start=utc(9, 0), end=utc(10, 0))  # the stream's columns before the DDL
    source.commit_at(local(10, 16), ("ALTER TABLE dbo.orders ADD tier int NOT NULL DEFAULT 1",))
    source.commit_at(local(10, 17), ("ALTER TABLE dbo.orders DROP COLUMN note",))
    source.commit_at(local(10, 18), ("UPDATE dbo.orders SET loyalty = 8 WHERE order_id = 2",))
    source.commit_at(local(10, 20), (ENABLE_V2,))
    source.capture(until=local(11, 5))
    windows = extract(tmp_path)
    drop = Lsn.from_hex(
        next(e["lsn"] for w in windows for e in manifest(w)["ddl_events"] or () if "DROP" in e["command"])
    )
    read = [(manifest(w)["read_instance"], w.window_uri.rsplit("_", 1)[-1], w) for w in windows]
    before_drop, after_drop = [w for instance, _, w in read if instance is None]
    assert Lsn.from_hex(manifest(before_drop)["to_lsn"]) == Lsn.from_int(int(drop) - 1)
    assert Lsn.from_hex(manifest(after_drop)["from_lsn"]) == drop
    assert "note" in [c["name"] for c in manifest(before_drop)["columns"]]
    assert "note" not in [c["name"] for c in manifest(after_drop)["columns"]]  # its NULLs there are no values

    # every row holding a value in a column added since the stream's previous window, read once at one LSN
    (added,) = [w for _, suffix, w in read if suffix == "added"]
    assert manifest(added)["backfill"]["added_columns"] == ["loyalty", "tier"]
    assert {r["order_id"]: (r["loyalty"], r["tier"]) for r in rows(added)} == {
        1: (7, 1),
        2: (8, 1),
        4: (9, 1),
    }
    assert Lsn.from_hex(manifest(added)["backfill"]["consistent_lsn"]) > Lsn.from_hex(
        manifest(added)["to_lsn"]
    )
    history = json.loads((tmp_path / "lake" / "dbo_orders" / "_column_history.json").read_text())
    assert [c["name"] for c in history["entries"][-1]["columns"]] == ["order_id", "loyalty", "tier"]

    source.commit_at(local(11, 30), ("UPDATE dbo.orders SET tier = 2 WHERE order_id = 1",))
    source.capture(until=local(12, 5))
    later = extract(tmp_path, start=utc(11, 0), end=utc(12, 0))
    assert [manifest(w)["read_instance"] for w in later] == ["dbo_orders_v2"]  # nothing re-read again
    assert first.capture_instance == "dbo_orders"


def test_successor_names_skip_taken_ones():
    assert successor_name("dbo_orders", ["dbo_orders", "DBO_ORDERS_V2"]) == "dbo_orders_v3"
    assert len(successor_name("x" * 100, [])) == 100


def test_parts_read_each_lsn_from_the_instance_that_holds_it():
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.extraction.instance_switch import InstanceSwitch
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow

    old = CaptureInstance("dbo_t", "dbo", "t", Lsn.from_int(10))
    new = CaptureInstance("dbo_t_v2", "dbo", "t", Lsn.from_int(50))
    switch = InstanceSwitch("dbo_t", old, new)

    def window(first: int, last: int) -> LsnWindow:
        return LsnWindow("dbo_t", Lsn.from_int(first), Lsn.from_int(last), "interval")

    def spans(parts):
        return [(i.name, int(w.from_lsn), int(w.to_lsn)) for i, w in parts]

    assert spans(switch.parts(window(20, 49))) == [("dbo_t", 20, 49)]
    assert spans(switch.parts(window(50, 60))) == [("dbo_t_v2", 50, 60)]
    assert spans(switch.parts(window(20, 60))) == [("dbo_t", 20, 49), ("dbo_t_v2", 50, 60)]
    assert spans(InstanceSwitch("dbo_t", old).parts(window(20, 60))) == [("dbo_t", 20, 60)]


def test_the_old_instance_is_disabled_only_once_the_target_and_the_runs_window_are_past_the_switch(store):
    """A run that created v2 back-fills up to v2's start, past its own interval: the next interval's window
    still starts before the switch and reads the old instance, so it is disabled a run later.

    The hook only records the statement it would send (the decision is under test; the e2e sends it).
    """
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.extraction.instance_switch import (
        InstanceSwitch,
        disable_completed_old,
    )

    class RecordingHook:
        statements: list[str] = []

        def run_statement(self, statement: str, *, doing: str) -> None:
            self.statements.append(statement)

    old = CaptureInstance("dbo_t", "dbo", "t", Lsn.from_int(10))
    new = CaptureInstance("dbo_t_v2", "dbo", "t", Lsn.from_int(50))
    switch = InstanceSwitch("dbo_t", old, new)
    hook = RecordingHook()

    def disable(applied_through: int, needed_from: int) -> InstanceSwitch:
        return disable_completed_old(
            hook, switch, Lsn.from_int(applied_through), state_key="k", needed_from=Lsn.from_int(needed_from)
        )

    assert disable(48, 50) is switch  # the target lacks LSN 49
    assert disable(49, 40) is switch  # the target holds it, but this run's window starts before the switch
    assert hook.statements == []
    after = disable(49, 50)
    assert (after.old, after.new) == (new, None)
    assert len(hook.statements) == 1 and "sp_cdc_disable_table" in hook.statements[0]
    assert store["k__source_table"] == "dbo.t"


def test_statements_take_names_as_quoted_values_and_keys_cast_to_their_types():
    from airflow_provider_sqlserver_cdc import tsql
    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn

    enable = tsql.enable_capture_instance_statement(
        "dbo", "o'rders", "dbo_orders_v2", role_name=None, index_name="PK"
    )
    assert enable == (
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'o''rders', @role_name = NULL, "
        "@capture_instance = N'dbo_orders_v2', @index_name = N'PK'"
    )
    assert "@capture_instance = N'dbo_orders'" in tsql.disable_capture_instance_statement(
        "dbo", "orders", "dbo_orders"
    )
    key = CapturedColumn("id]x", 1, "int", 4, 10, 0, False)
    query = tsql.rows_by_key_query("dbo", "orders", [key], [key], 2)
    assert query.endswith(
        "FROM [dbo].[orders] AS [src] WHERE ([src].[id]]x] = CAST(? AS int)) OR ([src].[id]]x] = CAST(? AS int))"
    )
    with pytest.raises(ValueError):
        tsql.rows_by_key_query("dbo", "orders", [key], [], 1)


def test_a_snapshot_of_a_switched_table_has_the_new_columns_under_the_stream_name(source, tmp_path):
    from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_windows

    source.commit_at(local(10, 20), (ENABLE_V2,))
    source.capture(until=local(10, 30))
    hook = SqlServerCdcHook("sim")
    try:
        [window] = snapshot_windows(hook, ["dbo_orders"], conn_id="sim", base_uri=str(tmp_path / "lake"))
    finally:
        hook.close()
    assert window.capture_instance == "dbo_orders" and "/dbo_orders/" in window.window_uri
    assert {r["order_id"]: r["loyalty"] for r in rows(window)} == {1: 7, 2: None, 4: 9}
