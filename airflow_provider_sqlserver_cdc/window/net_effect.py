"""The net-effect rule: what one key looks like after a sequence of CDC changes.

This module is the plain-Python statement of the rule and defines the operation codes;
``spark.merge.net_effect_frame`` applies the same rule to a Spark DataFrame (``tests/spark/merge``
checks that both agree on random change streams).

The rule:

* changes are ordered by their *position* ``(__$start_lsn, __$seqval, __$operation)``;
* for every key, the change with the highest position wins;
* a winning insert (2) or update after-image (4) leaves the key present with the change's values;
* a winning delete (1) leaves the key deleted;
* a winning update before-image (3) also leaves the key deleted. Its values are never used: when an
  update keeps the key, the after-image (4) of the same ``(start_lsn, seqval)`` sorts after it and
  wins; when an update changes the primary key, the before-image carries the *old* key and nothing
  later mentions that key, so the old key ends deleted while the new key is present.

A change is applied to a target row only when its position is newer than the row's, which makes
re-applying a window, or applying an older window after a newer one, a no-op.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DELETE = 1
INSERT = 2
UPDATE_BEFORE = 3
UPDATE_AFTER = 4

#: Operations whose winning change leaves the key deleted.
DELETING_OPERATIONS = frozenset({DELETE, UPDATE_BEFORE})
VALID_OPERATIONS = frozenset({DELETE, INSERT, UPDATE_BEFORE, UPDATE_AFTER})
#: The name of each operation in a manifest's ``operation_counts``.
OPERATION_NAMES = {
    DELETE: "delete",
    INSERT: "insert",
    UPDATE_BEFORE: "update_before",
    UPDATE_AFTER: "update_after",
}


@dataclass(frozen=True, order=True)
class ChangePosition:
    """Where a change sits in the log: commit LSN, sequence inside the transaction, operation."""

    start_lsn: bytes
    seqval: bytes
    operation: int


@dataclass(frozen=True)
class Change:
    """One row of a CDC change table: its position and the captured column values."""

    position: ChangePosition
    values: Mapping[str, Any] = field(compare=False)

    @property
    def deletes(self) -> bool:
        """Whether this change, when it wins, leaves its key deleted."""
        return self.position.operation in DELETING_OPERATIONS


def key_of(change: Change, key_columns: Sequence[str]) -> tuple[Any, ...]:
    """Return the key of a change as a tuple of its key-column values."""
    try:
        return tuple(change.values[column] for column in key_columns)
    except KeyError as missing:
        raise ValueError(f"change at {change.position} has no value for key column {missing}") from None


def net_effect(changes: Iterable[Change], key_columns: Sequence[str]) -> dict[tuple[Any, ...], Change]:
    """Return the winning change per key.

    :param changes: the changes of one or several windows, in any order.
    :param key_columns: names of the key columns, in key order.
    :return: key tuple -> the change with the highest position for that key; ``Change.deletes``
        tells whether the key ends deleted.
    """
    if not key_columns:
        raise ValueError("net_effect needs at least one key column")
    winners: dict[tuple[Any, ...], Change] = {}
    for change in changes:
        if change.position.operation not in VALID_OPERATIONS:
            raise ValueError(f"unknown __$operation {change.position.operation} at {change.position}")
        key = key_of(change, key_columns)
        current = winners.get(key)
        if current is None or change.position > current.position:
            winners[key] = change
    return winners
