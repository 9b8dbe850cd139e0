"""Durable state in a data directory (``--data DIR``): a snapshot file plus an append-only log.

* ``DIR/snapshot.pickle`` -- the whole committed state (databases, tables, rows, transaction
  logs with their LSN counters, logins, picklable database/table flags and the state of
  extensions), written at a clean shutdown and after start-up replay;
* ``DIR/journal.bin`` -- one record per commit (row images and DDL statement texts, in order,
  plus the committed-transaction log records) and per server-level change (CREATE DATABASE,
  CREATE LOGIN, ALTER DATABASE ... SET), appended and flushed at commit.

On start the snapshot is loaded and the journal replayed: row images are applied directly,
DDL statements are executed again (extension DDL hooks are not called during replay).
Extensions keep their own state across restarts with :meth:`ExtensionRegistry.state_hook`.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
from pathlib import Path
from typing import Any

from .collation import ci_key
from .login import Login
from .storage import Column, Database, Index, Principal, RowVersion, Schema, Table

_SNAPSHOT = "snapshot.pickle"
_JOURNAL = "journal.bin"
FORMAT_VERSION = 1


class Durability:
    """Writes and reads one engine's durable state.

    :param data_dir: the directory (created if missing)
    """

    def __init__(self, data_dir: str) -> None:
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._journal: Any = None
        self.replaying = False

    # ---------------------------------------------------------------- writing
    def _open(self) -> Any:
        if self._journal is None:
            self._journal = open(self.dir / _JOURNAL, "ab")  # noqa: SIM115 - kept open for appends
        return self._journal

    def _append(self, record: Any) -> None:
        if self.replaying:
            return
        with self._lock:
            f = self._open()
            pickle.dump(record, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()

    def record_commit(self, actions: list[Any], log_records: list[Any]) -> None:
        """Append a committed transaction."""
        self._append(("commit", actions, log_records))

    def record_server(self, change: tuple[Any, ...]) -> None:
        """Append a server-level change (create/drop database, logins, database options)."""
        self._append(("server", change))

    def close(self) -> None:
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None

    # ---------------------------------------------------------------- snapshot
    def checkpoint(self, engine: Any) -> None:
        """Write the full state to the snapshot file and empty the journal."""
        with engine.mutex:
            state = _dump_engine(engine)
        tmp = self.dir / (_SNAPSHOT + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / _SNAPSHOT)
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            open(self.dir / _JOURNAL, "wb").close()

    def load(self, engine: Any) -> None:
        """Load the snapshot and replay the journal into *engine*, then checkpoint."""
        snap = self.dir / _SNAPSHOT
        if snap.exists():
            with open(snap, "rb") as f:
                state = pickle.load(f)
            _load_engine(engine, state)
        journal = self.dir / _JOURNAL
        if journal.exists() and journal.stat().st_size:
            self.replaying = True
            hooks = list(engine.registry.ddl_hooks)
            engine.registry.ddl_hooks.clear()
            try:
                with open(journal, "rb") as f:
                    while True:
                        try:
                            record = pickle.load(f)
                        except EOFError:
                            break
                        except (pickle.UnpicklingError, ValueError, AttributeError):
                            break  # a record torn by a crash: everything before it is intact
                        _replay(engine, record)
            finally:
                engine.registry.ddl_hooks[:] = hooks
                self.replaying = False
        for db in engine.databases.values():
            db.log.new_vlf()
        self.checkpoint(engine)


# ---------------------------------------------------------------- replay


def _replay(engine: Any, record: Any) -> None:
    kind = record[0]
    if kind == "server":
        change = record[1]
        op = change[0]
        if op == "create_database":
            if change[1].lower() not in engine.databases:
                engine.create_database(change[1])
        elif op == "drop_database":
            engine.databases.pop(change[1].lower(), None)
        elif op == "database_option":
            db = engine.databases.get(change[1].lower())
            if db is not None:
                if change[2] == "ALLOW_SNAPSHOT_ISOLATION":
                    db.allow_snapshot_isolation = change[3] == "ON"
                elif change[2] == "READ_COMMITTED_SNAPSHOT":
                    db.read_committed_snapshot = change[3] == "ON"
        elif op == "create_login":
            if change[1].lower() not in engine.logins:
                engine.create_login(change[1], change[2], change[3])
        elif op == "drop_login":
            engine.logins.pop(change[1].lower(), None)
        return
    if kind != "commit":
        return
    _, actions, log_records = record
    for action in actions:
        if action[0] == "ddl":
            _, dbname, sql, default_schema = action
            session = engine.open_session(database=dbname)
            session.replay_default_schema = default_schema
            try:
                session.execute_internal(sql)
            finally:
                engine.close_session(session)
            continue
        _, dbname, schema, tname, rowid, values = action
        db = engine.databases.get(dbname.lower())
        table = db.table(schema, tname) if db else None
        if table is None:
            continue
        old = table.rows.get(rowid)
        for ix in table.indexes:
            if ix.unique and old is not None and old.values is not None:
                k = tuple(ci_key(old.values[p]) for p in ix.positions)
                if ix.keys.get(k) == rowid:
                    del ix.keys[k]
        if values is None:
            table.rows.pop(rowid, None)
        else:
            table.rows[rowid] = RowVersion(values, None, 0, None)
            for ix in table.indexes:
                if ix.unique:
                    ix.keys[tuple(ci_key(values[p]) for p in ix.positions)] = rowid
            ident = table.identity_column
            if ident is not None and values[ident] is not None:
                table.identity_current = max(table.identity_current or values[ident], values[ident])
            for i, c in enumerate(table.columns):
                if c.type.name == "timestamp" and values[i] is not None:
                    dbts = int.from_bytes(values[i], "big")
                    if dbts > db.flags.get("dbts", 0):
                        db.flags["dbts"] = dbts
        table.next_rowid = max(table.next_rowid, rowid + 1)
    for dbname, rec in log_records:
        db = engine.databases.get(dbname.lower())
        if db is None:
            continue
        db.log.transactions.append(rec)
        db.log._commit_lsns.append(rec.commit_lsn)
        last = rec.commit_lsn
        for op in rec.operations:
            if op.lsn > last:
                last = op.lsn
        db.log.advance_to(last)


# ---------------------------------------------------------------- snapshot format


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
        return True
    except Exception:
        return False


def _dump_engine(engine: Any) -> dict[str, Any]:
    dbs = []
    for db in engine.databases.values():
        tables = []
        for t in db.all_tables():
            rows = {}
            for rowid, v in t.rows.items():
                while v is not None and v.cts is None:
                    v = v.prev
                if v is not None and v.values is not None:
                    rows[rowid] = v.values
            tables.append(
                {
                    "object_id": t.object_id,
                    "schema": t.schema.name,
                    "name": t.name,
                    "columns": [vars(c).copy() for c in t.columns],
                    "indexes": [
                        {
                            k: v
                            for k, v in vars(ix).items()
                            if k not in ("keys", "positions", "old_keys", "key_of")
                        }
                        for ix in t.indexes
                    ],
                    "rows": rows,
                    "next_rowid": t.next_rowid,
                    "identity_current": t.identity_current,
                    "create_ticks": t.create_ticks,
                    "modify_ticks": t.modify_ticks,
                    "flags": {k: v for k, v in t.flags.items() if _picklable(v)},
                    "schema_version": t.schema_version,
                }
            )
        log = db.log
        dbs.append(
            {
                "database_id": db.database_id,
                "name": db.name,
                "create_ticks": db.create_ticks,
                "allow_snapshot_isolation": db.allow_snapshot_isolation,
                "read_committed_snapshot": db.read_committed_snapshot,
                "flags": {k: v for k, v in db.flags.items() if _picklable(v)},
                "schemas": [(s.schema_id, s.name, s.principal_id) for s in db.schemas.values()],
                "principals": [vars(p).copy() for p in db.principals.values()],
                "next_principal_id": db.next_principal_id,
                "next_schema_id": db.next_schema_id,
                "object_ids": db.object_ids,
                "tables": tables,
                "log": {
                    "vlf": log._vlf,
                    "block": log._block,
                    "slot": log._slot,
                    "last": log._last,
                    "transactions": list(log.transactions),
                },
                "extensions": {
                    name: dump(db)
                    for name, (dump, _load) in getattr(engine.registry, "state_hooks", {}).items()
                },
            }
        )
    return {
        "format_version": FORMAT_VERSION,
        "next_db_id": engine._next_db_id,
        "next_principal": engine._next_principal,
        "logins": [vars(lg).copy() for lg in engine.logins.values()],
        "databases": dbs,
        "commit_seq": engine.commit_seq,
    }


def _load_engine(engine: Any, state: dict[str, Any]) -> None:
    engine.databases.clear()
    engine.logins.clear()
    for lg in state["logins"]:
        engine.logins[lg["name"].lower()] = Login(**lg)
    engine.logins["sa"].password = engine.sa_password
    engine._next_db_id = state["next_db_id"]
    engine._next_principal = state["next_principal"]
    engine.commit_seq = state.get("commit_seq", 0)
    for d in state["databases"]:
        db = Database(d["database_id"], d["name"], d["create_ticks"])
        db.allow_snapshot_isolation = d["allow_snapshot_isolation"]
        db.read_committed_snapshot = d["read_committed_snapshot"]
        db.flags.update(d["flags"])
        db.schemas = {}
        for sid, name, pid in d["schemas"]:
            db.schemas[name.lower()] = Schema(sid, name, pid)
        db.principals = {p["name"].lower(): Principal(**p) for p in d["principals"]}
        db.next_principal_id = d["next_principal_id"]
        db.next_schema_id = d["next_schema_id"]
        db.object_ids = d["object_ids"]
        for td in d["tables"]:
            schema = db.schemas[td["schema"].lower()]
            cols = [Column(**c) for c in td["columns"]]
            t = Table(td["object_id"], schema, td["name"], [], td["create_ticks"])
            for c in cols:
                t.columns.append(c)
            t._rebuild_colmap()
            for ixd in td["indexes"]:
                t.indexes.append(Index(**ixd))
            t._rebuild_colmap()
            t.rows = {rowid: RowVersion(values, None, 0, None) for rowid, values in td["rows"].items()}
            for ix in t.indexes:
                if ix.unique:
                    ix.keys = {
                        tuple(ci_key(v.values[p]) for p in ix.positions): rowid for rowid, v in t.rows.items()
                    }
            t.next_rowid = td["next_rowid"]
            t.identity_current = td["identity_current"]
            t.modify_ticks = td["modify_ticks"]
            t.flags.update(td["flags"])
            t.schema_version = td["schema_version"]
            schema.tables[t.name.lower()] = t
        lg = d["log"]
        log = db.log
        log._vlf, log._block, log._slot, log._last = lg["vlf"], lg["block"], lg["slot"], lg["last"]
        log.transactions = list(lg["transactions"])
        log._commit_lsns = [x.commit_lsn for x in log.transactions]
        engine.databases[db.name.lower()] = db
        for name, data in d.get("extensions", {}).items():
            hook = getattr(engine.registry, "state_hooks", {}).get(name)
            if hook is not None:
                with contextlib.suppress(Exception):
                    hook[1](db, data)
