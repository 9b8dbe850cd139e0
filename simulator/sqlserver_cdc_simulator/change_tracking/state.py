"""Change tracking state of a database and the net-change rules of CHANGETABLE(CHANGES …).

Everything here is plain Python (picklable, kept in ``database.flags``) so it survives ``--data``
restarts with the rest of the database. A reader sees the state as of its snapshot: every entry
carries the engine's commit sequence number of the transaction that made it, and cleanup marks
carry the sequence number at which they happened.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

STATE_KEY = "change_tracking"

#: CHANGE_RETENTION units as sys.change_tracking_databases numbers them
RETENTION_UNITS = {"MINUTES": (1, 1), "HOURS": (2, 60), "DAYS": (3, 1440)}


@dataclass(frozen=True, slots=True)
class ChangeEntry:
    """One tracked row change: the key, the operation and the version of its transaction.

    :param seq: the engine's commit sequence number of the transaction (what snapshots compare).
    :param version: the change tracking version of the transaction.
    :param key: the primary key values in collation-comparable form (grouping).
    :param key_values: the primary key values as stored.
    :param operation: ``I``, ``U`` or ``D``.
    :param columns: column ids an update changed (``U`` only).
    :param context: the WITH CHANGE_TRACKING_CONTEXT of the statement that made it, if any.
    """

    seq: int
    version: int
    key: tuple[Any, ...]
    key_values: tuple[Any, ...]
    operation: str
    columns: frozenset[int] = frozenset()
    context: bytes | None = None


@dataclass(frozen=True, slots=True)
class NetChange:
    """One row of CHANGETABLE(CHANGES …)."""

    version: int
    creation_version: int | None
    operation: str
    columns: bytes | None
    key_values: tuple[Any, ...]
    context: bytes | None = None


@dataclass
class TrackedTable:
    """A table with change tracking enabled."""

    object_id: int
    key_columns: tuple[str, ...]
    track_columns_updated: bool
    begin_version: int
    enabled_seq: int
    #: (seq, min_valid_version): the enable, then every cleanup or truncate, oldest first
    min_valid_marks: list[tuple[int, int]] = field(default_factory=list)
    cleanup_version: int = 0
    entries: list[ChangeEntry] = field(default_factory=list)

    def min_valid_version(self, seq: int) -> int:
        """CHANGE_TRACKING_MIN_VALID_VERSION as a reader with snapshot *seq* sees it."""
        value = self.begin_version
        for mark_seq, version in self.min_valid_marks:
            if mark_seq <= seq:
                value = version
        return value


@dataclass
class ChangeTrackingDatabase:
    """Change tracking of one database: settings, versions and tracked tables."""

    retention_value: int = 2
    retention_units: str = "DAYS"
    auto_cleanup: bool = True
    tables: dict[int, TrackedTable] = field(default_factory=dict)
    #: (seq, version, commit time in UTC ticks, transaction id) of every retained tracked commit
    commits: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: version and seq of the newest commit that cleanup removed from ``commits``
    floor_version: int = 0
    version: int = 0
    #: WITH CHANGE_TRACKING_CONTEXT of row changes not committed yet, by their LSN (recording.py takes them)
    contexts: dict[bytes, bytes] = field(default_factory=dict)

    @property
    def retention_minutes(self) -> int:
        return self.retention_value * RETENTION_UNITS[self.retention_units][1]

    def current_version(self, seq: int) -> int:
        """CHANGE_TRACKING_CURRENT_VERSION as a reader with snapshot *seq* sees it."""
        i = bisect.bisect_right(self.commits, (seq, float("inf")))
        return self.commits[i - 1][1] if i else self.floor_version


def state_of(database: Any) -> ChangeTrackingDatabase | None:
    """The change tracking state of *database*, or None when change tracking is off."""
    return database.flags.get(STATE_KEY)


def encode_columns(column_ids: Iterable[int]) -> bytes:
    """SYS_CHANGE_COLUMNS: the changed column ids, 4 bytes little-endian each, ascending."""
    return b"".join(i.to_bytes(4, "little") for i in sorted(column_ids))


def column_in_mask(column_id: int, mask: bytes | None) -> int:
    """CHANGE_TRACKING_IS_COLUMN_IN_MASK: 1 when *column_id* is in *mask* (a NULL mask means every column)."""
    if mask is None:
        return 1
    ids = {int.from_bytes(mask[i : i + 4], "little") for i in range(0, len(mask) - 3, 4)}
    return 1 if column_id in ids else 0


def net_changes(
    entries: Iterable[ChangeEntry],
    last_sync_version: int | None,
    seq: int,
    track_columns_updated: bool,
    non_key_column_ids: frozenset[int],
) -> list[NetChange]:
    """CHANGETABLE(CHANGES t, last_sync_version) for a reader with snapshot *seq*.

    One row per key changed after the baseline (every retained change when it is NULL), with the
    version of the key's last change and the operation relative to the baseline: ``I`` when the row
    did not exist at the baseline and exists now, ``D`` when it does not exist now, ``U`` otherwise
    (a delete followed by an insert of the same key is an update of every column). Rows come in
    version order, then key order.

    :param entries: the table's entries, in commit order.
    :param non_key_column_ids: the columns whose update SYS_CHANGE_COLUMNS can list.
    """
    per_key: dict[tuple[Any, ...], list[ChangeEntry]] = {}
    for e in entries:
        if e.seq <= seq:
            per_key.setdefault(e.key, []).append(e)
    rows = []
    for changes in per_key.values():
        after = [e for e in changes if last_sync_version is None or e.version > last_sync_version]
        if not after:
            continue
        existed = after[0].operation != "I"
        exists = after[-1].operation != "D"
        op = "D" if not exists else ("U" if existed else "I")
        creation = max((e.version for e in changes if e.operation == "I"), default=None)
        columns = None
        if op == "U" and track_columns_updated and all(e.operation == "U" for e in after):
            changed = frozenset().union(*(e.columns for e in after))
            if not non_key_column_ids <= changed:
                columns = encode_columns(changed)
        last = after[-1]
        rows.append(NetChange(last.version, creation, op, columns, last.key_values, last.context))
    rows.sort(key=lambda r: (r.version, _sortable(r.key_values)))
    return rows


def _sortable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is not None, v) for v in values)


def latest_change(entries: Iterable[ChangeEntry], key: tuple[Any, ...], seq: int) -> ChangeEntry | None:
    """The last change of *key* visible at snapshot *seq* (CHANGETABLE(VERSION …))."""
    found = None
    for e in entries:
        if e.seq <= seq and e.key == key:
            found = e
    return found
