"""The net-effect rule in plain Python: order of operations, key changes, many changes in one transaction."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.window.net_effect import (
    DELETE,
    INSERT,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    Change,
    ChangePosition,
    net_effect,
)


def apply_to_rows(
    rows: Mapping[tuple[Any, ...], Change], changes: Mapping[tuple[Any, ...], Change], *, hard_deletes: bool
) -> dict[tuple[Any, ...], Change]:
    """Apply net-effect changes to a target the way the merge job does (only newer positions win): the model the tests check.

    :param rows: the target: key -> the change that last wrote the row (deleted rows kept when soft).
    :param changes: output of ``net_effect``.
    :param hard_deletes: drop deleted keys instead of keeping them flagged.
    """
    result = dict(rows)
    for key, change in changes.items():
        current = result.get(key)
        if current is not None and change.position <= current.position:
            continue
        if change.deletes and hard_deletes:
            result.pop(key, None)
        else:
            result[key] = change
    return result


def change(lsn: int, seq: int, op: int, **values: object) -> Change:
    return Change(ChangePosition(lsn.to_bytes(10, "big"), seq.to_bytes(10, "big"), op), values)


def state(result: dict) -> dict:
    """key -> (deleted, values) for readable assertions."""
    return {key[0]: (c.deletes, dict(c.values)) for key, c in result.items()}


#: Changes of one window, and the net effect per key: (deleted, values).
SCENARIOS = [
    pytest.param(
        [
            change(1, 1, INSERT, id=1, v="a"),
            change(2, 1, UPDATE_BEFORE, id=1, v="a"),
            change(2, 1, UPDATE_AFTER, id=1, v="b"),
            change(3, 1, DELETE, id=1, v="b"),
        ],
        {1: (True, {"id": 1, "v": "b"})},
        id="insert_update_delete_ends_deleted",
    ),
    pytest.param(
        [change(1, 1, DELETE, id=1, v="old"), change(2, 1, INSERT, id=1, v="new")],
        {1: (False, {"id": 1, "v": "new"})},
        id="delete_then_reinsert_ends_present_with_new_values",
    ),
    # before-image and after-image share (start_lsn, seqval); the after-image sorts last and wins.
    pytest.param(
        [change(5, 7, UPDATE_AFTER, id=1, v="after"), change(5, 7, UPDATE_BEFORE, id=1, v="before")],
        {1: (False, {"id": 1, "v": "after"})},
        id="update_before_image_values_are_never_used",
    ),
    pytest.param(
        [
            change(1, 1, INSERT, id=1, v="a"),
            change(2, 1, UPDATE_BEFORE, id=1, v="a"),
            change(2, 1, UPDATE_AFTER, id=10, v="a"),
        ],
        {1: (True, {"id": 1, "v": "a"}), 10: (False, {"id": 10, "v": "a"})},
        id="primary_key_update_as_before_and_after_image_deletes_old_key",
    ),
    pytest.param(
        [change(2, 1, DELETE, id=1, v="a"), change(2, 2, INSERT, id=10, v="a")],
        {1: (True, {"id": 1, "v": "a"}), 10: (False, {"id": 10, "v": "a"})},
        id="primary_key_update_as_delete_and_insert_deletes_old_key",
    ),
    # UPDATE t SET id = 3 - id WHERE id IN (1, 2): each key is both an old and a new key.
    pytest.param(
        [
            change(4, 1, UPDATE_BEFORE, id=1, v="one"),
            change(4, 1, UPDATE_AFTER, id=2, v="one"),
            change(4, 2, UPDATE_BEFORE, id=2, v="two"),
            change(4, 2, UPDATE_AFTER, id=1, v="two"),
        ],
        {1: (False, {"id": 1, "v": "two"}), 2: (True, {"id": 2, "v": "two"})},
        id="key_swap_inside_one_statement",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), SCENARIOS)
def test_net_effect_per_key(changes: list[Change], expected: dict) -> None:
    assert state(net_effect(changes, ["id"])) == expected


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_result_does_not_depend_on_input_order(order: tuple[int, ...]) -> None:
    changes = [
        change(1, 1, INSERT, id=1, v="a"),
        change(2, 1, UPDATE_BEFORE, id=1, v="a"),
        change(2, 1, UPDATE_AFTER, id=1, v="b"),
        change(3, 1, INSERT, id=2, v="x"),
    ]
    shuffled = [changes[i] for i in order]
    assert state(net_effect(shuffled, ["id"])) == {
        1: (False, {"id": 1, "v": "b"}),
        2: (False, {"id": 2, "v": "x"}),
    }


def test_one_key_changed_many_times_in_one_transaction_keeps_the_last_seqval() -> None:
    changes = [change(9, 1, INSERT, id=1, v=0)]
    for seq in range(2, 50):
        changes += [change(9, seq, UPDATE_BEFORE, id=1, v=seq - 1), change(9, seq, UPDATE_AFTER, id=1, v=seq)]
    changes.reverse()
    assert state(net_effect(changes, ["id"])) == {1: (False, {"id": 1, "v": 49})}


def test_seqval_orders_before_operation_and_lsn_before_seqval() -> None:
    changes = [change(1, 9, INSERT, id=1, v="lsn1"), change(2, 1, DELETE, id=1, v="lsn2")]
    assert state(net_effect(changes, ["id"]))[1][0] is True
    changes = [change(3, 2, DELETE, id=1, v="seq2"), change(3, 1, INSERT, id=1, v="seq1")]
    assert state(net_effect(changes, ["id"]))[1][0] is True


def test_lsn_bytes_compare_unsigned() -> None:
    high = Change(ChangePosition(b"\x00" * 9 + b"\x80", b"\x00" * 10, INSERT), {"id": 1, "v": "high"})
    low = Change(ChangePosition(b"\x00" * 9 + b"\x7f", b"\x00" * 10, DELETE), {"id": 1, "v": "low"})
    assert state(net_effect([high, low], ["id"])) == {1: (False, {"id": 1, "v": "high"})}


def test_composite_keys() -> None:
    changes = [
        change(1, 1, INSERT, a=1, b=1, v="x"),
        change(1, 2, INSERT, a=1, b=2, v="y"),
        change(2, 1, DELETE, a=1, b=1, v="x"),
    ]
    result = net_effect(changes, ["a", "b"])
    assert {k: c.deletes for k, c in result.items()} == {(1, 1): True, (1, 2): False}


def test_bad_input_is_rejected_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="unknown __\\$operation 7"):
        net_effect([change(1, 1, 7, id=1)], ["id"])
    with pytest.raises(ValueError, match="no value for key column 'id'"):
        net_effect([change(1, 1, INSERT, other=1)], ["id"])
    with pytest.raises(ValueError, match="at least one key column"):
        net_effect([], [])


def test_apply_only_newer_positions_so_replays_and_old_windows_change_nothing() -> None:
    older = net_effect([change(1, 1, INSERT, id=1, v="a"), change(1, 2, INSERT, id=2, v="b")], ["id"])
    newer = net_effect([change(2, 1, DELETE, id=1, v="a"), change(2, 2, UPDATE_AFTER, id=2, v="c")], ["id"])
    in_order = apply_to_rows(apply_to_rows({}, older, hard_deletes=False), newer, hard_deletes=False)
    out_of_order = apply_to_rows(apply_to_rows({}, newer, hard_deletes=False), older, hard_deletes=False)
    replayed = apply_to_rows(apply_to_rows(in_order, older, hard_deletes=False), newer, hard_deletes=False)
    assert state(in_order) == state(out_of_order) == state(replayed)
    assert state(in_order) == {1: (True, {"id": 1, "v": "a"}), 2: (False, {"id": 2, "v": "c"})}


def test_hard_deletes_lose_the_tombstone_so_an_older_window_resurrects_the_row() -> None:
    # This is why --delete-mode hard requires windows in LSN order.
    older = net_effect([change(1, 1, INSERT, id=1, v="a")], ["id"])
    newer = net_effect([change(2, 1, DELETE, id=1, v="a")], ["id"])
    in_order = apply_to_rows(apply_to_rows({}, older, hard_deletes=True), newer, hard_deletes=True)
    out_of_order = apply_to_rows(apply_to_rows({}, newer, hard_deletes=True), older, hard_deletes=True)
    assert in_order == {}
    assert list(out_of_order) == [(1,)]
