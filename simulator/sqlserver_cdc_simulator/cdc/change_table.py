"""``cdc.<capture_instance>_CT``: the change rows of one capture instance, in change order."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

UPDATE_OLD = 3


class ChangeTable:
    """
    Change rows kept as ``(start_lsn, seqval, operation, update_mask, *captured_values)`` tuples.

    That is exactly the row shape of ``fn_cdc_get_all_changes_<ci>(..., N'all update old')``, so a
    window is a list slice. The capture job appends whole transactions in commit order, so the
    rows stay sorted by ``(__$start_lsn, __$seqval, __$operation)`` and windows are found by
    bisection. ``__$command_id`` is kept alongside.
    """

    def __init__(self) -> None:
        self._rows: list[tuple[Any, ...]] = []
        self._starts: list[bytes] = []
        self._command_ids: list[int] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def append_transaction(self, rows: Sequence[tuple[Any, ...]], command_ids: Sequence[int]) -> None:
        """Append the rows of one committed transaction (all with the same, highest ``start_lsn``)."""
        if not rows:
            return
        with self._lock:
            if self._starts and rows[0][0] < self._starts[-1]:
                raise ValueError("change rows must be appended in commit LSN order")
            self._rows.extend(rows)
            self._starts.extend(row[0] for row in rows)
            self._command_ids.extend(command_ids)

    def append_rows(self, rows: Sequence[tuple[Any, ...]], command_ids: Sequence[int]) -> None:
        """Append rows of several transactions at once (restoring a saved change table), in order."""
        with self._lock:
            self._rows.extend(rows)
            self._starts.extend(row[0] for row in rows)
            self._command_ids.extend(command_ids)

    def convert_column(self, position: int, convert: Callable[[Any], Any]) -> list[tuple[Any, ...]]:
        """
        Replace the value at ``position`` of every row by ``convert(value)`` (an altered column type).

        All or nothing: when ``convert`` raises, the rows stay as they were.

        :return: the rows before, for :meth:`restore_rows`.
        """
        with self._lock:
            before = self._rows
            self._rows = [(*row[:position], convert(row[position]), *row[position + 1 :]) for row in before]
            return before

    def restore_rows(self, rows: list[tuple[Any, ...]]) -> None:
        """Put back the rows :meth:`convert_column` returned (its transaction failed later on)."""
        with self._lock:
            if len(rows) == len(self._rows):
                self._rows = rows

    def window(
        self, from_lsn: bytes, to_lsn: bytes, include_update_old: bool = True
    ) -> list[tuple[Any, ...]]:
        """Rows with ``from_lsn <= __$start_lsn <= to_lsn``; without update before-images unless asked."""
        with self._lock:
            lo = bisect.bisect_left(self._starts, from_lsn)
            hi = bisect.bisect_right(self._starts, to_lsn)
            rows = self._rows[lo:hi]
        if include_update_old:
            return rows
        return [row for row in rows if row[2] != UPDATE_OLD]

    def delete_below(self, low_water_mark: bytes) -> int:
        """Delete rows with ``__$start_lsn < low_water_mark``; return how many were deleted."""
        with self._lock:
            cut = bisect.bisect_left(self._starts, low_water_mark)
            if cut:
                del self._rows[:cut]
                del self._starts[:cut]
                del self._command_ids[:cut]
            return cut

    def table_rows(self) -> Iterator[tuple[Any, ...]]:
        """Rows in the change table's own column order (``__$end_lsn`` NULL, ``__$command_id`` last)."""
        with self._lock:
            rows = list(zip(self._rows, self._command_ids, strict=True))
        for row, command_id in rows:
            yield (row[0], None, row[1], row[2], row[3], *row[4:], command_id)
