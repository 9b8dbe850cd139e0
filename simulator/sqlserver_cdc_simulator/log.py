"""The transaction log of a simulated database: LSNs and the committed transactions in commit order.

An LSN is SQL Server's ``binary(10)``: a 4-byte VLF sequence number, a 4-byte block offset and
a 2-byte slot, all big-endian, so byte-wise comparison is log order. Here LSNs are plain
``bytes`` of length 10.

What the log records, per database (see :class:`TransactionLog`):

* a transaction gets a *begin LSN* at its first write (``database_transaction_begin_lsn`` in
  ``sys.dm_tran_database_transactions``, as :func:`lsn_to_numeric`);
* every row operation gets its own LSN (CDC's ``__$seqval``);
* COMMIT gets a *commit LSN* (CDC's ``__$start_lsn``) and the server clock's commit time;
* committed transactions are kept in commit order as :class:`CommittedTransaction` with their
  :class:`RowOperation` and :class:`DdlOperation` records; rolled-back work never appears.

Readers call :meth:`TransactionLog.scan` from an LSN or a position. The CDC capture job also
allocates LSNs outside user transactions with :meth:`TransactionLog.allocate_lsn`.

The log survives a restart when the simulator runs with ``--data`` (see :mod:`.persistence`).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .values import datetime_from_ticks

LSN_ZERO = bytes(10)


def make_lsn(vlf: int, block: int, slot: int) -> bytes:
    """An LSN from its three parts."""
    return vlf.to_bytes(4, "big") + block.to_bytes(4, "big") + slot.to_bytes(2, "big")


def lsn_parts(lsn: bytes) -> tuple[int, int, int]:
    """(VLF sequence, block, slot) of an LSN."""
    return int.from_bytes(lsn[:4], "big"), int.from_bytes(lsn[4:8], "big"), int.from_bytes(lsn[8:], "big")


def lsn_to_numeric(lsn: bytes) -> int:
    """The decimal form SQL Server uses in numeric(25,0) LSN columns: vlf*10^15 + block*10^5 + slot."""
    vlf, block, slot = lsn_parts(lsn)
    return vlf * 10**15 + block * 10**5 + slot


def lsn_from_numeric(value: int) -> bytes:
    """Inverse of :func:`lsn_to_numeric`."""
    vlf, rest = divmod(int(value), 10**15)
    block, slot = divmod(rest, 10**5)
    return make_lsn(vlf, block, slot)


def lsn_hex(lsn: bytes) -> str:
    """``0x`` + 20 upper-case hex digits."""
    return "0x" + lsn.hex().upper()


@dataclass(slots=True)
class LoggedOperation:
    """What every operation of a transaction names: its LSN, its table, its kind and columns.

    :param lsn: LSN of this operation (CDC ``__$seqval`` for row changes)
    :param schema: the table's schema
    :param table: the table's name
    :param object_id: the table's object id (0 for DDL on no table)
    :param kind: what the operation does (see the subclasses)
    :param columns: the columns it concerns
    """

    lsn: bytes
    schema: str
    table: str
    object_id: int
    kind: str
    columns: tuple[str, ...]


@dataclass(slots=True)
class RowOperation(LoggedOperation):
    """One row change inside a transaction.

    :param kind: ``insert``, ``delete`` or ``update``
    :param columns: column names of the table at the time of the operation, in column order
    :param before: full row before (delete/update), values in :mod:`.types` representation
    :param after: full row after (insert/update)
    """

    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None
    rowid: int = 0

    @property
    def before_row(self) -> dict[str, Any] | None:
        """The before-image keyed by column name (None for inserts)."""
        return None if self.before is None else dict(zip(self.columns, self.before, strict=True))

    @property
    def after_row(self) -> dict[str, Any] | None:
        """The after-image keyed by column name (None for deletes)."""
        return None if self.after is None else dict(zip(self.columns, self.after, strict=True))


@dataclass(frozen=True)
class SchemaChange:
    """What a DDL statement changed, as it asks the engine to log it (``Engine.log_ddl``).

    :param kind: ``create_table``, ``drop_table``, ``add_column``, ``drop_column``, ``create_schema``, ...
    :param statement: the statement text as the client sent it (replayed when the database is recovered)
    :param undo: puts the schema back when the transaction rolls back
    :param columns: the columns added, dropped or altered
    :param schema: the object's schema where the change has no table (``CREATE SCHEMA``)
    :param name: the object's name where the change has no table (logins, users, roles)
    :param column_types: for ``alter_column``, the columns' new :class:`~.types.SqlType` s (for the capture job)
    """

    kind: str
    statement: str
    undo: Callable[[], Any]
    columns: tuple[str, ...] = ()
    schema: str = ""
    name: str = ""
    column_types: tuple[Any, ...] = ()


@dataclass(slots=True)
class DdlOperation(LoggedOperation):
    """A schema change logged inside a transaction.

    :param kind: ``create_table``, ``drop_table``, ``add_column``, ``drop_column``, ``truncate_table``, ...
    :param columns: the columns added, dropped or altered
    :param statement: the statement text as the client sent it
    :param column_types: for ``alter_column``, the columns' new :class:`~.types.SqlType` s
    """

    statement: str
    column_types: tuple[Any, ...] = ()


@dataclass(slots=True)
class CommittedTransaction:
    """A committed transaction of one database.

    :param commit_time_ticks: commit time, server local time, 100 ns ticks since 0001-01-01
    :param commit_time_utc_ticks: the same instant in UTC
    """

    xact_id: int
    begin_lsn: bytes
    commit_lsn: bytes
    commit_time_ticks: int
    commit_time_utc_ticks: int
    operations: list[RowOperation | DdlOperation] = field(default_factory=list)

    @property
    def commit_time(self) -> Any:
        """Commit time as a naive ``datetime`` in server local time (microseconds)."""
        return datetime_from_ticks(self.commit_time_ticks)


class TransactionLog:
    """LSN allocator and committed-transaction list of one database. Thread-safe."""

    def __init__(self, first_vlf: int = 0x2A) -> None:
        self._lock = threading.Lock()
        self._vlf = first_vlf
        self._block = 0x10
        self._slot = 0
        self._last = LSN_ZERO
        self.transactions: list[CommittedTransaction] = []
        self._commit_lsns: list[bytes] = []
        self._listeners: list[Any] = []

    # -- LSNs
    def allocate_lsn(self, new_block: bool = False) -> bytes:
        """The next LSN in log order (also usable outside user transactions)."""
        with self._lock:
            return self._next(new_block)

    def _next(self, new_block: bool) -> bytes:
        if new_block and self._slot:
            self._block += 1 + (self._slot // 64)
            self._slot = 0
        self._slot += 1
        if self._slot > 0xFFF0:
            self._block += 1
            self._slot = 1
        if self._block > 0x7FFFFFF0:
            self._vlf += 1
            self._block = 0x10
        lsn = make_lsn(self._vlf, self._block, self._slot)
        self._last = lsn
        return lsn

    @property
    def last_lsn(self) -> bytes:
        """The highest LSN allocated so far."""
        return self._last

    def advance_to(self, lsn: bytes) -> None:
        """Make later LSNs greater than *lsn* (used when replaying a durable log)."""
        with self._lock:
            if lsn > self._last:
                self._vlf, self._block, self._slot = lsn_parts(lsn)
                self._last = lsn

    def new_vlf(self) -> None:
        """Start a new virtual log file (as after a restart)."""
        with self._lock:
            self._vlf += 1
            self._block = 0x10
            self._slot = 0

    # -- committed transactions
    def append(self, xact: CommittedTransaction) -> None:
        """Record a committed transaction (called by the engine at COMMIT)."""
        with self._lock:
            self.transactions.append(xact)
            self._commit_lsns.append(xact.commit_lsn)
        for fn in list(self._listeners):
            fn(xact)

    def subscribe(self, fn: Any) -> None:
        """Call ``fn(CommittedTransaction)`` after every commit (in the committing thread)."""
        self._listeners.append(fn)

    def scan(self, after_lsn: bytes | None = None, position: int = 0) -> Iterator[CommittedTransaction]:
        """Committed transactions in commit order, from *position* or with commit LSN > *after_lsn*."""
        if after_lsn is not None:
            with self._lock:
                position = max(position, bisect.bisect_right(self._commit_lsns, after_lsn))
        i = position
        while True:
            with self._lock:
                if i >= len(self.transactions):
                    return
                xact = self.transactions[i]
            yield xact
            i += 1

    def __len__(self) -> int:
        return len(self.transactions)

    def trim(self, max_transactions: int, max_operations: int) -> int:
        """Forget the oldest transactions until at most half of each limit is kept, once a limit is passed.

        The engine calls this for databases without CDC, whose log nobody reads (SQL Server truncates
        such a log at checkpoints). Returns how many transactions were dropped.
        """
        with self._lock:
            ops = sum(len(x.operations) for x in self.transactions)
            if len(self.transactions) <= max_transactions and ops <= max_operations:
                return 0
            n = 0
            while self.transactions and (
                len(self.transactions) - n > max_transactions // 2 or ops > max_operations // 2
            ):
                ops -= len(self.transactions[n].operations)
                n += 1
                if n >= len(self.transactions):
                    break
            del self.transactions[:n]
            del self._commit_lsns[:n]
            return n

    def truncate_before(self, lsn: bytes) -> int:
        """Forget committed transactions with commit LSN < *lsn*; returns how many were dropped."""
        with self._lock:
            n = bisect.bisect_left(self._commit_lsns, lsn)
            del self.transactions[:n]
            del self._commit_lsns[:n]
            return n
