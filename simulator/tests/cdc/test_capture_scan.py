"""The capture scan over the simulator's real transaction log: change rows, lsn_time_mapping, DDL, cleanup.

These tests drive :class:`CdcDatabase` with transactions appended to the engine's own
:class:`TransactionLog` (no TDS, no SQL), so the capture rules can be checked one by one; the
scenario tests in this directory cover the same behaviour through pyodbc.
"""

from __future__ import annotations

import datetime as dt

import pytest

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.cdc.capture_instance import (
    CapturedColumn,
    CaptureInstance,
    IndexColumn,
)
from sqlserver_cdc_simulator.cdc.database_state import CdcDatabase
from sqlserver_cdc_simulator.cdc.time_mapping import QUIET_PERIOD_TRAN_ID
from sqlserver_cdc_simulator.clock import ServerClock
from sqlserver_cdc_simulator.log import (
    CommittedTransaction,
    DdlOperation,
    RowOperation,
)
from sqlserver_cdc_simulator.storage import Column, Database, Index, Table
from sqlserver_cdc_simulator.values import ticks_from_datetime

COLUMNS = ("id", "name", "qty")
T0 = dt.datetime(2026, 3, 1, 12, 0, 0)


class Harness:
    def __init__(self) -> None:
        self.clock = ServerClock("Europe/Berlin")
        self.clock.set(T0, frozen=True)
        self.db = Database(5, "shop", 0)
        schema = self.db.schema("dbo")
        self.table = Table(
            1001,
            schema,
            "items",
            [Column("id", T.INT, False), Column("name", T.nvarchar(20)), Column("qty", T.INT)],
            0,
        )
        self.table.indexes.append(Index("PK_items", 1, ["id"], "PRIMARY KEY", True, True))
        schema.tables["items"] = self.table
        self.state = CdcDatabase(self.db, self.clock)
        self._xact = 0

    def enable(self, name: str = "dbo_items") -> CaptureInstance:
        lsn = self.db.log.allocate_lsn()
        instance = CaptureInstance(
            name=name,
            source_schema="dbo",
            source_table="items",
            source_object_id=1001,
            object_id=2000 + len(self.state.instances),
            captured_columns=[
                CapturedColumn("id", 1, T.INT, 1),
                CapturedColumn("name", 2, T.nvarchar(20), 2),
                CapturedColumn("qty", 3, T.INT, 3),
            ],
            index_name="PK_items",
            index_columns=[IndexColumn("id", 1, 1)],
            supports_net_changes=True,
            role_name=None,
            create_date=T0,
            enable_lsn=lsn,
            start_lsn=lsn,
        )
        self.state.add_instance(instance)
        return instance

    def commit(
        self, *ops: tuple, table_id: int = 1001, columns: tuple[str, ...] = COLUMNS
    ) -> CommittedTransaction:
        log = self.db.log
        self._xact += 1
        begin = log.allocate_lsn(new_block=True)
        operations = []
        for op in ops:
            if op[0] == "ddl":
                operations.append(
                    DdlOperation(log.allocate_lsn(), "dbo", "items", table_id, op[1], op[2], op[3])
                )
                continue
            kind, before, after = op
            operations.append(
                RowOperation(log.allocate_lsn(), "dbo", "items", table_id, kind, columns, before, after)
            )
        commit = log.allocate_lsn()
        ticks = ticks_from_datetime(self.clock.now().replace(tzinfo=None))
        xact = CommittedTransaction(self._xact, begin, commit, ticks, ticks, operations)
        log.append(xact)
        return xact


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_changes_appear_only_after_a_scan_with_the_commit_lsn(h):
    ci = h.enable()
    xact = h.commit(("insert", None, (1, "a", 5)), ("insert", None, (2, "b", 6)))
    assert len(ci.change_table) == 0
    h.state.scan()
    rows = ci.change_table.window(ci.start_lsn, h.state.mapping.max_lsn())
    assert [r[0] for r in rows] == [xact.commit_lsn, xact.commit_lsn]
    assert [r[1] for r in rows] == [op.lsn for op in xact.operations]
    assert [r[2] for r in rows] == [2, 2]
    assert h.state.mapping.max_lsn() == xact.commit_lsn
    row = h.state.mapping.rows()[-1]
    assert row.tran_begin_lsn == xact.begin_lsn
    assert row.tran_end_time == T0
    assert list(ci.change_table.table_rows())[1][-1] == 2  # __$command_id


def test_changes_before_enable_are_not_captured(h):
    h.commit(("insert", None, (1, "a", 5)))
    ci = h.enable()
    h.state.scan()
    assert len(ci.change_table) == 0


def test_primary_key_update_is_captured_as_delete_then_insert(h):
    ci = h.enable()
    xact = h.commit(("update", (1, "a", 5), (7, "a", 5)), ("update", (2, "b", 6), (2, "b", 9)))
    h.state.scan()
    rows = ci.change_table.window(xact.commit_lsn, xact.commit_lsn)
    assert [(r[2], r[4]) for r in rows] == [(1, 1), (2, 7), (3, 2), (4, 2)]
    assert rows[2][3] == b"\x04" and rows[3][6] == 9


