"""From a source-row change to change-table rows: masks, before-images of LOB columns, dropped columns."""

from __future__ import annotations

import datetime as dt

import pytest

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.cdc.capture_instance import (
    CapturedColumn,
    CaptureInstance,
    ChangeRowBuilder,
    IndexColumn,
    RowChange,
    parse_column_list,
)
from sqlserver_cdc_simulator.cdc.change_table import ChangeTable
from sqlserver_cdc_simulator.cdc.lsn import make_lsn

COLUMNS = ("id", "customer", "amount", "notes", "updated")
COMMIT = make_lsn(0x2D, 0x588, 3)
SEQ = make_lsn(0x2D, 0x588, 2)


@pytest.fixture
def instance() -> CaptureInstance:
    types = [
        T.make_type("int"),
        T.nvarchar(50),
        T.decimal_type(18, 4),
        T.make_type("nvarchar", ["max"]),
        T.make_type("datetime2", ["3"]),
    ]
    return CaptureInstance(
        name="dbo_orders",
        source_schema="dbo",
        source_table="orders",
        source_object_id=100,
        object_id=200,
        captured_columns=[
            CapturedColumn(n, i, t, i) for i, (n, t) in enumerate(zip(COLUMNS, types, strict=True), 1)
        ],
        index_name="PK_orders",
        index_columns=[IndexColumn("id", 1, 1)],
        supports_net_changes=True,
        role_name=None,
        create_date=dt.datetime(2026, 1, 1),
        enable_lsn=make_lsn(0x2D, 0x500, 1),
    )


def test_insert_and_delete_have_full_masks(instance):
    builder = ChangeRowBuilder(instance)
    row = (1, "acme", 10, "first", 5)
    assert builder.rows(RowChange("insert", SEQ, COLUMNS, None, row), COMMIT) == [
        (COMMIT, SEQ, 2, b"\x1f", *row)
    ]
    assert builder.rows(RowChange("delete", SEQ, COLUMNS, row, None), COMMIT) == [
        (COMMIT, SEQ, 1, b"\x1f", *row)
    ]


def test_update_mask_and_max_column_before_image(instance):
    # measured on SQL Server: SET amount -> mask 0x04, unchanged nvarchar(max) NULL in the before-image only
    builder = ChangeRowBuilder(instance)
    before, after = (1, "acme", 10, "first", 5), (1, "acme", 99, "first", 5)
    old, new = builder.rows(RowChange("update", SEQ, COLUMNS, before, after), COMMIT)
    assert old == (COMMIT, SEQ, 3, b"\x04", 1, "acme", 10, None, 5)
    assert new == (COMMIT, SEQ, 4, b"\x04", 1, "acme", 99, "first", 5)


def test_changed_max_column_keeps_its_before_image(instance):
    builder = ChangeRowBuilder(instance)
    old, _ = builder.rows(RowChange("update", SEQ, COLUMNS, (1, "a", 1, "x", 5), (1, "a", 1, "y", 5)), COMMIT)
    assert old[3] == b"\x08" and old[7] == "x"


def test_added_column_is_ignored_and_dropped_column_is_null(instance):
    builder = ChangeRowBuilder(instance)
    widened = ("id", "customer", "amount", "notes", "updated", "region")
    assert builder.rows(RowChange("insert", SEQ, widened, None, (1, "a", 1, "n", 5, "eu")), COMMIT)[0][
        4:
    ] == (1, "a", 1, "n", 5)
    narrowed = ("id", "customer", "notes", "updated")
    assert builder.rows(RowChange("insert", SEQ, narrowed, None, (1, "a", "n", 5)), COMMIT)[0][4:] == (
        1,
        "a",
        None,
        "n",
        5,
    )


def test_change_table_windows_and_cleanup():
    table = ChangeTable()
    for block in range(1, 5):
        commit = make_lsn(1, block, 9)
        table.append_transaction(
            [
                (commit, make_lsn(1, block, 1), 3, b"\x01", block),
                (commit, make_lsn(1, block, 1), 4, b"\x01", block),
            ],
            [1, 1],
        )
    assert len(table.window(make_lsn(1, 2, 9), make_lsn(1, 3, 9))) == 4
    assert [r[2] for r in table.window(make_lsn(1, 2, 9), make_lsn(1, 3, 9), include_update_old=False)] == [
        4,
        4,
    ]
    assert table.window(make_lsn(1, 3, 10), make_lsn(1, 3, 11)) == []
    assert table.delete_below(make_lsn(1, 3, 0)) == 4
    first = next(table.table_rows())
    assert first[1] is None and first[-1] == 1 and first[0] == make_lsn(1, 3, 9)
    with pytest.raises(ValueError):
        table.append_transaction([(make_lsn(1, 1, 9), make_lsn(1, 1, 1), 2, b"\x01", 0)], [1])


def test_parse_column_list():
    assert parse_column_list('id, [my col], "a,b" ,x') == ["id", "my col", "a,b", "x"]
    assert parse_column_list("[a]]b]") == ["a]b"]
    with pytest.raises(ValueError):
        parse_column_list("[oops")
