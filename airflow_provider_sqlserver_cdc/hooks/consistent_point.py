"""
The consistent-snapshot protocol: a read transaction on a table together with the LSN it is consistent at.

Method ``snapshot_isolation`` (default; needs ALLOW_SNAPSHOT_ISOLATION ON and VIEW SERVER STATE):

1. connection A begins a transaction and takes a shared table lock held to its end
   (``WITH (TABLOCK, HOLDLOCK)``). It is granted once every transaction that wrote the table
   has ended; from then on nobody can write the table;
2. connection B begins a SNAPSHOT transaction and reads the table, which fixes its view (SQL
   Server fixes a SNAPSHOT transaction's view at its first read, not at BEGIN);
3. B creates a savepoint: the first log record of B, so B gets a begin LSN, read from
   ``sys.dm_tran_database_transactions``;
4. A rolls back, releasing the lock; B then reads the table at leisure.

Every change to the table committed before step 1 is visible to B and has a commit LSN below B's
begin LSN; every later change is invisible to B and is logged after it, so its commit LSN (CDC's
``__$start_lsn``) is above. The lock is held only for steps 2-3 (milliseconds).

Method ``table_lock`` (the opt-in fallback without snapshot isolation): one connection takes
the same lock, creates the savepoint, reads the LSN and keeps the lock while it reads the whole
table, so writers of the table wait for the whole copy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.errors import SqlServerCdcError
from airflow_provider_sqlserver_cdc.hooks.driver_errors import driver_message, native_error_number
from airflow_provider_sqlserver_cdc.hooks.snapshot_errors import (
    SnapshotError,
    SnapshotIsolationNotAllowedError,
    SnapshotLockTimeoutError,
    SnapshotPermissionError,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn

if TYPE_CHECKING:
    import pyodbc

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook

SNAPSHOT_ISOLATION = "snapshot_isolation"
TABLE_LOCK = "table_lock"
METHODS = (SNAPSHOT_ISOLATION, TABLE_LOCK)
#: Seconds a consistent read waits for the shared table lock that fixes its point.
DEFAULT_LOCK_TIMEOUT_SECONDS = 30.0
#: Whether a read falls back to ``table_lock`` when the database does not allow snapshot isolation.
DEFAULT_ALLOW_TABLE_LOCK_FALLBACK = False
SNAPSHOT_ISOLATION_ON = 1

_LOCK_TIMEOUT = 1222
_INVALID_COLUMN = 207
_SNAPSHOT_NOT_ALLOWED = (3952, 3951)
_PERMISSION_DENIED = (229, 230, 262, 297, 300)


def lsn_from_numeric(value: int | Decimal) -> Lsn:
    """
    Convert the ``numeric(25,0)`` LSN form of the DMVs (VLF * 10^15 + block * 10^5 + slot) into an Lsn.

    :param value: e.g. ``database_transaction_begin_lsn``.
    """
    number = int(value)
    if number < 0:
        raise ValueError(f"Not an LSN: {value!r}")
    vlf, rest = divmod(number, 10**15)
    block, slot = divmod(rest, 10**5)
    if vlf >= 2**32:
        raise ValueError(f"Not an LSN: {value!r} (VLF sequence number beyond 4 bytes)")
    return Lsn(vlf.to_bytes(4, "big") + block.to_bytes(4, "big") + slot.to_bytes(2, "big"))


@dataclass(frozen=True)
class SnapshotPoint:
    """
    The point a snapshot is consistent at.

    :param lsn: begin LSN of the reading transaction: every change with a greater commit LSN is
        missing from the snapshot, every change with a smaller one is in it.
    :param server_time: the server clock when the LSN was taken (aware).
    :param method: ``snapshot_isolation`` or ``table_lock``.
    """

    lsn: Lsn
    server_time: datetime
    method: str

    @property
    def utc_time(self) -> datetime:
        """The server time in UTC."""
        return self.server_time.astimezone(UTC)


@dataclass(frozen=True)
class ConsistentRead:
    """
    How a consistent read fixes its point (the snapshot, the reconcile's compare and repair).

    :param method: ``snapshot_isolation`` (default; needs ALLOW_SNAPSHOT_ISOLATION ON) or ``table_lock``
        (writers of the table wait for the whole read).
    :param lock_timeout_s: how long to wait for the shared table lock.
    :param allow_table_lock_fallback: use ``table_lock`` when the database does not allow
        snapshot isolation, instead of failing.
    """

    method: str = SNAPSHOT_ISOLATION
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_SECONDS
    allow_table_lock_fallback: bool = DEFAULT_ALLOW_TABLE_LOCK_FALLBACK

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")


class ConsistentSnapshot:
    """
    Open a read transaction whose view of one table is consistent at a known LSN (context manager).

    Inside the ``with`` block, :attr:`reader` is a pyodbc connection in that transaction and
    :attr:`point` the LSN; leaving the block rolls the transaction back (nothing was written)
    and closes the connections.

    :param hook: the source hook (its connection factory is used; two connections).
    :param instance: the capture instance whose source table is read.
    :param read: how the point is fixed (default: snapshot isolation, no fallback).
    """

    def __init__(
        self, hook: SqlServerCdcHook, instance: CaptureInstance, read: ConsistentRead | None = None
    ) -> None:
        read = read or ConsistentRead()
        self.hook = hook
        self.instance = instance
        self.method = read.method
        self.lock_timeout_ms = max(0, round(read.lock_timeout_s * 1000))
        self.allow_table_lock_fallback = read.allow_table_lock_fallback
        self.reader: pyodbc.Connection | None = None
        self.point: SnapshotPoint | None = None
        self.lock_held_s: float | None = None
        self._locker: pyodbc.Connection | None = None
        self._locked_at: float | None = None

    # --- errors ----------------------------------------------------------------------------

    def _where(self) -> str:
        return (
            f"table {self.instance.source} (capture instance {self.instance.name!r}, database "
            f"{self.hook.database or '(default)'}, {self.hook.server})"
        )

    def translate_error(self, err: Exception, doing: str) -> SqlServerCdcError:
        """Turn a driver error of the snapshot into the snapshot's error with an actionable message."""
        number = native_error_number(err)
        text = driver_message(err)
        where = self._where()
        if number == _LOCK_TIMEOUT:
            return SnapshotLockTimeoutError(
                f"Could not take the shared table lock on {where} within {self.lock_timeout_ms / 1000:g} s while "
                f"{doing}: a transaction that writes the table stayed open that long. Find it in "
                "sys.dm_tran_active_transactions / sys.dm_exec_sessions, run the snapshot when no long writer is "
                "active, or raise lock_timeout (writers of the table queue behind the waiting lock)."
            )
        if number in _SNAPSHOT_NOT_ALLOWED:
            return self._not_allowed(text)
        if number in (297, 300) or "VIEW SERVER" in text.upper():
            return SnapshotPermissionError(
                f"Permission denied while {doing} for {where}: {text}. The snapshot reads its transaction's "
                "begin LSN from sys.dm_tran_database_transactions, which needs VIEW SERVER STATE (SQL Server "
                "2022: VIEW SERVER PERFORMANCE STATE): GRANT VIEW SERVER STATE TO [<login>]."
            )
        if number == _INVALID_COLUMN:
            return SnapshotError(
                f"{where}: {text} while {doing}. A column the capture instance still captures was dropped from "
                "the source table, so the table cannot be copied with the instance's columns. Create a new "
                "capture instance for the table's current shape (sys.sp_cdc_enable_table with a new "
                "@capture_instance) and snapshot that one."
            )
        if number in _PERMISSION_DENIED:
            return SnapshotPermissionError(
                f"Permission denied while {doing} for {where}: {text}. The login needs SELECT on the source "
                "table (and VIEW SERVER STATE for the snapshot LSN)."
            )
        return SnapshotError(f"SQL Server error while {doing} for {where}: {text}")

    def _not_allowed(self, detail: str) -> SnapshotIsolationNotAllowedError:
        database = self.hook.database or "<database>"
        return SnapshotIsolationNotAllowedError(
            f"Snapshot isolation is not allowed in database {database!r} ({detail}), so {self._where()} cannot be "
            f"copied consistently without blocking writers. Either run ALTER DATABASE [{database}] SET "
            "ALLOW_SNAPSHOT_ISOLATION ON (readers then keep row versions in tempdb while the copy runs), or "
            "pass allow_table_lock_fallback=True to copy under a shared table lock that makes writers of the "
            "table wait until the copy is done."
        )

    # --- protocol --------------------------------------------------------------------------

    def _snapshot_isolation_allowed(self) -> bool | None:
        """ALLOW_SNAPSHOT_ISOLATION from sys.databases, or None when it cannot be read."""
        import pyodbc

        conn = self.hook.get_conn()
        cursor = conn.cursor()
        try:
            row = cursor.execute(tsql.SNAPSHOT_ISOLATION_STATE).fetchone()
        except pyodbc.Error:
            return None
        finally:
            cursor.close()
        if row is None or row[0] is None:
            return None
        return int(row[0]) == SNAPSHOT_ISOLATION_ON

    def _execute(self, conn: pyodbc.Connection, sql: str, doing: str, *, fetch: bool = False) -> Any:
        import pyodbc

        cursor = conn.cursor()
        try:
            cursor.execute(sql)
            return cursor.fetchall() if fetch else None
        except pyodbc.Error as err:
            raise self.translate_error(err, doing) from None
        finally:
            cursor.close()

    def _open(self, isolation: str, doing: str) -> pyodbc.Connection:
        """A new connection in a transaction of the given isolation level (set before the transaction begins)."""
        conn = self.hook.new_connection()
        try:
            self._execute(conn, isolation, doing)
            conn.autocommit = False
        except BaseException:
            conn.close()
            raise
        return conn

    def _lock_table(self, conn: pyodbc.Connection) -> None:
        schema, table = self.instance.source_schema, self.instance.source_table
        self._execute(conn, tsql.set_lock_timeout(self.lock_timeout_ms), "setting LOCK_TIMEOUT")
        self._execute(conn, tsql.lock_table_statement(schema, table), "locking the table", fetch=True)
        self._locked_at = time.monotonic()

    def _read_point(self, conn: pyodbc.Connection, method: str) -> SnapshotPoint:
        self._execute(conn, tsql.SAVE_SNAPSHOT_SAVEPOINT, "creating the snapshot savepoint")
        rows = self._execute(
            conn,
            tsql.TRANSACTION_BEGIN_LSN,
            "reading the snapshot LSN from sys.dm_tran_database_transactions",
            fetch=True,
        )
        if not rows or rows[0][0] is None:
            raise SnapshotPermissionError(
                f"sys.dm_tran_database_transactions shows no begin LSN for the snapshot transaction of "
                f"{self._where()}. Without VIEW SERVER STATE the view shows only some rows: GRANT VIEW SERVER "
                "STATE TO [<login>] (SQL Server 2022: VIEW SERVER PERFORMANCE STATE)."
            )
        server_time = rows[0][1]
        if not isinstance(server_time, datetime) or server_time.tzinfo is None:
            raise SnapshotError(f"SYSDATETIMEOFFSET() returned {server_time!r}, expected a datetimeoffset")
        return SnapshotPoint(lsn_from_numeric(rows[0][0]), server_time, method)

    def _establish_snapshot_isolation(self) -> None:
        schema, table = self.instance.source_schema, self.instance.source_table
        self._locker = self._open(tsql.SET_READ_COMMITTED, "starting the locking transaction")
        self._lock_table(self._locker)
        self.reader = self._open(tsql.SET_SNAPSHOT_ISOLATION, "starting the SNAPSHOT transaction")
        self._execute(
            self.reader, tsql.fix_snapshot_statement(schema, table), "fixing the snapshot", fetch=True
        )
        self.point = self._read_point(self.reader, SNAPSHOT_ISOLATION)
        self._release_lock()

    def _establish_table_lock(self) -> None:
        self.reader = self._open(tsql.SET_READ_COMMITTED, "starting the READ COMMITTED transaction")
        self._lock_table(self.reader)
        self.point = self._read_point(self.reader, TABLE_LOCK)

    def _release_lock(self) -> None:
        locker, self._locker = self._locker, None
        if locker is None:
            return
        try:
            locker.rollback()
        finally:
            locker.close()
            self._note_lock_released()

    def _note_lock_released(self) -> None:
        if self._locked_at is not None:
            self.lock_held_s = time.monotonic() - self._locked_at
            self._locked_at = None

    def establish(self) -> SnapshotPoint:
        """Open the transaction and return the point it is consistent at."""
        method = self.method
        if method == SNAPSHOT_ISOLATION:
            allowed = self._snapshot_isolation_allowed()
            if allowed is False:
                if not self.allow_table_lock_fallback:
                    raise self._not_allowed("sys.databases.snapshot_isolation_state is OFF")
                self.hook.log.warning(
                    "%s: snapshot isolation is not allowed in the database; copying under a shared table lock "
                    "(writers of %s wait until the copy is done)",
                    self.instance.name,
                    self.instance.source,
                )
                method = TABLE_LOCK
        try:
            if method == SNAPSHOT_ISOLATION:
                try:
                    self._establish_snapshot_isolation()
                except SnapshotIsolationNotAllowedError:
                    if not self.allow_table_lock_fallback:
                        raise
                    self.close()
                    self._establish_table_lock()
            else:
                self._establish_table_lock()
        except BaseException:
            self.close()
            raise
        assert self.point is not None
        return self.point

    def close(self) -> None:
        """End the read transaction (rollback: it wrote nothing) and close both connections."""
        self._release_lock()
        reader, self.reader = self.reader, None
        if reader is not None:
            try:
                reader.rollback()
            except Exception:
                self.hook.log.debug("rollback of the snapshot transaction failed", exc_info=True)
            finally:
                reader.close()
                self._note_lock_released()  # table_lock: the reader held the lock

    def __enter__(self) -> ConsistentSnapshot:
        self.establish()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close()
