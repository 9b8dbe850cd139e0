"""Engine: the simulated server's state (databases, logins, clock, extensions) and its write path.

All writes go through :meth:`Engine.write_row` and end in :meth:`Engine.commit` or
:meth:`Engine.rollback`, which maintain the row versions, unique indexes, table locks, the
per-database :class:`~.log.TransactionLog` (LSNs, committed transactions) and, with a data
directory, the durable log (:mod:`.persistence`).

Python API for other modules (e.g. CDC):

* ``engine.execute(sql, database=...)`` runs T-SQL as ``sa`` and returns the result sets as
  lists of tuples (values in :mod:`.types` representation);
* ``engine.open_session(login, database)`` gives a :class:`~.session.Session` to run statements
  inside one transaction (``session.execute_internal``);
* ``engine.registry`` is the :class:`~.extensions.ExtensionRegistry`;
* ``engine.clock`` is the :class:`~.clock.ServerClock`;
* ``engine.database(name).log`` is the database's :class:`~.log.TransactionLog`.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from typing import Any

from . import types as T
from .clock import ServerClock
from .collation import ci_key
from .errors import SqlError, duplicate_key, login_failed, unknown_database
from .extensions import ExtensionRegistry
from .log import CommittedTransaction, DdlOperation, RowOperation, SchemaChange
from .login import Login
from .persistence import Durability
from .session import Session
from .storage import Database, LockManager, RowVersion, Table, Transaction
from .version import MAJOR, MINOR, UPDATE_LEVEL, VERSION_STRING, VERSION_TEXT

log = logging.getLogger(__name__)


class Engine:
    """The simulated SQL Server instance.

    :param password: password of the ``sa`` login
    :param timezone: IANA time zone of the server clock
    :param data_dir: directory for durable state, or None for in-memory only
    """

    def __init__(
        self, password: str, timezone: str = "UTC", data_dir: str | None = None, server_name: str = "SQLSIM"
    ) -> None:
        self.sa_password = password
        self.server_name = server_name
        self.version_string = VERSION_STRING
        self.clock = ServerClock(timezone)
        self.registry = ExtensionRegistry()
        self.locks = LockManager()
        self.mutex = threading.RLock()
        self.commit_seq = 0
        self.active_snapshots: Counter[int] = Counter()
        self.spids = itertools.count(51)
        self.sessions: dict[int, Any] = {}
        self.data_dir = data_dir
        self.durable: Any = None
        self._reset_state()
        self._install_extensions()
        if data_dir:
            self.durable = Durability(data_dir)
            self.durable.load(self)

    def _install_extensions(self) -> None:
        try:
            from .cdc.registration import register_cdc
        except ImportError:
            return
        except Exception:  # a broken CDC package must not take the engine down
            log.exception("the simulator's CDC package failed to import; CDC objects are unavailable")
            return
        register_cdc(self.registry, self)
        from .change_tracking.registration import register_change_tracking

        register_change_tracking(self.registry)

    # ---------------------------------------------------------------- state
    def _reset_state(self) -> None:
        self.databases: dict[str, Database] = {}
        self._next_db_id = 1
        self.logins: dict[str, Login] = {
            "sa": Login("sa", self.sa_password, 1, "master", is_sysadmin=True, sid=b"\x01"),
        }
        self._next_principal = 256
        now = self.clock.local_ticks()
        for name in ("master", "tempdb", "model", "msdb"):
            self._add_database(name, now)

    def reset(self) -> None:
        """Forget all databases and logins (fresh state; the fixture calls this between tests)."""
        for hook in list(self.registry.reset_hooks):
            hook(self)
        with self.mutex:
            self.commit_seq += 1
            self.sessions.clear()
            self._reset_state()
            self.clock.reset()

    def _add_database(self, name: str, create_ticks: int) -> Database:
        db = Database(self._next_db_id, name, create_ticks)
        self._next_db_id += 1
        self.databases[name.lower()] = db
        return db

    def create_database(self, name: str) -> Database:
        with self.mutex:
            if name.lower() in self.databases:
                raise SqlError(
                    1801, 16, 3, f"Database '{name}' already exists. Choose a different database name."
                )
            return self._add_database(name, self.clock.local_ticks())

    def close(self) -> None:
        """Write the durable snapshot (with ``--data``) and release files."""
        for hook in list(self.registry.reset_hooks):
            hook(self)
        if self.durable is not None:
            self.durable.checkpoint(self)
            self.durable.close()

    def database(self, name: str) -> Database:
        db = self.databases.get(name.lower())
        if db is None:
            raise unknown_database(name)
        return db

    def database_by_id(self, database_id: int) -> Database | None:
        for db in self.databases.values():
            if db.database_id == database_id:
                return db
        return None

    def database_name_by_id(self, database_id: int) -> str | None:
        db = self.database_by_id(database_id)
        return db.name if db else None

    def server_property(self, name: str) -> Any:
        p = name.lower()
        return {
            "productversion": VERSION_TEXT,
            "productlevel": "RTM",
            "productmajorversion": str(MAJOR),
            "productminorversion": str(MINOR),
            "edition": "Developer Edition (64-bit)",
            "engineedition": "3",
            "editionid": "-2117995310",
            "servername": self.server_name,
            "machinename": self.server_name,
            "instancename": None,
            "collation": "SQL_Latin1_General_CP1_CI_AS",
            "isclustered": "0",
            "ishadrenabled": "0",
            "isintegratedsecurityonly": "0",
            "productupdatelevel": UPDATE_LEVEL,
        }.get(p)

    # ---------------------------------------------------------------- logins and sessions
    def authenticate(self, user: str, password: str) -> Login:
        login = self.logins.get(user.lower())
        if login is None or login.password != password or login.disabled:
            raise login_failed(user)
        return login

    def create_login(self, name: str, password: str, default_database: str = "master") -> Login:
        with self.mutex:
            if name.lower() in self.logins:
                raise SqlError(15025, 16, 1, f"The server principal '{name}' already exists.")
            self._next_principal += 1
            login = Login(
                name,
                password,
                self._next_principal,
                default_database,
                sid=self._next_principal.to_bytes(4, "big"),
            )
            self.logins[name.lower()] = login
            return login

    def open_session(
        self, login: Login | None = None, database: str | None = None, app_name: str = "", host_name: str = ""
    ) -> Any:
        """A new session (connection state) for *login* (``sa`` by default)."""
        login = login or self.logins["sa"]
        db = database or login.default_database
        self.database(db)
        s = Session(self, login, db, next(self.spids), app_name=app_name, host_name=host_name)
        self.sessions[s.spid] = s
        return s

    def close_session(self, session: Any) -> None:
        if session.xact is not None:
            self.rollback(session.xact)
            session.xact = None
        tempdb = self.databases.get("tempdb")
        if tempdb is not None:
            with self.mutex:
                for name in session.temp_tables:  # a session's #temp tables end with it
                    if not name.startswith("##"):
                        tempdb.schemas["dbo"].tables.pop(name.lower(), None)
        self.sessions.pop(session.spid, None)

    def execute(self, sql: str, database: str | None = None) -> list[list[tuple[Any, ...]]]:
        """Run a batch as ``sa`` (autocommit) and return its result sets' rows."""
        s = self.open_session(database=database or "master")
        try:
            return s.execute_internal(sql)
        finally:
            self.close_session(s)

    # ---------------------------------------------------------------- snapshots
    def begin_read(self, xact: Transaction | None) -> int:
        """The snapshot a statement reads at (registered until :meth:`end_read`)."""
        with self.mutex:
            if xact is not None and xact.isolation == "SNAPSHOT":
                if xact.snapshot is None:
                    xact.snapshot = self.commit_seq
                    self.active_snapshots[xact.snapshot] += 1  # held until the transaction ends
                snap = xact.snapshot
            else:
                snap = self.commit_seq
            self.active_snapshots[snap] += 1
            return snap

    def end_read(self, snap: int) -> None:
        with self.mutex:
            self.active_snapshots[snap] -= 1
            if self.active_snapshots[snap] <= 0:
                del self.active_snapshots[snap]

    # ---------------------------------------------------------------- writes
    def next_rowversion(self, db: Database) -> bytes:
        v = db.flags.get("dbts", 2000) + 1
        db.flags["dbts"] = v
        return v.to_bytes(8, "big")

    def write_row(
        self, xact: Transaction, db: Database, table: Table, rowid: int | None, compute: Any
    ) -> tuple[str, Any]:
        """Insert (rowid None), update or delete one row.

        *compute(current_values)* returns the new values (tuple), None to delete, or ``...`` to
        skip the row; it runs under the engine mutex with the newest row values. Returns
        ``("done", kind)``, ``("skip", None)`` or ``("wait", other_transaction)``.
        """
        with self.mutex:
            if rowid is not None:
                newest = table.rows.get(rowid)
                if newest is None:
                    return "skip", None
                if newest.cts is None and newest.xact is not xact:
                    return "wait", newest.xact
                if (
                    xact.isolation == "SNAPSHOT"
                    and newest.cts is not None
                    and xact.snapshot is not None
                    and newest.cts > xact.snapshot
                ):
                    raise SqlError(
                        3960,
                        16,
                        2,
                        "Snapshot isolation transaction aborted due to update conflict. You cannot use snapshot isolation to "
                        f"access table '{table.qualified_name}' directly or indirectly in database '{db.name}' to update, "
                        "delete, or insert the row that has been modified or deleted by another transaction. Retry the "
                        "transaction or change the isolation level for the update/delete statement.",
                    )
                before = newest.values
                if before is None:
                    return "skip", None
                after = compute(before)
                if after is ...:
                    return "skip", None
            else:
                newest = None
                before = None
                after = compute(None)
                if after is ...:
                    return "skip", None
                rowid = table.next_rowid
                table.next_rowid += 1
            # unique indexes
            unique = [ix for ix in table.indexes if ix.unique]
            akeys = [ix.key_of(after) for ix in unique] if after is not None else None
            bkeys = [ix.key_of(before) for ix in unique] if before is not None else None
            if after is not None:
                for i, ix in enumerate(unique):
                    key = akeys[i]
                    if bkeys is not None and bkeys[i] == key:
                        continue
                    other_id = ix.keys.get(key)
                    if other_id is not None and other_id != rowid:
                        other = table.rows.get(other_id)
                        if other is not None and other.values is not None:
                            if other.cts is None and other.xact is not xact:
                                return "wait", other.xact
                            shown = ", ".join(
                                "NULL" if after[p] is None else str(_display(after[p])) for p in ix.positions
                            )
                            raise duplicate_key(
                                constraint=ix.name,
                                kind="PRIMARY KEY" if ix.is_primary_key else "UNIQUE KEY",
                                table=f"{table.schema.name}.{table.name}",
                                key=shown,
                            )
            # version, index entries, log records
            kind = "insert" if before is None else ("delete" if after is None else "update")
            version = RowVersion(after, xact, None, newest)
            table.rows[rowid] = version
            for i, ix in enumerate(unique):
                if bkeys is not None:
                    bkey = bkeys[i]
                    if ix.keys.get(bkey) == rowid:
                        del ix.keys[bkey]
                    if akeys is None or akeys[i] != bkey:
                        ix.old_keys.setdefault(bkey, set()).add(rowid)
                if akeys is not None:
                    ix.keys[akeys[i]] = rowid
            dbname = db.name
            log = db.log
            if dbname not in xact.begin_lsn:
                xact.begin_lsn[dbname] = log.allocate_lsn(new_block=True)
                xact.begin_ticks[dbname] = self.clock.local_ticks()
            op = RowOperation(
                log.allocate_lsn(),
                table.schema.name,
                table.name,
                table.object_id,
                kind,
                table.column_names,
                before,
                after,
                rowid,
            )
            xact.ops.setdefault(dbname, []).append(op)
            xact.undo.append((table, rowid, newest, version, db, op))
            return "done", kind

    def log_ddl(self, xact: Transaction, db: Database, table: Table | None, change: SchemaChange) -> None:
        """Record a schema change of ``table`` (None: of no table) in the transaction; its undo runs on rollback."""
        with self.mutex:
            dbname = db.name
            if dbname not in xact.begin_lsn:
                xact.begin_lsn[dbname] = db.log.allocate_lsn(new_block=True)
                xact.begin_ticks[dbname] = self.clock.local_ticks()
            op = DdlOperation(
                db.log.allocate_lsn(),
                table.schema.name if table else change.schema,
                table.name if table else change.name,
                table.object_id if table else 0,
                change.kind,
                change.columns,
                change.statement,
                change.column_types,
            )
            xact.ops.setdefault(dbname, []).append(op)
            xact.undo.append(("ddl", change.undo, db, change.statement, op))

    def commit(self, xact: Transaction) -> None:
        """Make a transaction's writes visible and durable, and release its locks."""
        with self.mutex:
            cts = self.commit_seq + 1
            now_utc = self.clock.utc_ticks()
            now_local = now_utc + self.clock.offset_minutes(now_utc) * 600_000_000
            records = []
            for dbname, ops in xact.ops.items():
                db = self.databases.get(dbname.lower())
                if db is None or not ops:
                    continue
                commit_lsn = db.log.allocate_lsn()
                records.append(
                    (
                        db,
                        CommittedTransaction(
                            xact.xid, xact.begin_lsn[dbname], commit_lsn, now_local, now_utc, ops
                        ),
                    )
                )
                db.log.allocate_lsn(new_block=True)  # next transaction starts a new log block
            durable_actions = []
            min_active = min(self.active_snapshots) if self.active_snapshots else None
            for entry in xact.undo:
                if entry[0] == "ddl":
                    if entry[2].name != "tempdb":  # tempdb starts empty after a restart, as in SQL Server
                        durable_actions.append(
                            (
                                "ddl",
                                entry[2].name,
                                entry[3],
                                xact.session.default_schema() if xact.session else "dbo",
                            )
                        )
                    continue
                table, rowid, _prev, version, db, _op = entry
                version.cts = cts
                if db.name != "tempdb":  # tempdb starts empty after a restart, as in SQL Server
                    durable_actions.append(
                        ("row", db.name, table.schema.name, table.name, rowid, version.values)
                    )
            # publish
            self.commit_seq = cts
            for hook in self.registry.commit_hooks:  # e.g. Change Tracking: versions commit with the data
                hook(self, records, cts)
            # prune old versions nobody can see any more
            for entry in xact.undo:
                if entry[0] == "ddl":
                    continue
                table, rowid, _prev, version, db, _op = entry
                if min_active is None or min_active >= cts:
                    version.prev = None
                    if version.values is None and table.rows.get(rowid) is version:
                        del table.rows[rowid]
            replaying = self.durable is not None and self.durable.replaying
            if self.durable is not None and (durable_actions or records):
                self.durable.record_commit(durable_actions, [(db.name, rec) for db, rec in records])
            if not replaying:
                for db, rec in records:
                    db.log.append(rec)
                    self._trim_log(db)
        self._end_transaction(xact)

    #: a database without CDC keeps at most this much of its committed-transaction log
    LOG_RETENTION_TRANSACTIONS = 10_000
    LOG_RETENTION_OPERATIONS = 200_000

    def _trim_log(self, db: Database) -> None:
        if db.flags.get("is_cdc_enabled"):
            return  # the CDC capture job truncates what it has read
        log = db.log
        if len(log) > self.LOG_RETENTION_TRANSACTIONS or (
            log.transactions and len(log.transactions[-1].operations) > 0 and self._log_ops_estimate(log)
        ):
            log.trim(self.LOG_RETENTION_TRANSACTIONS, self.LOG_RETENTION_OPERATIONS)

    def _log_ops_estimate(self, log: Any) -> bool:
        # cheap check: only count when the newest transaction is large or every 256 commits
        newest = len(log.transactions[-1].operations)
        return newest > 10_000 or len(log) % 256 == 0

    def _end_transaction(self, xact: Transaction) -> None:
        if xact.isolation == "SNAPSHOT" and xact.snapshot is not None:
            self.end_read(xact.snapshot)
            xact.snapshot = None
        xact.done.set()
        self.locks.release_all(xact)

    def rollback(self, xact: Transaction, to: int = 0) -> None:
        """Undo a transaction's writes (all, or those after undo position *to*)."""
        with self.mutex:
            entries = xact.undo[to:]
            del xact.undo[to:]
            for entry in reversed(entries):
                if entry[0] == "ddl":
                    entry[1]()
                    continue
                table, rowid, prev, version, _db, _op = entry
                if table.rows.get(rowid) is version:
                    if prev is None:
                        del table.rows[rowid]
                    else:
                        table.rows[rowid] = prev
                for ix in table.indexes:
                    if not ix.unique:
                        continue
                    if version.values is not None:
                        k = tuple(ci_key(version.values[p]) for p in ix.positions)
                        if ix.keys.get(k) == rowid:
                            del ix.keys[k]
                    if prev is not None and prev.values is not None:
                        ix.keys[tuple(ci_key(prev.values[p]) for p in ix.positions)] = rowid
            # drop the log operations that were undone
            if to == 0:
                xact.ops.clear()
                xact.begin_lsn.clear()
            else:
                removed = {id(e[4]) if e[0] == "ddl" else id(e[5]) for e in entries}
                for dbname in list(xact.ops):
                    xact.ops[dbname] = [op for op in xact.ops[dbname] if id(op) not in removed]
        if to == 0:
            self._end_transaction(xact)
        else:
            self.locks.notify()


def _display(v: Any) -> Any:
    if isinstance(v, bytes):
        return "0x" + v.hex().upper()
    return v


SYSTEM_TYPES = T
