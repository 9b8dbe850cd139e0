"""The reconcile's digests, leaf bounds and bisection (pure), and its factory task and settings."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from airflow_provider_sqlserver_cdc.reconcile.digest import (
    canonical,
    combine,
    decode_key,
    differing_leaves,
    encode_key,
    leaf_of,
    leaf_runs,
    row_digest,
)


def test_values_as_spark_returns_them_digest_as_the_source_values() -> None:
    # Spark hands binary as bytearray and keeps a decimal's scale; the source side has bytes and the same scale
    assert row_digest([1, bytearray(b"\x00\xff"), Decimal("1.50")]) == row_digest(
        [1, b"\x00\xff", Decimal("1.5")]
    )
    assert canonical(dt.datetime(2026, 1, 2, 3, 4, 5)) == canonical(
        dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    )
    # values that print alike in other forms stay apart
    assert len({canonical(v) for v in (1, "1", 1.0, True, Decimal(1), None, "n", b"1")}) == 8
    assert row_digest(["a", "b"]) != row_digest(["ab", ""]) != row_digest(["b", "a"])
    with pytest.raises(TypeError, match="no canonical form"):
        canonical(object())


def test_summaries_combine_in_any_order_and_bisection_finds_the_leaves() -> None:
    rows = [row_digest([i, f"v{i}"]) for i in range(8)]
    leaves = [[1, d] for d in rows]
    assert combine(leaves) == combine(reversed(leaves))
    changed = [list(leaf) for leaf in leaves]
    changed[5] = [1, row_digest([5, "corrupt"])]
    changed[6] = [0, 0]
    found, compared = differing_leaves(leaves, changed)
    assert found == [5, 6]
    assert 1 < compared < 2 * len(leaves)  # the equal half is compared once, not leaf by leaf
    assert differing_leaves(leaves, leaves) == ([], 1)
    assert leaf_runs([6, 5, 2, 9]) == [(2, 2), (5, 6), (9, 9)]


def test_leaves_are_key_ranges_with_inclusive_lower_bounds() -> None:
    bounds = [(10, 1), (20, 0)]
    assert [leaf_of(bounds, k) for k in [(1, 5), (10, 0), (10, 1), (19, 9), (20, 0), (99, 0)]] == [
        0,
        0,
        1,
        1,
        2,
        2,
    ]
    key = (7, Decimal("1.20"), dt.date(2026, 1, 2), dt.datetime(2026, 1, 2, 3, 4, 5, 6), "x", b"\x01")
    assert decode_key(encode_key(key)) == key
