"""The applied state of an Iceberg target table: where it is recorded and how it is read back.

The state is, per capture instance, the applied LSN ranges and the max applied LSN. It is kept in
three places, read in this order (docs/maintenance.md gives the argument):

1. the snapshot summary of every merge commit: the full state, in the same commit as the data.
   The reader takes the newest snapshot of the current snapshot's retained ancestry that has it;
2. the same keys as table properties, with ``sqlserver-cdc.state-snapshot-id``, written after
   each merge commit and by the maintenance job before it expires snapshots. They are used when
   no retained ancestor has the summary (compaction added snapshots without it, and expiry removed
   the ones that had it);
3. a marker ``sqlserver-cdc.merge-started-at.<token>`` (the snapshot current when a merge started), set
   before a merge commits and removed by the property write after it. While it stands, the
   properties may lack that merge, so they are only trusted when the retained ancestry shows that
   the merge never committed.

When none of this gives an exact state for a table that has snapshots, reading fails with
``AppliedStateLostError`` instead of treating the table as new.

The functions take Iceberg's Java ``Table`` (through py4j), so the merge and maintenance jobs share them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, format_ranges, parse_ranges

#: Prefix of every snapshot-summary key and table property the provider owns.
STATE_PREFIX = "sqlserver-cdc."
SUMMARY_RANGES = STATE_PREFIX + "applied-lsn-ranges."
SUMMARY_MAX_LSN = STATE_PREFIX + "max-applied-lsn."
#: Table property: the snapshot whose applied state the property copy describes.
STATE_SNAPSHOT_PROPERTY = STATE_PREFIX + "state-snapshot-id"
#: Table properties ``<prefix><token>``, one per merge: set while it may commit; the snapshot current
#: when it started. One per merge, so concurrent merges never remove each other's.
MERGE_MARKER_PREFIX = STATE_PREFIX + "merge-started-at."
#: The marker's value when the table had no snapshot yet.
NO_SNAPSHOT = "none"


class AppliedStateLostError(MergeJobError):
    """The table has data but its applied state cannot be read exactly; merging would not be exactly once."""


def state_entries(mapping: Mapping[Any, Any]) -> dict[str, str]:
    """Return the applied-state entries (ranges and max LSN per capture instance) of a summary or properties.

    :param mapping: a snapshot summary or the table properties (a Java map or a Python mapping).
    """
    if hasattr(mapping, "keySet"):  # a Java map: copied in one call, not one call per key
        from pyspark import SparkContext

        mapping = json.loads(
            SparkContext._jvm.org.apache.iceberg.util.JsonUtil.mapper().writeValueAsString(mapping)
        )
    return {
        str(key): str(value)
        for key, value in mapping.items()
        if str(key).startswith(SUMMARY_RANGES) or str(key).startswith(SUMMARY_MAX_LSN)
    }


def entries_for(applied: Mapping[str, list[LsnRange]]) -> dict[str, str]:
    """Return the state entries that record applied LSN ranges.

    :param applied: capture instance -> joined LSN ranges.
    """
    entries = {}
    for ci, ranges in applied.items():
        entries[SUMMARY_RANGES + ci] = format_ranges(ranges)
        entries[SUMMARY_MAX_LSN + ci] = Lsn.from_int(max(hi for _, hi in ranges)).hex
    return entries


def ranges_of(entries: Mapping[str, str]) -> dict[str, list[LsnRange]]:
    """Return capture instance -> applied LSN ranges from state entries.

    :param entries: as :func:`state_entries` returns them.
    """
    return {
        key[len(SUMMARY_RANGES) :]: parse_ranges(value)
        for key, value in entries.items()
        if key.startswith(SUMMARY_RANGES)
    }


@dataclass(frozen=True)
class RecordedState:
    """The applied state of a table and where it was read.

    :param entries: the state entries (empty for a table no merge has committed to).
    :param source: where they were read, for logs and messages.
    """

    entries: dict[str, str]
    source: str


def ancestors(table: Any) -> Iterator[Any]:
    """Yield the current snapshot and its retained ancestors, newest first, one at a time.

    Readers stop at the newest snapshot with a state, usually the current one: the cost of a read
    does not grow with the snapshots a table retains (1,440 a day for a minutely DAG).
    """
    snapshot = table.currentSnapshot()
    while snapshot is not None:
        yield snapshot
        parent_id = snapshot.parentId()
        snapshot = table.snapshot(parent_id) if parent_id is not None else None


def _ancestry(table: Any) -> tuple[list[Any], int | None]:
    """Return the retained ancestry of the current snapshot, newest first, and the id of the first missing parent.

    The missing parent is None when the oldest retained ancestor is the table's first snapshot.
    Only read when no retained snapshot has a state (``read_state``'s fallback).
    """
    snapshots = list(ancestors(table))
    oldest_parent = snapshots[-1].parentId() if snapshots else None
    return snapshots, None if oldest_parent is None else int(oldest_parent)


def _newest_summary_state(ancestry: Iterable[Any]) -> tuple[int, dict[str, str]] | None:
    for snapshot in ancestry:
        entries = state_entries(snapshot.summary())
        if entries:
            return int(snapshot.snapshotId()), entries
    return None


def newest_summary_state(table: Any) -> tuple[int, dict[str, str]] | None:
    """Return (snapshot id, state entries) of the newest retained ancestor whose summary has them, or None.

    :param table: the Iceberg ``Table``; refreshed first.
    """
    table.refresh()
    return _newest_summary_state(ancestors(table))


def read_state(table: Any, name: str) -> RecordedState:
    """Return the table's applied state: newest retained summary, else the exact property copy.

    :param table: the Iceberg ``Table`` (Java, through py4j); refreshed first.
    :param name: the table's name, for messages.
    :raises AppliedStateLostError: the table has snapshots but no exact state can be found.
    """
    table.refresh()
    newest = _newest_summary_state(ancestors(table))
    if newest is not None:
        return RecordedState(newest[1], f"snapshot {newest[0]}")
    ancestry, missing = _ancestry(table)
    if not ancestry:
        return RecordedState({}, "no snapshot: a new table")
    properties = table.properties()
    entries = state_entries(properties)
    retained = {str(s.snapshotId()) for s in ancestry}
    if missing is None:
        retained.add(NO_SNAPSHOT)
    if not entries:
        if missing is None:  # the whole history is there and no merge ever committed to it
            return RecordedState({}, "no merge commit in the table's history")
        raise AppliedStateLostError(
            _lost_message(
                name,
                "no retained snapshot of the current ancestry carries the sqlserver-cdc.* summary (they were "
                "expired after compaction or another commit without it) and the table has no copy of it in "
                "its properties (the table was last merged by a provider version without that copy, or the "
                "properties were removed)",
            )
        )
    for marker in merge_markers(properties).values():
        if marker not in retained:
            raise AppliedStateLostError(
                _lost_message(
                    name,
                    f"a merge that started at snapshot {marker} was interrupted before it recorded its applied "
                    "state in the table properties, and the snapshots that would show whether it committed "
                    "have been expired",
                )
            )
    described = properties.get(STATE_SNAPSHOT_PROPERTY)
    if described is not None and str(described) not in retained and _exists(table, str(described)):
        raise AppliedStateLostError(
            _lost_message(
                name,
                f"the state in the table properties describes snapshot {described}, which is no longer an "
                "ancestor of the current snapshot (the table was rolled back) and no retained ancestor "
                "carries the sqlserver-cdc.* summary",
            )
        )
    return RecordedState(entries, f"table properties (as of snapshot {described})")


def _exists(table: Any, snapshot_id: str) -> bool:
    try:
        return table.snapshot(int(snapshot_id)) is not None
    except ValueError:
        return False


def _lost_message(name: str, what: str) -> str:
    return (
        f"target table {name}: the applied LSN ranges cannot be read: {what}. Merging now could apply "
        "windows twice or bring back deleted rows, so the merge stops. To recover, either set the state "
        "from the Airflow watermark, which holds the max LSN of the last successful merge task: ALTER TABLE "
        f"{name} SET TBLPROPERTIES ('{SUMMARY_RANGES}<capture instance>'='0x00000000000000000000-<watermark>', "
        f"'{SUMMARY_MAX_LSN}<capture instance>'='<watermark>') and ALTER TABLE {name} UNSET TBLPROPERTIES "
        f"IF EXISTS ('{STATE_SNAPSHOT_PROPERTY}', '{MERGE_MARKER_PREFIX}...' for each such property), then "
        "re-run (windows after the "
        "watermark are merged again, which the LSN-position rule makes harmless); or merge a new snapshot "
        'into a new table (delete the watermark Variable, or pass dag_run.conf {"resnapshot": [...]}, '
        "with a new target). docs/maintenance.md, 'Recovering a lost state'"
    )


def merge_markers(properties: Mapping[Any, Any]) -> dict[str, str]:
    """Return the interrupted-merge markers of table properties: property -> snapshot the merge started at.

    :param properties: the table properties (a Java map or a Python mapping).
    """
    keys = properties.keySet() if hasattr(properties, "keySet") else properties.keys()
    return {str(k): str(properties.get(k)) for k in keys if str(k).startswith(MERGE_MARKER_PREFIX)}


def mark_merge_started(table: Any) -> str:
    """Set this merge's marker (before its commit); return its property, which :func:`record_state` removes.

    :param table: the Iceberg ``Table``.
    """
    table.refresh()
    current = table.currentSnapshot()
    started_at = NO_SNAPSHOT if current is None else str(current.snapshotId())
    marker = MERGE_MARKER_PREFIX + uuid.uuid4().hex
    table.updateProperties().set(marker, started_at).commit()
    return marker


def drop_marker(table: Any, marker: str) -> None:
    """Remove a merge's marker when the merge failed without committing (a conflict, an error before it).

    :param table: the Iceberg ``Table``.
    :param marker: the property :func:`mark_merge_started` returned.
    """
    table.updateProperties().remove(marker).commit()


def record_state(
    table: Any, entries: Mapping[str, str], snapshot_id: int, *, markers: Iterable[str] = ()
) -> None:
    """Copy a snapshot's applied state into the table properties (one metadata commit), removing the marker.

    :param table: the Iceberg ``Table``.
    :param entries: the state entries of the snapshot.
    :param snapshot_id: the snapshot they were read from.
    :param markers: the marker properties to remove (the merge's own; a refresh: every marker).
    """
    update = table.updateProperties()
    for key, value in entries.items():
        update = update.set(key, value)
    update = update.set(STATE_SNAPSHOT_PROPERTY, str(snapshot_id))
    for marker in markers:
        update = update.remove(marker)
    update.commit()


def refresh_state(table: Any, name: str) -> RecordedState:
    """Copy the newest retained summary state into the table properties (unless they hold it); return the state.

    Run before expiring snapshots, and only when no merge of the table runs at the same time (the
    marker of an interrupted merge is removed: the newest retained summary shows whether it committed).

    :param table: the Iceberg ``Table``.
    :param name: the table's name, for messages.
    :raises AppliedStateLostError: as :func:`read_state`.
    """
    state = read_state(table, name)
    current = table.currentSnapshot()
    properties = table.properties()
    markers = merge_markers(properties)
    held = state_entries(properties), str(properties.get(STATE_SNAPSHOT_PROPERTY))
    if (
        current is not None
        and state.entries
        and (markers or held != (state.entries, str(current.snapshotId())))
    ):
        record_state(table, state.entries, current.snapshotId(), markers=markers)
    return state
