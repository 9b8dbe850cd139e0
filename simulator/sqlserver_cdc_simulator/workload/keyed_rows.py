"""The model rows of one table with O(1) random choice, insert and delete."""

from __future__ import annotations

import random

from sqlserver_cdc_simulator.workload.schema import Key, Row


class KeyedRows:
    """
    The model rows of one table with O(1) random choice, insert and delete (wraps the model dict).

    :param rows: the model rows, keyed by primary-key tuple; changed in place.
    """

    def __init__(self, rows: dict[Key, Row]) -> None:
        self._rows = rows
        self._keys = list(rows)
        self._positions = {key: i for i, key in enumerate(self._keys)}

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def get(self, key: Key) -> Row:
        """The row with primary key ``key``."""
        return self._rows[key]

    def choice(self, rng: random.Random) -> Key:
        """Draw the key of one row."""
        return self._keys[rng.randrange(len(self._keys))]

    def put(self, key: Key, row: Row) -> None:
        """Insert or replace the row with primary key ``key``."""
        if key not in self._rows:
            self._positions[key] = len(self._keys)
            self._keys.append(key)
        self._rows[key] = row

    def discard(self, key: Key) -> Row | None:
        """Remove the row with primary key ``key``; return it (None if there was none)."""
        row = self._rows.pop(key, None)
        if row is None:
            return None
        i = self._positions.pop(key)
        last = self._keys.pop()
        if i < len(self._keys):
            self._keys[i] = last
            self._positions[last] = i
        return row
