"""``sort_order`` (the engine's ORDER BY) against a plain lexicographic comparison of SQL Server's rules."""

from __future__ import annotations

import functools
import random
from decimal import Decimal
from typing import Any

import pytest

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.collation import ci_key
from sqlserver_cdc_simulator.sql.query import may_hold_text, sort_order
from sqlserver_cdc_simulator.values import DateTimeOffset


def _reference_order(columns: list[list[Any]], descending: list[bool]) -> list[int]:
    """Row positions by a comparison function: NULL lowest, strings by ci_key, DESC flips, ties stable."""

    def compare(i: int, j: int) -> int:
        for values, desc in zip(columns, descending, strict=True):
            x, y = ci_key(values[i]), ci_key(values[j])
            if x == y:
                continue
            if x is None:
                result = -1
            elif y is None:
                result = 1
            else:
                result = -1 if x < y else 1
            return -result if desc else result
        return 0

    return sorted(range(len(columns[0])), key=functools.cmp_to_key(compare))


_VALUE_POOLS: dict[str, list[Any]] = {
    "text": ["a", "A", "a  ", "b", "B", "ab", "Ab ", "", " ", "ä", "Ä", None],
    "int": [-3, 0, 1, 1, 2, 10, None],
    "decimal": [Decimal("1.50"), Decimal("1.5"), Decimal("-2"), Decimal("0.001"), None],
    "binary": [b"", b"\x00", b"\x00\x00", b"\x01", b"\xff", None],
    "dto": [DateTimeOffset(100, 0), DateTimeOffset(100, 60), DateTimeOffset(50, -30), None],
}


@pytest.mark.parametrize("seed", range(40))
def test_sort_order_matches_the_comparison_rules(seed: int) -> None:
    rng = random.Random(seed)
    rows = rng.randint(0, 60)
    kinds = [rng.choice(list(_VALUE_POOLS)) for _ in range(rng.randint(1, 4))]
    columns = [[rng.choice(_VALUE_POOLS[kind]) for _ in range(rows)] for kind in kinds]
    descending = [rng.random() < 0.5 for _ in kinds]
    text = [kind == "text" for kind in kinds]
    assert sort_order(columns, descending, text) == _reference_order(columns, descending)


def test_sort_order_keeps_input_order_of_ties_in_both_directions() -> None:
    names = ["b", "A", "a ", "B", None, "a"]
    assert sort_order([names], [False], [True]) == [4, 1, 2, 5, 0, 3]
    assert sort_order([names], [True], [True]) == [0, 3, 1, 2, 5, 4]


def test_sort_order_of_no_rows_and_no_keys() -> None:
    assert sort_order([[]], [False], [True]) == []
    assert sort_order([], [], []) == []


@pytest.mark.parametrize(
    ("sql_type", "expected"),
    [
        (T.INT, False),
        (T.SqlType("datetime2", scale=7), False),
        (T.SqlType("varbinary", length=10), False),
        (T.SqlType("nvarchar", length=10), True),
        (T.SqlType("sql_variant"), True),
        (None, True),
    ],
)
def test_only_types_that_cannot_hold_strings_skip_the_collation_key(
    sql_type: T.SqlType | None, expected: bool
) -> None:
    assert may_hold_text(sql_type) is expected
