"""CHANGETABLE, the CHANGE_TRACKING_* functions and the change tracking catalog views.

Every object returns SQL Server's documented columns and types. Readers see change tracking as of
their snapshot: inside a SNAPSHOT transaction the transaction's snapshot (so
CHANGE_TRACKING_CURRENT_VERSION() and CHANGETABLE agree with the rows read), otherwise the
statement's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.collation import ci_key
from sqlserver_cdc_simulator.errors import SqlError, invalid_column, invalid_object
from sqlserver_cdc_simulator.extensions import (
    ResultColumn,
    Rowset,
    TypedValue,
    result_columns,
)
from sqlserver_cdc_simulator.values import (
    convert,
    round_smalldatetime_ticks,
)

from . import errors
from .cleanup import auto_cleanup
from .state import (
    ChangeTrackingDatabase,
    TrackedTable,
    column_in_mask,
    latest_change,
    net_changes,
    state_of,
)

CHANGES_FUNCTION = "sys.changetable__changes"
VERSION_FUNCTION = "sys.changetable__version"

CHANGES_COLUMNS = result_columns(
    """
    SYS_CHANGE_VERSION bigint, SYS_CHANGE_CREATION_VERSION bigint, SYS_CHANGE_OPERATION nchar(1),
    SYS_CHANGE_COLUMNS varbinary(4100), SYS_CHANGE_CONTEXT varbinary(128)
    """
)
VERSION_COLUMNS = result_columns("SYS_CHANGE_VERSION bigint, SYS_CHANGE_CONTEXT varbinary(128)")


def reader_seq(session: Any, statement: bool = False) -> int:
    """The commit sequence number a reader sees change tracking at.

    :param statement: True inside a running statement (its snapshot is the statement's).
    """
    engine = session.engine
    xact = session.xact
    if xact is not None and xact.isolation == "SNAPSHOT":
        if xact.snapshot is None:
            engine.end_read(engine.begin_read(xact))  # the transaction's snapshot starts at its first read
        return xact.snapshot
    if statement and session.current_snapshot is not None:
        return session.current_snapshot
    return engine.commit_seq


def _database_state(session: Any, database: Any = None) -> ChangeTrackingDatabase | None:
    """The change tracking state of ``database`` (default: the session's), after its due auto cleanup."""
    state = state_of(session.engine.database(session.database) if database is None else database)
    if state is not None:
        auto_cleanup(session.engine, state)
    return state


def _visible_entries(table: TrackedTable, seq: int) -> list[Any]:
    floor = table.min_valid_version(seq)
    return [e for e in table.entries if e.seq <= seq and e.version > floor]


def _tracked(session: Any, name: str) -> tuple[Any, Any, TrackedTable]:
    table = session.lookup_table_by_text(name)
    if table is None:
        raise invalid_object(name)
    database = session.engine.database_by_id(_database_id_of(session, table))
    state = _database_state(session, database)
    tracked = state.tables.get(table.object_id) if state is not None else None
    if tracked is None:
        raise errors.table_not_enabled(name)
    return database, table, tracked


def _database_id_of(session: Any, table: Any) -> int:
    for db in session.engine.databases.values():
        if db.table(table.schema.name, table.name) is table:
            return db.database_id
    raise invalid_object(table.qualified_name)


def _key_columns(table: Any, tracked: TrackedTable) -> list[ResultColumn]:
    by_name = {c.name.lower(): c for c in table.columns}
    return [
        ResultColumn(by_name[k.lower()].name, by_name[k.lower()].type, False) for k in tracked.key_columns
    ]


def changetable_changes(session: Any, suffix: str, args: list[TypedValue]) -> Rowset:
    """CHANGETABLE(CHANGES table, last_sync_version)."""
    name = args[0].value
    last = args[1].value if len(args) > 1 else None
    if last is not None:
        last = int(convert(last, args[1].type, T.BIGINT))
    _database, table, tracked = _tracked(session, name)
    columns = CHANGES_COLUMNS + _key_columns(table, tracked)
    non_key = frozenset(
        c.column_id for c in table.columns if c.name.lower() not in {k.lower() for k in tracked.key_columns}
    )

    def rows() -> Iterator[tuple[Any, ...]]:
        seq = reader_seq(session, statement=True)
        for change in net_changes(
            _visible_entries(tracked, seq), last, seq, tracked.track_columns_updated, non_key
        ):
            yield (
                change.version,
                change.creation_version,
                change.operation,
                change.columns,
                change.context,
                *change.key_values,
            )

    return Rowset(columns, rows())


def changetable_version(session: Any, suffix: str, args: list[TypedValue]) -> Rowset:
    """CHANGETABLE(VERSION table, (key columns), (key values))."""
    name = args[0].value
    names = [n.strip().strip("[]") for n in args[1].value.split(",")]
    values = args[2:]
    _database, table, tracked = _tracked(session, name)
    key_columns = _key_columns(table, tracked)
    by_name = {c.name.lower(): c for c in key_columns}
    for n in names:
        if n.lower() not in by_name:
            raise invalid_column(n)
    if len(names) != len(key_columns) or len(values) != len(names):
        raise SqlError(
            8171,
            16,
            1,
            f"The primary key values for table '{name}' must identify the row: name every primary key column once.",
        )
    given = {
        n.lower(): convert(v.value, v.type, by_name[n.lower()].type)
        for n, v in zip(names, values, strict=True)
    }
    key_values = tuple(given[c.name.lower()] for c in key_columns)

    def rows() -> Iterator[tuple[Any, ...]]:
        seq = reader_seq(session, statement=True)
        if not any(v is not None for v in key_values) or not _row_exists(
            session, table, tracked, key_values, seq
        ):
            return
        change = latest_change(_visible_entries(tracked, seq), tuple(ci_key(v) for v in key_values), seq)
        if change is None:
            yield (None, None, *key_values)
        else:
            yield (change.version, change.context, *key_values)

    return Rowset(VERSION_COLUMNS + key_columns, rows())


def _row_exists(session: Any, table: Any, tracked: TrackedTable, key: tuple[Any, ...], seq: int) -> bool:
    positions = [table.colmap[k.lower()] for k in tracked.key_columns]
    wanted = tuple(ci_key(v) for v in key)
    xact = session.xact
    return any(tuple(ci_key(row[p]) for p in positions) == wanted for row in table.scan(xact, seq))


def current_version(session: Any, args: list[TypedValue]) -> int | None:
    """CHANGE_TRACKING_CURRENT_VERSION(): NULL when change tracking is off for the database."""
    state = _database_state(session)
    return None if state is None else state.current_version(reader_seq(session))


def min_valid_version(session: Any, args: list[TypedValue]) -> int | None:
    """CHANGE_TRACKING_MIN_VALID_VERSION(object_id): NULL for an unknown or untracked table."""
    if not args or args[0].value is None:
        return None
    state = _database_state(session)
    tracked = None if state is None else state.tables.get(int(args[0].value))
    return None if tracked is None else tracked.min_valid_version(reader_seq(session))


def is_column_in_mask(session: Any, args: list[TypedValue]) -> int | None:
    """CHANGE_TRACKING_IS_COLUMN_IN_MASK(column_id, change_columns)."""
    if not args or args[0].value is None:
        return None
    return column_in_mask(int(args[0].value), args[1].value if len(args) > 1 else None)


SCALAR_FUNCTIONS: dict[str, tuple[Any, T.SqlType]] = {
    "sys.change_tracking_current_version": (current_version, T.BIGINT),
    "sys.change_tracking_min_valid_version": (min_valid_version, T.BIGINT),
    "sys.change_tracking_is_column_in_mask": (is_column_in_mask, T.BIT),
}

TABLE_FUNCTION_PREFIXES = {CHANGES_FUNCTION: changetable_changes, VERSION_FUNCTION: changetable_version}


# --------------------------------------------------------------------------- catalog views


def v_change_tracking_tables(session: Any, database: Any) -> Rowset:
    """sys.change_tracking_tables."""
    columns = result_columns(
        """
        object_id int NOT NULL, is_track_columns_updated_on bit NOT NULL, min_valid_version bigint,
        begin_version bigint, cleanup_version bigint
        """
    )
    state = _database_state(session, database)
    if state is None:
        return Rowset(columns, [])
    seq = reader_seq(session)
    return Rowset(
        columns,
        [
            (
                t.object_id,
                1 if t.track_columns_updated else 0,
                t.min_valid_version(seq),
                t.begin_version,
                t.cleanup_version,
            )
            for t in state.tables.values()
            if t.enabled_seq <= seq
        ],
    )


def v_change_tracking_databases(session: Any, database: Any) -> Rowset:
    """sys.change_tracking_databases (one row per database with change tracking on)."""
    from .state import RETENTION_UNITS

    columns = result_columns(
        """
        database_id int NOT NULL, is_auto_cleanup_on tinyint, retention_period int,
        retention_period_units tinyint, retention_period_units_desc nvarchar(60), max_cleanup_version bigint
        """
    )
    rows = []
    for db in sorted(session.engine.databases.values(), key=lambda d: d.database_id):
        state = state_of(db)
        if state is None:
            continue
        rows.append(
            (
                db.database_id,
                1 if state.auto_cleanup else 0,
                state.retention_value,
                RETENTION_UNITS[state.retention_units][0],
                state.retention_units,
                state.floor_version,
            )
        )
    return Rowset(columns, rows)


def v_dm_tran_commit_table(session: Any, database: Any) -> Rowset:
    """sys.dm_tran_commit_table: one row per retained transaction that changed tracked tables.

    ``commit_ts`` is the change tracking version; ``commit_time`` (smalldatetime, to the minute) is in UTC. Needs VIEW SERVER STATE.
    """
    session.require_server_permission("VIEW SERVER STATE")
    columns = result_columns(
        "commit_ts bigint, xdes_id bigint, commit_lbn bigint, commit_csn bigint, commit_time smalldatetime"
    )
    state = state_of(database)
    if state is None:
        return Rowset(columns, [])
    seq = reader_seq(session)
    return Rowset(
        columns,
        [
            (version, xid, seq_, seq_, round_smalldatetime_ticks(commit_utc))
            for seq_, version, commit_utc, xid in state.commits
            if seq_ <= seq and version > state.floor_version
        ],
    )


VIEWS = {
    "sys.change_tracking_tables": v_change_tracking_tables,
    "sys.change_tracking_databases": v_change_tracking_databases,
    "sys.dm_tran_commit_table": v_dm_tran_commit_table,
}
