"""Retention cleanup: change information older than CHANGE_RETENTION goes, min valid versions rise.

SQL Server's automatic cleanup is a background task; the simulator runs it when change tracking
information is read (``AUTO_CLEANUP = ON``), against the server clock, so tests move the clock
instead of waiting. ``sys.sp_flush_CT_internal_table_on_demand`` runs it on request.
"""

from __future__ import annotations

from typing import Any

from .state import ChangeTrackingDatabase, TrackedTable

TICKS_PER_MINUTE = 600_000_000


def expired_version(engine: Any, state: ChangeTrackingDatabase) -> int:
    """The newest version whose commit is older than the retention period (0 when none)."""
    cutoff = engine.clock.utc_ticks() - state.retention_minutes * TICKS_PER_MINUTE
    newest = 0
    for _seq, version, commit_utc, _xid in state.commits:
        if commit_utc >= cutoff:
            break
        newest = version
    return newest


def run_cleanup(engine: Any, state: ChangeTrackingDatabase, tables: list[TrackedTable] | None = None) -> int:
    """Remove change information past retention; the number of tables whose min valid version rose.

    The cleanup is a transaction of its own: snapshots taken before it still see the old entries.
    """
    version = expired_version(engine, state)
    with engine.mutex:
        targets = [
            t
            for t in (tables if tables is not None else state.tables.values())
            if version > t.cleanup_version
        ]
        if not targets:
            return 0
        engine.commit_seq += 1
        seq = engine.commit_seq
        for table in targets:
            table.cleanup_version = version
            if version > table.min_valid_version(seq):
                table.min_valid_marks.append((seq, version))
            purge(engine, table)
        state.floor_version = max(state.floor_version, version)
    return len(targets)


def reset_table(engine: Any, state: ChangeTrackingDatabase, table: TrackedTable, xact_id: int = 0) -> None:
    """TRUNCATE TABLE: forget the table's change information, and make every version synced before it invalid.

    manage-change-tracking-sql-server.md: the rows truncated are not tracked and the minimum valid version
    is updated, so a client's check "indicates that the version is too old and a reinitialization is
    required". The truncate takes a version of its own: the table's minimum valid version becomes it, past
    every version a client could have synced to, and CHANGE_TRACKING_CURRENT_VERSION() reaches it, so a
    client that reinitializes is valid again.
    """
    with engine.mutex:
        engine.commit_seq += 1
        state.version += 1
        state.commits.append((engine.commit_seq, state.version, engine.clock.utc_ticks(), xact_id))
        table.min_valid_marks.append((engine.commit_seq, state.version))
        purge(engine, table)


def purge(engine: Any, table: TrackedTable) -> None:
    """Drop the entries below a min valid version that no running snapshot can still read."""
    oldest = min(engine.active_snapshots) if engine.active_snapshots else None
    floor = 0
    for seq, version in table.min_valid_marks:
        if oldest is None or oldest >= seq:
            floor = max(floor, version)
    if floor and table.entries and table.entries[0].version <= floor:
        table.entries = [e for e in table.entries if e.version > floor]


def auto_cleanup(engine: Any, state: ChangeTrackingDatabase) -> None:
    """Run the automatic cleanup when it is on."""
    if state.auto_cleanup and state.tables:
        run_cleanup(engine, state)
