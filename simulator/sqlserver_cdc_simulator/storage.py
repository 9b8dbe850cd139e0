"""In-memory MVCC storage: databases, schemas, tables, row versions, transactions and locks.

Each row is a chain of :class:`RowVersion` objects, newest first. A version written by a
transaction has ``cts`` (commit sequence number) ``None`` until that transaction commits.
A reader sees, per row, the newest version that its own transaction wrote or that was
committed at or before its snapshot (:meth:`Table.scan`):

* READ COMMITTED reads take a snapshot per statement (the last committed state, as SQL
  Server's READ_COMMITTED_SNAPSHOT does);
* SNAPSHOT transactions take one snapshot at their first read and keep it.

Writers lock rows implicitly: writing a row whose newest version belongs to another open
transaction waits until that transaction ends (deadlocks are detected and raise 1205).
Table locks (:class:`LockManager`) implement TABLOCK / TABLOCKX / HOLDLOCK / UPDLOCK hints:
writers take IX, hinted readers take S (or U / X) and the usual compatibility applies.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .collation import ci_key
from .errors import SqlError
from .log import TransactionLog
from .types import SqlType


@dataclass
class Column:
    """A table column as declared."""

    name: str
    type: SqlType
    nullable: bool = True
    column_id: int = 0
    identity: tuple[int, int] | None = None  # (seed, increment)
    default_sql: str | None = None
    default_name: str | None = None
    default_object_id: int = 0
    computed: bool = False
    computed_sql: str | None = None  # a computed column's expression as written (sql/computed_columns.py)
    persisted: bool = False  # a computed column declared PERSISTED


@dataclass
class Index:
    """A PRIMARY KEY / UNIQUE constraint or index."""

    name: str
    index_id: int
    columns: list[str]
    kind: str  # "PRIMARY KEY", "UNIQUE" or "INDEX"
    unique: bool
    clustered: bool
    object_id: int = 0  # constraint object id
    descending: list[bool] = field(default_factory=list)
    positions: tuple[int, ...] = ()
    keys: dict[tuple[Any, ...], int] = field(default_factory=dict)
    # keys that older row versions still carry (deleted rows, changed keys): lookups must consider them
    old_keys: dict[tuple[Any, ...], set[int]] = field(default_factory=dict)

    @property
    def is_primary_key(self) -> bool:
        return self.kind == "PRIMARY KEY"


class RowVersion:
    """One version of a row; ``values`` is None for a deleted row."""

    __slots__ = ("cts", "prev", "values", "xact")

    def __init__(
        self,
        values: tuple[Any, ...] | None,
        xact: Transaction | None,
        cts: int | None,
        prev: RowVersion | None,
    ) -> None:
        self.values = values
        self.xact = xact
        self.cts = cts
        self.prev = prev


class Table:
    """A user or system table."""

    def __init__(
        self, object_id: int, schema: Schema, name: str, columns: list[Column], create_ticks: int
    ) -> None:
        self.object_id = object_id
        self.schema = schema
        self.name = name
        self.columns: list[Column] = []
        self.colmap: dict[str, int] = {}
        self.column_names: tuple[str, ...] = ()
        self.rows: dict[int, RowVersion] = {}
        self.next_rowid = 1
        self.indexes: list[Index] = []
        self.identity_current: int | None = None
        self.create_ticks = create_ticks
        self.modify_ticks = create_ticks
        self.flags: dict[str, Any] = {}
        self.schema_version = 0
        self.lock = threading.Lock()
        for c in columns:
            self.add_column(c)

    @property
    def qualified_name(self) -> str:
        return f"{self.schema.name}.{self.name}"

    def add_column(self, col: Column) -> None:
        col.column_id = max((c.column_id for c in self.columns), default=0) + 1
        self.columns.append(col)
        self._rebuild_colmap()

    def _rebuild_colmap(self) -> None:
        self.colmap = {c.name.lower(): i for i, c in enumerate(self.columns)}
        self.column_names = tuple(c.name for c in self.columns)
        for ix in self.indexes:
            ix.positions = tuple(self.colmap[c.lower()] for c in ix.columns)
            ix.key_of = _key_function(
                ix.positions, [self.columns[p].type.name in _STRING_TYPES for p in ix.positions]
            )

    def column_index(self, name: str) -> int | None:
        return self.colmap.get(name.lower())

    @property
    def identity_column(self) -> int | None:
        for i, c in enumerate(self.columns):
            if c.identity is not None:
                return i
        return None

    @property
    def primary_key(self) -> Index | None:
        for ix in self.indexes:
            if ix.is_primary_key:
                return ix
        return None

    def scan(self, xact: Transaction | None, snap: int) -> Iterator[tuple[Any, ...]]:
        """Visible rows for a reader with snapshot *snap* inside transaction *xact*."""
        for v in list(self.rows.values()):
            cts = v.cts
            if cts is not None and cts <= snap:
                vals = v.values
                if vals is not None:
                    yield vals
                continue
            v = _visible_version(v, xact, snap)
            if v is not None and v.values is not None:
                yield v.values

    def visible(self, rowid: int, xact: Transaction | None, snap: int) -> tuple[Any, ...] | None:
        """The values of row *rowid* a reader with snapshot *snap* in *xact* sees, or None."""
        v = _visible_version(self.rows.get(rowid), xact, snap)
        return None if v is None else v.values

    def scan_with_ids(self, xact: Transaction | None, snap: int) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """Like :meth:`scan`, with the row ids (for UPDATE / DELETE)."""
        for rowid, v in list(self.rows.items()):
            v = _visible_version(v, xact, snap)
            if v is not None and v.values is not None:
                yield rowid, v.values

    def row_count(self, snap: int) -> int:
        return sum(1 for _ in self.scan(None, snap))


def _visible_version(v: RowVersion | None, xact: Transaction | None, snap: int) -> RowVersion | None:
    """The version of a row that a reader sees: its own uncommitted one, else the newest committed by *snap*.

    :param v: the newest version of the row (its older ones follow ``prev``).
    :param xact: the reader's transaction, or None.
    :param snap: the reader's snapshot (commit sequence number).
    """
    while v is not None:
        if v.cts is None:
            if v.xact is xact and xact is not None:
                return v
        elif v.cts <= snap:
            return v
        v = v.prev
    return None


_STRING_TYPES = frozenset({"char", "varchar", "text", "nchar", "nvarchar", "ntext"})


def _key_function(positions: tuple[int, ...], is_string: list[bool]) -> Any:
    """A function giving an index key from a row: strings compare case-insensitively, without trailing spaces."""
    if len(positions) == 1:
        p = positions[0]
        if is_string[0]:
            return lambda row: (ci_key(row[p]),)
        return lambda row: (row[p],)
    if not any(is_string):
        getter = operator.itemgetter(*positions)
        return getter
    pairs = list(zip(positions, is_string, strict=True))
    return lambda row: tuple(ci_key(row[p]) if s else row[p] for p, s in pairs)


class Schema:
    def __init__(self, schema_id: int, name: str, principal_id: int = 1) -> None:
        self.schema_id = schema_id
        self.name = name
        self.principal_id = principal_id
        self.tables: dict[str, Table] = {}


@dataclass
class Principal:
    """A database user or role."""

    principal_id: int
    name: str
    type: str  # "S" SQL user, "R" role
    login: str | None = None
    members: set[str] = field(default_factory=set)  # for roles: member principal names (lower)
    default_schema: str = "dbo"
    owning_principal_id: int | None = None  # for roles: the principal of CREATE ROLE ... AUTHORIZATION


class Database:
    """A database: schemas, tables, principals, its transaction log and flags."""

    def __init__(self, database_id: int, name: str, create_ticks: int) -> None:
        self.database_id = database_id
        self.name = name
        self.create_ticks = create_ticks
        self.schemas: dict[str, Schema] = {}
        self.log = TransactionLog()
        self.allow_snapshot_isolation = False
        self.read_committed_snapshot = False
        self.flags: dict[str, Any] = {}
        self.principals: dict[str, Principal] = {}
        self.object_ids = itertools.count(901578250 + database_id * 1000)
        self.index_ids = itertools.count(1)
        for sid, sname in ((1, "dbo"), (2, "guest"), (3, "INFORMATION_SCHEMA"), (4, "sys")):
            self.schemas[sname.lower()] = Schema(sid, sname)
        self.principals["dbo"] = Principal(1, "dbo", "S", login="sa")
        self.principals["guest"] = Principal(2, "guest", "S")
        self.principals["public"] = Principal(0, "public", "R")
        self.principals["db_owner"] = Principal(16384, "db_owner", "R")
        self.next_principal_id = 5
        self.next_schema_id = 5

    def schema(self, name: str) -> Schema | None:
        return self.schemas.get(name.lower())

    def table(self, schema: str, name: str) -> Table | None:
        s = self.schemas.get(schema.lower())
        if s is None:
            return None
        return s.tables.get(name.lower())

    def all_tables(self) -> Iterator[Table]:
        for s in self.schemas.values():
            yield from s.tables.values()

    def table_by_id(self, object_id: int) -> Table | None:
        for t in self.all_tables():
            if t.object_id == object_id:
                return t
        return None

    def new_object_id(self) -> int:
        return next(self.object_ids)


class Transaction:
    """An open transaction of one session (possibly writing several databases)."""

    _ids = itertools.count(1000)

    def __init__(self, session: Any, isolation: str, explicit: bool, descriptor: int) -> None:
        self.xid = next(Transaction._ids)
        self.session = session
        self.isolation = isolation
        self.explicit = explicit
        self.descriptor = descriptor
        self.undo: list[Any] = []  # (table, rowid, previous newest version, new version) or callables
        self.ops: dict[str, list[Any]] = {}  # database name -> log operations
        self.begin_lsn: dict[str, bytes] = {}
        self.begin_ticks: dict[str, int] = {}
        self.snapshot: int | None = None
        self.done = threading.Event()
        self.table_locks: dict[int, str] = {}  # object_id -> mode held to end of transaction
        self.savepoints: list[tuple[str, int, dict[str, int]]] = []
        self.waiting_for: Transaction | None = None
        self.trancount = 1 if explicit else 0
        self.doomed = False
        self.name = ""

    @property
    def has_writes(self) -> bool:
        return bool(self.undo)


# ---------------------------------------------------------------- table locks

_COMPATIBLE = {
    "IS": {"IS", "IX", "S", "U"},
    "IX": {"IS", "IX"},
    "S": {"IS", "S", "U"},
    "U": {"IS", "S"},
    "X": set(),
}
_STRENGTH = {"IS": 0, "IX": 1, "S": 1, "U": 2, "X": 3}


class LockManager:
    """Table-level locks with SQL Server's IS / IX / S / U / X compatibility and deadlock detection."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.held: dict[int, dict[Transaction, str]] = {}

    def acquire(
        self, xact: Transaction, object_id: int, mode: str, timeout_ms: int = -1, name: str = ""
    ) -> None:
        with self.cond:
            while True:
                holders = self.held.setdefault(object_id, {})
                mine = holders.get(xact)
                wanted = _combine(mine, mode)
                blockers = [t for t, m in holders.items() if t is not xact and m not in _COMPATIBLE[wanted]]
                if not blockers:
                    holders[xact] = wanted
                    xact.waiting_for = None
                    return
                xact.waiting_for = blockers[0]
                if _deadlocked(xact):
                    xact.waiting_for = None
                    raise deadlock_error(xact)
                if timeout_ms == 0:
                    xact.waiting_for = None
                    raise lock_timeout_error()
                signalled = self.cond.wait(timeout=None if timeout_ms < 0 else timeout_ms / 1000)
                if not signalled and timeout_ms >= 0:
                    xact.waiting_for = None
                    raise lock_timeout_error()

    def release(self, xact: Transaction, object_id: int) -> None:
        with self.cond:
            holders = self.held.get(object_id)
            if holders and xact in holders:
                del holders[xact]
            self.cond.notify_all()

    def release_all(self, xact: Transaction) -> None:
        with self.cond:
            for holders in self.held.values():
                holders.pop(xact, None)
            xact.waiting_for = None
            self.cond.notify_all()

    def notify(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def wait_for_transaction(self, xact: Transaction, other: Transaction, timeout_ms: int = -1) -> None:
        """Block *xact* until *other* ends (row write conflict)."""
        with self.cond:
            xact.waiting_for = other
            try:
                while not other.done.is_set():
                    if _deadlocked(xact):
                        raise deadlock_error(xact)
                    if timeout_ms == 0:
                        raise lock_timeout_error()
                    signalled = self.cond.wait(timeout=0.5 if timeout_ms < 0 else timeout_ms / 1000)
                    if not signalled and timeout_ms >= 0 and not other.done.is_set():
                        raise lock_timeout_error()
            finally:
                xact.waiting_for = None


def _combine(held: str | None, wanted: str) -> str:
    if held is None:
        return wanted
    if {held, wanted} == {"S", "IX"}:
        return "X"  # SIX approximated by X
    return held if _STRENGTH[held] >= _STRENGTH[wanted] else wanted


def _deadlocked(xact: Transaction) -> bool:
    seen = set()
    t = xact.waiting_for
    while t is not None:
        if t is xact:
            return True
        if id(t) in seen:
            return False
        seen.add(id(t))
        t = t.waiting_for
    return False


def deadlock_error(xact: Transaction) -> SqlError:
    spid = getattr(xact.session, "spid", 0)
    return SqlError(
        1205,
        13,
        51,
        f"Transaction (Process ID {spid}) was deadlocked on lock resources with another process and has been "
        "chosen as the deadlock victim. Rerun the transaction.",
    )


def lock_timeout_error() -> SqlError:
    return SqlError(1222, 16, 56, "Lock request time out period exceeded.")