def test_multi_row_key_update_in_one_statement_deletes_all_before_inserting(h):
    ci = h.enable()
    log = h.db.log
    # UPDATE items SET id = id + 1 over ids 1 and 2: both deletes precede both inserts
    ops = [
        RowOperation(
            log.allocate_lsn(), "dbo", "items", 1001, "update", COLUMNS, (1, "a", 5), (2, "a", 5), rowid=1
        ),
        RowOperation(
            log.allocate_lsn(), "dbo", "items", 1001, "update", COLUMNS, (2, "b", 6), (3, "b", 6), rowid=2
        ),
        # a later statement moving the same physical row again starts a new group
        RowOperation(
            log.allocate_lsn(), "dbo", "items", 1001, "update", COLUMNS, (3, "b", 6), (4, "b", 6), rowid=2
        ),
    ]
    commit = log.allocate_lsn()
    log.append(CommittedTransaction(1, ops[0].lsn, commit, 0, 0, list(ops)))
    h.state.scan()
    rows = ci.change_table.window(commit, commit)
    assert [(r[2], r[4]) for r in rows] == [(1, 1), (1, 2), (2, 2), (2, 3), (1, 3), (2, 4)]


def test_quiet_period_rows_advance_only_when_log_or_clock_moves(h):
    h.enable()
    h.state.scan()
    first = h.state.mapping.max_lsn()
    assert first is not None and h.state.mapping.rows()[-1].tran_id == QUIET_PERIOD_TRAN_ID
    h.state.scan()
    assert h.state.mapping.max_lsn() == first  # frozen clock, no log activity: nothing new
    h.clock.advance(2)
    h.state.scan()
    second = h.state.mapping.rows()[-1]
    assert second.start_lsn > first and second.tran_end_time == T0 + dt.timedelta(seconds=2)


def test_a_scan_reading_past_its_last_change_writes_one_quiet_period_row(h):
    h.enable()
    h.state.scan()
    tracked = h.commit(("insert", None, (1, "a", 1)))
    h.clock.advance(1)
    untracked = h.commit(("insert", None, (1, "x", 1)), table_id=999)
    h.state.scan()
    rows = h.state.mapping.rows()
    assert rows[-2].start_lsn == tracked.commit_lsn and rows[-2].tran_id != QUIET_PERIOD_TRAN_ID
    assert rows[-1].tran_id == QUIET_PERIOD_TRAN_ID
    assert rows[-1].start_lsn > untracked.commit_lsn
    assert rows[-1].tran_end_time == T0 + dt.timedelta(seconds=1)
    h.state.scan()
    assert h.state.mapping.rows() == rows  # frozen clock, no log activity: nothing new
    # a scan whose last transaction has changes ends at that transaction's own row
    last = h.commit(("insert", None, (2, "b", 2)))
    h.state.scan()
    assert h.state.mapping.max_lsn() == last.commit_lsn


def test_untracked_transactions_move_the_high_water_mark(h):
    h.enable()
    h.state.scan()
    before = h.state.mapping.max_lsn()
    xact = h.commit(("insert", None, (1, "x", 1)), table_id=999)
    h.state.scan()
    assert h.state.mapping.max_lsn() > xact.commit_lsn > before


def test_max_transactions_limits_a_scan(h):
    h.enable()
    for i in range(5):
        h.commit(("insert", None, (i, "x", i)))
    session = h.state.scan(max_transactions=2)
    assert session.tran_count == 2
    h.state.catch_up()
    assert len(h.state.instance("dbo_items").change_table) == 5


def test_ddl_is_recorded_for_each_instance_and_keeps_the_column_list(h):
    ci = h.enable()
    xact = h.commit(("ddl", "add_column", ("region",), "ALTER TABLE dbo.items ADD region nvarchar(10)"))
    h.commit(("insert", None, (1, "a", 5, "eu")), columns=(*COLUMNS, "region"))
    h.commit(("insert", None, (2, None)), columns=("id", "name"))
    h.state.scan()
    (row,) = h.state.ddl_history
    assert row.ddl_lsn == xact.commit_lsn and row.object_id == ci.object_id and row.source_object_id == 1001
    values = [r[4:] for r in ci.change_table.window(ci.start_lsn, h.state.mapping.max_lsn())]
    assert values == [(1, "a", 5), (2, None, None)]


def test_two_instances_capture_the_same_change_from_their_own_start(h):
    first = h.enable("dbo_items")
    h.commit(("insert", None, (1, "a", 5)))
    second = h.enable("dbo_items_v2")
    h.commit(("insert", None, (2, "b", 6)))
    h.state.scan()
    assert len(first.change_table) == 2 and len(second.change_table) == 1
    assert second.start_lsn > first.start_lsn


def test_cleanup_moves_low_water_mark_to_smallest_lsn_of_same_time(h):
    ci = h.enable()
    h.commit(("insert", None, (1, "a", 5)))
    h.clock.advance(60)
    second = h.commit(("insert", None, (2, "b", 6)))
    third = h.commit(("insert", None, (3, "c", 7)))  # same commit time as the second
    h.state.scan()
    deleted = h.state.cleanup(ci, third.commit_lsn)
    assert deleted == 1 and ci.start_lsn == second.commit_lsn
    assert h.state.mapping.rows()[0].start_lsn == second.commit_lsn


def test_retention_cleanup_uses_the_high_water_mark_time(h):
    ci = h.enable()
    h.commit(("insert", None, (1, "a", 5)))
    h.clock.advance(dt.timedelta(minutes=10))
    kept = h.commit(("insert", None, (2, "b", 6)))
    h.state.scan()
    h.state.cleanup_job = type("C", (), {"retention": 5, "threshold": 5000})()
    assert h.state.retention_cleanup() == 1
    assert ci.start_lsn == kept.commit_lsn
