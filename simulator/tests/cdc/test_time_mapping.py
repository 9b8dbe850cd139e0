"""cdc.lsn_time_mapping semantics: max LSN, the four relational operators, LSN -> time, retention."""

from __future__ import annotations

import datetime as dt

import pytest

from sqlserver_cdc_simulator.cdc.lsn import make_lsn
from sqlserver_cdc_simulator.cdc.time_mapping import (
    LsnTimeMapping,
    LsnTimeMappingRow,
)

T0 = dt.datetime(2026, 1, 1, 10, 0, 0)


def _row(block: int, seconds: float) -> LsnTimeMappingRow:
    when = T0 + dt.timedelta(seconds=seconds)
    return LsnTimeMappingRow(make_lsn(1, block, 1), when, when, b"\x00\x00\x01", make_lsn(1, block, 0))


@pytest.fixture
def mapping() -> LsnTimeMapping:
    m = LsnTimeMapping()
    # two commits share the 10 s time, as two commits inside one datetime tick do
    for block, seconds in [(1, 0), (2, 10), (3, 10), (4, 20)]:
        m.append(_row(block, seconds))
    return m


def test_max_lsn_is_largest_start_lsn_or_null(mapping):
    assert mapping.max_lsn() == make_lsn(1, 4, 1)
    assert LsnTimeMapping().max_lsn() is None


def test_rows_must_be_appended_in_lsn_order(mapping):
    with pytest.raises(ValueError):
        mapping.append(_row(2, 30))


@pytest.mark.parametrize(
    ("operator", "seconds", "expected_block"),
    [
        ("largest less than", 10, 1),
        ("largest less than or equal", 10, 3),  # largest LSN of the tied group
        ("smallest greater than", 10, 4),
        ("smallest greater than or equal", 10, 2),  # smallest LSN of the tied group
        ("largest less than or equal", 15, 3),
        ("smallest greater than", 15, 4),
        ("largest less than", 0, None),
        ("smallest greater than", 20, None),
        ("smallest greater than or equal", -5, 1),
        ("largest less than or equal", 99, 4),
    ],
)
def test_map_time_to_lsn_four_operators(mapping, operator, seconds, expected_block):
    result = mapping.map_time_to_lsn(operator, T0 + dt.timedelta(seconds=seconds))
    assert result == (None if expected_block is None else make_lsn(1, expected_block, 1))


def test_map_time_to_lsn_operator_spelling(mapping):
    assert mapping.map_time_to_lsn("  Largest Less Than Or Equal ", T0) == make_lsn(1, 1, 1)
    assert mapping.map_time_to_lsn("closest to", T0) is None
    assert mapping.map_time_to_lsn(None, T0) is None
    assert mapping.map_time_to_lsn("largest less than", None) is None


def test_map_lsn_to_time(mapping):
    assert mapping.map_lsn_to_time(make_lsn(1, 2, 1)) == T0 + dt.timedelta(seconds=10)
    # between rows: the latest commit at or below it
    assert mapping.map_lsn_to_time(make_lsn(1, 3, 7)) == T0 + dt.timedelta(seconds=10)
    assert mapping.map_lsn_to_time(make_lsn(1, 0, 0)) is None
    assert mapping.map_lsn_to_time(None) is None


def test_retention_low_water_mark(mapping):
    # base = 20 s; keeping 0 minutes keeps only the rows at the base time
    assert mapping.retention_low_water_mark(0) == make_lsn(1, 4, 1)
    assert mapping.retention_low_water_mark(1) == make_lsn(1, 1, 1)
    assert LsnTimeMapping().retention_low_water_mark(5) is None


def test_smallest_lsn_with_same_time_and_delete_below(mapping):
    assert mapping.smallest_lsn_with_time_of(make_lsn(1, 3, 1)) == make_lsn(1, 2, 1)
    with pytest.raises(KeyError):
        mapping.smallest_lsn_with_time_of(make_lsn(1, 3, 2))
    assert mapping.delete_below(make_lsn(1, 3, 1)) == 2
    assert [r.start_lsn for r in mapping.rows()] == [make_lsn(1, 3, 1), make_lsn(1, 4, 1)]
