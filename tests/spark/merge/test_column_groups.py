"""Windows carrying different columns (around a DROP or ADD COLUMN) are merged in groups: a row changes only its window's columns."""

from __future__ import annotations

import decimal
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from merge_runs import merge_fails, run
from window_builder import (
    AMOUNT,
    INT_KEY,
    NAME,
    ChangeLog,
    Column,
    WindowSpec,
    flatten,
    lsn_hex,
    write_window,
)

from airflow_provider_sqlserver_cdc.spark.merge.column_groups import column_groups
from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError
from airflow_provider_sqlserver_cdc.window.net_effect import UPDATE_AFTER

LOYALTY = Column("loyalty", "int", pa.int32(), max_length=4, precision=10)


def _window(
    label: str, first: int, last: int, columns: tuple[str, ...], consistent: int | None = None, rows: int = 1
):
    manifest = SimpleNamespace(
        row_count=rows,
        columns=[{"name": c} for c in columns],
        lsn_range=(first, last),
        backfill={"consistent_lsn": lsn_hex(consistent)} if consistent else None,
    )
    return SimpleNamespace(label=label, manifest=manifest)


def test_windows_are_cut_where_their_columns_change_and_a_consistent_read_applies_at_its_lsn():
    before_drop = _window("before", 0x100, 0x1FF, ("id", "name", "amount"))
    after_drop = _window("after", 0x200, 0x2FF, ("id", "Name"))
    new_instance = _window("new", 0x300, 0x3FF, ("id", "name"))
    backfill = _window("backfill", 0x200, 0x2FF, ("id", "name"), consistent=0x500)
    groups = column_groups([backfill, new_instance, after_drop, before_drop])
    assert [[w.label for w in g] for g in groups] == [["before"], ["after", "new", "backfill"]]
    assert len(column_groups([before_drop, _window("next", 0x200, 0x2FF, ("id", "name", "amount"))])) == 1
    # a window without rows joins the group beside it, so its LSN range is recorded with that group's commit
    empty_old = _window("empty", 0x100, 0x1FF, ("id", "name"), rows=0)
    groups = column_groups([new_instance, empty_old])
    assert [[w.label for w in g] for g in groups] == [["empty", "new"]]
    assert [[w.label for w in g] for g in column_groups([empty_old])] == [["empty"]]


def _backfill(base: Path, spec: WindowSpec, consistent: int) -> str:
    """A window read at one consistent LSN (``extraction.blind_spot``): rows and manifest say ``consistent``."""
    path = write_window(base, spec)
    manifest = json.loads(Path(path).read_text())
    manifest["backfill"] = {"consistent_lsn": lsn_hex(consistent), "method": "snapshot_isolation"}
    Path(path).write_text(json.dumps(manifest))
    return path


@pytest.mark.spark
def test_a_dropped_column_keeps_its_last_value_and_an_added_one_gets_the_back_filled_value(
    spark, base, namespace, table
):
    log = ChangeLog(start=0x100)
    first = flatten(
        log.insert(id=i, name=n, amount=decimal.Decimal(i)) for i, n in ((1, "a"), (2, "b"), (3, "c"))
    )
    run(spark, namespace, write_window(base, WindowSpec("dbo_orders", 0x100, 0x1FF, first)))

    # one run: amount changes, then DROP COLUMN amount and ADD loyalty at 0x280 (the old instance's part after
    # the DDL carries neither), then the blind spot's keys read again at 0x400 with the new columns
    log = ChangeLog(start=0x200)
    key1 = {"id": 1, "name": "a", "amount": decimal.Decimal(1)}
    before = write_window(
        base, WindowSpec("dbo_orders", 0x200, 0x27F, log.update(key1, amount=decimal.Decimal(10)))
    )
    log = ChangeLog(start=0x280)
    rows = flatten(
        [
            log.update({"id": 1, "name": "a"}, name="a2"),
            log.update({"id": 2, "name": "b"}, name="b2"),
            log.insert(id=4, name="d"),
        ]
    )
    after = write_window(base, WindowSpec("dbo_orders", 0x280, 0x2FF, rows, columns=(INT_KEY, NAME)))
    reread = [
        log.transaction((UPDATE_AFTER, {"id": 1, "name": "a2", "loyalty": 5}))[0],
        log.transaction((UPDATE_AFTER, {"id": 2, "name": "b2", "loyalty": None}))[0],
        log.transaction((UPDATE_AFTER, {"id": 4, "name": "d", "loyalty": 7}))[0],
    ]
    reread = [type(r)(0x400, 0x400, r.operation, r.values) for r in reread]
    backfill = _backfill(
        base, WindowSpec("dbo_orders", 0x281, 0x2FF, reread, columns=(INT_KEY, NAME, LOYALTY)), 0x400
    )
    result = run(spark, namespace, backfill, after, before)
    assert result[table]["status"] == "committed"

    got = {r.id: (r.name, r.amount, r.loyalty) for r in spark.table(table).collect()}
    assert got == {
        1: ("a2", decimal.Decimal("10.00"), 5),  # changed before the DROP: that value stays
        2: ("b2", decimal.Decimal("2.00"), None),  # changed only after it: the value it had stays
        3: ("c", decimal.Decimal("3.00"), None),
        4: ("d", None, 7),
    }


def _name_window(base: Path, start: int, name_column: Column, **row: Any) -> str:
    """A window ``start``..``start + 0xFF`` inserting ``row``, with ``name_column`` as the name column."""
    log = ChangeLog(start=start)
    columns = (INT_KEY, name_column, AMOUNT)
    spec = WindowSpec("dbo_orders", start, start + 0xFF, log.insert(**row), columns=columns)
    return write_window(base, spec)


@pytest.mark.spark
def test_a_widened_string_is_recorded_so_a_later_narrowing_below_the_new_width_is_refused(
    spark, base, namespace, table
):
    narrow = Column("name", "varchar", pa.string(), max_length=20)
    run(spark, namespace, _name_window(base, 0x100, narrow, id=1, name="a"))

    wide = Column("name", "varchar", pa.string(), max_length=50)
    run(spark, namespace, _name_window(base, 0x200, wide, id=2, name="b"))
    comments = {f.name: f.metadata.get("comment") for f in spark.table(table).schema.fields}
    assert comments["name"] == "SQL Server varchar(50)"

    between = Column("name", "varchar", pa.string(), max_length=30)  # wider than the first, narrower than now
    third = _name_window(base, 0x300, between, id=3, name="c")
    with merge_fails(table, SchemaEvolutionError, match=r"narrowed \(varchar\(50\) -> varchar\(30\)\)"):
        run(spark, namespace, third)
