"""``cdc.lsn_time_mapping`` and the functions that read it (max LSN, LSN <-> time, retention)."""

from __future__ import annotations

import bisect
import datetime as dt
import threading
from dataclasses import dataclass

RELATIONAL_OPERATORS = (
    "largest less than",
    "largest less than or equal",
    "smallest greater than",
    "smallest greater than or equal",
)

# tran_id of the rows the capture job writes in quiet periods (no change-table entries).
QUIET_PERIOD_TRAN_ID = b"\x00"


@dataclass(frozen=True)
class LsnTimeMappingRow:
    """One row of ``cdc.lsn_time_mapping`` (times are the server's local time, ``datetime``)."""

    start_lsn: bytes
    tran_begin_time: dt.datetime | None
    tran_end_time: dt.datetime
    tran_id: bytes
    tran_begin_lsn: bytes | None

    def as_tuple(self) -> tuple[object, ...]:
        """The row in the table's column order."""
        return (self.start_lsn, self.tran_begin_time, self.tran_end_time, self.tran_id, self.tran_begin_lsn)


class LsnTimeMapping:
    """The mapping rows of one database, kept in ``start_lsn`` order (the capture job appends in log order)."""

    COLUMNS = ("start_lsn", "tran_begin_time", "tran_end_time", "tran_id", "tran_begin_lsn")

    def __init__(self) -> None:
        self._rows: list[LsnTimeMappingRow] = []
        self._lsns: list[bytes] = []
        self._lock = threading.Lock()
        self._times_monotonic = True
        self._version = 0
        self._last_lookup: tuple[bytes, int, dt.datetime | None] | None = None

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def version(self) -> int:
        """A counter that changes whenever rows are added or removed (for caches)."""
        return self._version

    def rows(self) -> list[LsnTimeMappingRow]:
        """A snapshot of all rows in ``start_lsn`` order."""
        with self._lock:
            return list(self._rows)

    def append(self, row: LsnTimeMappingRow) -> None:
        """Add a row whose ``start_lsn`` is above every existing one."""
        with self._lock:
            if self._lsns and row.start_lsn <= self._lsns[-1]:
                raise ValueError("lsn_time_mapping rows must be appended in increasing start_lsn order")
            if self._rows and row.tran_end_time < self._rows[-1].tran_end_time:
                self._times_monotonic = False
            self._rows.append(row)
            self._lsns.append(row.start_lsn)
            self._version += 1

    def delete_below(self, lsn: bytes) -> int:
        """Remove rows with ``start_lsn < lsn``; return how many were removed."""
        with self._lock:
            cut = bisect.bisect_left(self._lsns, lsn)
            del self._rows[:cut]
            del self._lsns[:cut]
            self._version += 1
            return cut

    def clear(self) -> None:
        """Remove every row."""
        with self._lock:
            self._rows.clear()
            self._lsns.clear()
            self._times_monotonic = True
            self._version += 1

    def max_lsn(self) -> bytes | None:
        """``sys.fn_cdc_get_max_lsn()``: the largest ``start_lsn`` (NULL while the table is empty)."""
        with self._lock:
            return self._lsns[-1] if self._lsns else None

    def last_row(self) -> LsnTimeMappingRow | None:
        """The row with the largest ``start_lsn``."""
        with self._lock:
            return self._rows[-1] if self._rows else None

    def contains(self, lsn: bytes) -> bool:
        """Whether ``lsn`` is the ``start_lsn`` of a row."""
        with self._lock:
            i = bisect.bisect_left(self._lsns, lsn)
            return i < len(self._lsns) and self._lsns[i] == lsn

    def map_lsn_to_time(self, lsn: bytes | None) -> dt.datetime | None:
        """
        ``sys.fn_cdc_map_lsn_to_time``: ``tran_end_time`` of the row for ``lsn``.

        An LSN between two rows maps to the time of the largest ``start_lsn`` below it (the latest
        commit the capture process had seen at that point); below every row it is NULL.
        """
        if lsn is None:
            return None
        last = self._last_lookup
        if last is not None and last[0] == lsn and last[1] == self._version:
            return last[2]  # rows of one transaction share their start LSN: a one-entry cache pays off
        with self._lock:
            i = bisect.bisect_right(self._lsns, lsn)
            if i == 0:
                result = None
            elif self._times_monotonic:
                result = self._rows[i - 1].tran_end_time
            else:
                result = max(row.tran_end_time for row in self._rows[:i])
            self._last_lookup = (lsn, self._version, result)
            return result

    def map_time_to_lsn(
        self, relational_operator: str | None, tracking_time: dt.datetime | None
    ) -> bytes | None:
        """
        ``sys.fn_cdc_map_time_to_lsn``: the LSN whose ``tran_end_time`` satisfies the relation.

        ``largest ...`` returns the largest ``start_lsn`` with ``tran_end_time <`` (or ``<=``)
        ``tracking_time``; ``smallest ...`` the smallest with ``>`` (or ``>=``). NULL when no row
        qualifies, or for NULL arguments or an operator that is not one of the four.
        """
        if relational_operator is None or tracking_time is None:
            return None
        op = " ".join(relational_operator.lower().split())
        if op not in RELATIONAL_OPERATORS:
            return None
        with self._lock:
            rows = self._rows
            if op == "largest less than":
                candidates = [r.start_lsn for r in rows if r.tran_end_time < tracking_time]
                return max(candidates) if candidates else None
            if op == "largest less than or equal":
                candidates = [r.start_lsn for r in rows if r.tran_end_time <= tracking_time]
                return max(candidates) if candidates else None
            if op == "smallest greater than":
                candidates = [r.start_lsn for r in rows if r.tran_end_time > tracking_time]
                return min(candidates) if candidates else None
            candidates = [r.start_lsn for r in rows if r.tran_end_time >= tracking_time]
            return min(candidates) if candidates else None

    def smallest_lsn_with_time_of(self, lsn: bytes) -> bytes:
        """The smallest ``start_lsn`` sharing ``tran_end_time`` with the row of ``lsn`` (cleanup's adjustment)."""
        with self._lock:
            i = bisect.bisect_left(self._lsns, lsn)
            if i >= len(self._lsns) or self._lsns[i] != lsn:
                raise KeyError(lsn)
            end_time = self._rows[i].tran_end_time
            same = [r.start_lsn for r in self._rows if r.tran_end_time == end_time]
            return min(same)

    def retention_low_water_mark(self, retention_minutes: int) -> bytes | None:
        """
        The low-water mark the cleanup job derives from ``retention`` (minutes).

        The base is the commit time of the high-water mark (the row with the largest
        ``start_lsn``); the new low-water mark is the smallest ``start_lsn`` whose
        ``tran_end_time`` is not older than ``base - retention``. NULL while the table is empty.
        """
        with self._lock:
            if not self._rows:
                return None
            base = self._rows[-1].tran_end_time
            threshold = base - dt.timedelta(minutes=retention_minutes)
            candidates = [r.start_lsn for r in self._rows if r.tran_end_time >= threshold]
            return min(candidates)
