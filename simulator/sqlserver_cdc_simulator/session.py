"""Session: one connection's state (database, variables, transaction, options) and statement execution.

:meth:`Session.execute_batch` runs a T-SQL batch and yields events the TDS layer encodes:
:class:`ResultSet`, :class:`StatementDone`, :class:`Message`, :class:`EnvChange`,
:class:`ErrorEvent`, :class:`ReturnStatus`, :class:`OutputParam`.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.tokens import TokenType

from . import types as T
from . import values as V
from .errors import (
    SqlError,
    invalid_object,
    missing_principal,
    must_declare,
    not_supported,
    syntax_error,
    unknown_database,
    unknown_procedure,
)
from .events import EnvChange, ErrorEvent, Message, ResultSet, StatementDone
from .extensions import ProcedureArgs, ProcedureResult, Rowset, TypedValue
from .sql import ddl, dml, procedures
from .sql.catalog import table_source
from .sql.compiler import Compiler
from .sql.context import SubqueryPlan
from .sql.dialect import (
    RawStatement,
    parse_expression,
    parse_statement,
    split_batch,
    table_name,
    type_name_of,
)
from .sql.expressions import Scope, converter
from .sql.query import compile_query
from .sql.system_object_names import SYSTEM_PROCEDURES
from .storage import Table, Transaction

log = logging.getLogger(__name__)

# errors after which SQL Server continues with the next statement of the batch
STATEMENT_LEVEL_ERRORS = {
    220,
    3623,
    2627,
    2601,
    515,
    8134,
    8115,
    245,
    241,
    242,
    8114,
    2628,
    8152,
    547,
    512,
    544,
    8169,
    3701,
    1801,
    15025,
    15023,
    3960,
    50000,
    4711,
    22832,
}


# constraint and truncation errors after which SQL Server reports "The statement has been terminated."
TERMINATING_STATEMENT_ERRORS = frozenset((2627, 2601, 515, 547, 2628, 8152))


@dataclass
class Variable:
    name: str
    type: T.SqlType
    value: Any = None


@dataclass
class SessionOptions:
    nocount: bool = False
    xact_abort: bool = False
    identity_insert: set[int] = field(default_factory=set)
    implicit_transactions: bool = False


class Session:
    """The state of one connection."""

    def __init__(
        self, engine: Any, login: Any, database: str, spid: int, app_name: str = "", host_name: str = ""
    ) -> None:
        self.engine = engine
        self.login = login
        self.database = engine.database(database).name
        self.spid = spid
        self.app_name = app_name
        self.host_name = host_name
        self.variables: dict[str, Variable] = {}
        self.xact: Transaction | None = None
        self.isolation = "READ COMMITTED"
        self.options = SessionOptions()
        self.lock_timeout = -1
        self.last_rowcount = 0
        self.last_identity: int | None = None
        self.last_error = 0
        self.prepared: dict[int, tuple[str, str]] = {}
        self._next_handle = 1
        self._pending_error: SqlError | None = None
        self.in_rpc = False
        self.temp_tables: set[str] = set()
        self.current_snapshot: int | None = None  # the read snapshot of the running statement
        self.ctes: dict[str, tuple[exp.Expression, list[str]]] = {}  # WITH names in scope
        self.ctes_compiling: set[str] = set()  # CTEs being compiled (recursion guard)
        self.table_variables: dict[str, str] = {}  # @name -> the temporary table holding it
        self.insert_exec_source: tuple[list[tuple[Any, ...]], list[T.SqlType] | None] | None = None

    # ---------------------------------------------------------------- helpers
    def current_db(self) -> Any:
        return self.engine.database(self.database)

    def default_schema(self) -> str:
        db = self.engine.databases.get(self.database.lower())
        if db is not None:
            for p in db.principals.values():
                if p.login and p.login.lower() == self.login.name.lower():
                    return p.default_schema
        return "dbo"

    def user_name(self) -> str:
        if self.login.is_sysadmin:
            return "dbo"
        db = self.current_db()
        for p in db.principals.values():
            if p.login and p.login.lower() == self.login.name.lower():
                return p.name
        return "guest"

    def is_member(self, role: str) -> int | None:
        db = self.current_db()
        r = db.principals.get(role.lower())
        if r is None:
            return None
        if self.login.is_sysadmin:
            return 1
        if r.name.lower() == "public":
            return 1
        user = self.user_name().lower()
        if r.type != "R":
            return 1 if r.name.lower() == user else 0
        return 1 if user in r.members else 0

    def has_db_access(self, database: str) -> bool:
        if self.login.is_sysadmin:
            return True
        db = self.engine.databases.get(database.lower())
        return db is not None and any(
            p.login and p.login.lower() == self.login.name.lower() for p in db.principals.values()
        )

    @property
    def trancount(self) -> int:
        if self.xact is None or not self.xact.explicit:
            return 0
        return self.xact.trancount

    def lookup_table_by_text(self, name: str) -> Table | None:
        parts = _split_name(name)
        if parts and parts[-1].startswith("#"):
            return self.engine.database("tempdb").table("dbo", self.temp_table_name(parts[-1]))
        try:
            db, schema, obj = self._name_parts(parts)
        except SqlError:
            return None
        d = self.engine.databases.get(db.lower())
        return d.table(schema, obj) if d else None

    def _name_parts(self, parts: list[str]) -> tuple[str, str, str]:
        if len(parts) == 1:
            return self.database, self.default_schema(), parts[0]
        if len(parts) == 2:
            return self.database, parts[0], parts[1]
        if len(parts) == 3:
            return parts[0] or self.database, parts[1] or "dbo", parts[2]
        raise SqlError(
            117,
            15,
            1,
            f"The object name '{'.'.join(parts)}' contains more than the maximum number of prefixes. The maximum is 2.",
        )

    def temp_table_name(self, name: str) -> str:
        """The tempdb name of temporary table ``#name`` (private to this session); ``##name`` is shared."""
        if name.startswith("##"):
            return name
        return f"{name}{'_' * 8}{self.spid:012X}"

    def resolve_table(self, node: exp.Table, must_exist: bool = True) -> tuple[Any, Table | None, str, str]:
        """(database, table or None, schema name, table name) of a table reference."""
        name = table_name(node)
        schema = node.args.get("db").name if node.args.get("db") else None
        catalog = node.args.get("catalog").name if node.args.get("catalog") else None
        if name.startswith("#"):
            tempdb = self.engine.database("tempdb")
            return tempdb, tempdb.table("dbo", self.temp_table_name(name)), "dbo", self.temp_table_name(name)
        dbname = catalog or self.database
        db = self.engine.databases.get(dbname.lower())
        if db is None:
            if must_exist:
                raise invalid_object(".".join(p for p in (catalog, schema, name) if p))
            return None, None, schema or "dbo", name
        if schema is None:
            t = db.table(self.default_schema(), name) or db.table("dbo", name)
            return db, t, (t.schema.name if t else self.default_schema()), name
        return db, db.table(schema, name), schema, name

    # ---------------------------------------------------------------- transactions
    def _new_descriptor(self) -> int:
        return 0

    def write_xact(self) -> Transaction:
        """The transaction writes go into (an autocommit one if none is open)."""
        if self.xact is None:
            self.xact = Transaction(self, self.isolation, explicit=False, descriptor=0)
            if self.options.implicit_transactions:
                self.xact.explicit = True
                self.xact.trancount = 1
        return self.xact

    def read_xact(self) -> Transaction | None:
        if self.xact is None and self.isolation == "SNAPSHOT":
            return None
        return self.xact

    def begin_transaction(self, name: str = "") -> list[Any]:
        if self.isolation == "SNAPSHOT" and not self.current_db().allow_snapshot_isolation:
            pass  # checked at first read, as SQL Server does
        if self.xact is not None and self.xact.explicit:
            self.xact.trancount += 1
            return []
        if self.xact is None:
            self.xact = Transaction(self, self.isolation, explicit=True, descriptor=0)
        else:
            self.xact.explicit = True
        self.xact.trancount = 1
        self.xact.name = name
        self.xact.descriptor = self.xact.xid
        return [EnvChange("begin_tran", self.xact.descriptor.to_bytes(8, "little"), b"")]

    def commit_transaction(self) -> list[Any]:
        x = self.xact
        if x is None or not x.explicit:
            raise SqlError(
                3902, 16, 1, "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION."
            )
        if x.doomed:
            raise SqlError(
                3930,
                16,
                1,
                "The current transaction cannot be committed and cannot support operations that write to the log file. Roll back the transaction.",
            )
        if x.trancount > 1:
            x.trancount -= 1
            return []
        self.xact = None
        self.engine.commit(x)
        return [EnvChange("commit_tran", b"", x.descriptor.to_bytes(8, "little"))]

    def rollback_transaction(self, name: str = "") -> list[Any]:
        x = self.xact
        if x is None or not x.explicit:
            raise SqlError(
                3903, 16, 1, "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION."
            )
        if name and name.lower() != (x.name or "").lower():
            for i in range(len(x.savepoints) - 1, -1, -1):
                sp_name, mark, _ = x.savepoints[i]
                if sp_name.lower() == name.lower():
                    self.engine.rollback(x, to=mark)
                    del x.savepoints[i + 1 :]
                    return []
            raise SqlError(
                6401, 16, 1, f"Cannot roll back {name}. No transaction or savepoint of that name was found."
            )
        self.xact = None
        self.engine.rollback(x)
        return [EnvChange("rollback_tran", b"", x.descriptor.to_bytes(8, "little"))]

    def save_transaction(self, name: str) -> None:
        x = self.xact
        if x is None or not x.explicit:
            raise SqlError(628, 16, 0, "Cannot issue SAVE TRANSACTION when there is no active transaction.")
        x.savepoints.append((name, len(x.undo), {}))
        # SAVE TRANSACTION writes a log record: the transaction gets its begin LSN in this database
        db = self.current_db()
        with self.engine.mutex:
            if db.name not in x.begin_lsn:
                x.begin_lsn[db.name] = db.log.allocate_lsn(new_block=True)
                x.begin_ticks[db.name] = self.engine.clock.local_ticks()
        # SQL Server logs a savepoint record: the transaction now has a begin LSN in this database
        # (sys.dm_tran_database_transactions), which the CDC snapshot relies on.
        db = self.current_db()
        with self.engine.mutex:
            if db.name not in x.begin_lsn:
                x.begin_lsn[db.name] = db.log.allocate_lsn(new_block=True)
                x.begin_ticks[db.name] = self.engine.clock.local_ticks()

    def _end_statement(self) -> None:
        """Commit an autocommit transaction at the end of a statement."""
        x = self.xact
        if x is not None and not x.explicit:
            self.xact = None
            if x.undo:
                self.engine.commit(x)
            else:
                self.engine._end_transaction(x)

    def _fail_statement(self, err: SqlError, mark: int) -> None:
        x = self.xact
        if x is None:
            return
        if not x.explicit:
            self.xact = None
            self.engine.rollback(x)
            return
        if err.number in (1205, 3960) or self.options.xact_abort:
            self.xact = None
            self.engine.rollback(x)
            return
        self.engine.rollback(x, to=mark)

    # ---------------------------------------------------------------- execution
    def execute_internal(self, sql: str) -> list[list[tuple[Any, ...]]]:
        """Run a batch, raising the first error; returns result sets as row lists."""
        out: list[list[tuple[Any, ...]]] = []
        for ev in self.execute_batch(sql):
            if isinstance(ev, ResultSet):
                out.append(list(ev.rows))
            elif isinstance(ev, ErrorEvent):
                raise ev.error
        return out

    def execute_batch(self, sql: str) -> Iterator[Any]:
        """Run a T-SQL batch, yielding result events."""
        try:
            statements = split_batch(sql)
        except SqlError as e:
            yield ErrorEvent(e)
            return
        try:
            nodes = _control_flow(list(statements))
        except SqlError as e:
            yield ErrorEvent(e)
            return
        yield from self._run_nodes(nodes, top=True)

    def _run_nodes(self, nodes: list[Any], top: bool = False) -> Iterator[Any]:
        """Run statements, IF / WHILE and BEGIN ... END blocks.

        Returns True to go on, False when the batch must stop, or ``"break"`` / ``"continue"``
        from inside a WHILE loop.
        """
        for i, node in enumerate(nodes):
            kind = node[0]
            if kind == "stmt":
                words = node[1].words
                if words[0] in ("BREAK", "CONTINUE") and len(words) == 1:
                    return words[0].lower()
                ok = yield from self._run_statement(node[1], first=top and i == 0)
            elif kind == "block":
                ok = yield from self._run_nodes(node[1])
            elif kind == "while":
                ok = True
                while True:
                    try:
                        go = self._condition(node[1])
                    except SqlError as e:
                        self.last_error = e.number
                        yield ErrorEvent(e)
                        return False
                    if not go:
                        break
                    ok = yield from self._run_nodes([node[2]])
                    if ok == "break":
                        ok = True
                        break
                    if ok == "continue":
                        ok = True
                    if not ok:
                        return False
            else:  # ("if", condition statement, then node, else node or None)
                try:
                    chosen = node[2] if self._condition(node[1]) else node[3]
                except SqlError as e:
                    self.last_error = e.number
                    yield ErrorEvent(e)
                    return False
                ok = True if chosen is None else (yield from self._run_nodes([chosen]))
            if ok is not True:
                return ok
        return True

    def _condition(self, raw: RawStatement) -> bool:
        """Evaluate the condition of an IF statement."""
        base = raw.tokens[0].start
        if len(raw.tokens) < 2:
            raise syntax_error("IF")
        node = parse_expression(raw.text[raw.tokens[1].start - base :])
        with self.statement_locks() as owner:
            self.lock_owner = owner
            snap = self.engine.begin_read(self.read_xact())
            self.current_snapshot = snap
            try:
                return Compiler(self, Scope()).compile(node).fn(()) is True
            finally:
                self.engine.end_read(snap)

    def _run_statement(self, raw: RawStatement, first: bool) -> Iterator[Any]:
        x = self.xact
        mark = len(x.undo) if x is not None else 0
        self._pending_error = None
        try:
            for ev in self._dispatch(raw, first):
                if isinstance(ev, ResultSet):
                    ev = ResultSet(ev.columns, self._guard(ev.rows))
                yield ev
                if self._pending_error is not None:
                    raise self._pending_error
            self._end_statement()
            self.last_error = 0
            return True
        except Exception as exc:
            err = exc if isinstance(exc, SqlError) else _internal_error(exc, raw.text)
            self._pending_error = None
            self.last_error = err.number
            self._fail_statement(err, mark)
            yield ErrorEvent(err)
            if err.number in TERMINATING_STATEMENT_ERRORS:
                yield Message(3621, 0, 0, "The statement has been terminated.")
            return err.number in STATEMENT_LEVEL_ERRORS and err.number != 1205

    def _guard(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        try:
            yield from rows
        except SqlError as e:
            self._pending_error = e
        except Exception as e:
            self._pending_error = _internal_error(e, "SELECT")

    def _dispatch(self, raw: RawStatement, first: bool) -> Iterator[Any]:
        if self.table_variables and "@" in raw.text:
            raw = self._with_table_variables(raw)
        words = raw.words
        w0 = words[0]
        w1 = words[1] if len(words) > 1 else ""
        if w0 == "DECLARE" and (m := _TABLE_VARIABLE.match(raw.text)):
            yield from self._declare_table_variable(m.group(1), m.group(2))
            return
        if w0 == "WITH" and (prefix := self.engine.registry.statement_prefixes.get(w1)) is not None:
            yield from prefix(
                self, raw, lambda inner: self._dispatch(inner, first)
            )  # WITH CHANGE_TRACKING_CONTEXT
            return
        if self.options.implicit_transactions and self.trancount == 0 and _starts_implicit_transaction(raw):
            # the unseen BEGIN TRANSACTION of implicit transaction mode (set-implicit-transactions-transact-sql.md)
            yield from self.begin_transaction()
        if w0 == "BEGIN":
            if w1 in ("TRAN", "TRANSACTION"):
                name = raw.tokens[2].text if len(raw.tokens) > 2 else ""
                yield from self.begin_transaction(name)
                yield StatementDone(None)
                return
            if w1 == "DISTRIBUTED":
                raise not_supported("distributed transactions")
            raise not_supported(
                f"BEGIN {w1} (TRY ... CATCH)" if w1 in ("TRY", "CATCH") else "this BEGIN form"
            )
        if w0 in ("COMMIT", "ROLLBACK"):
            name = ""
            if len(words) > 2 and w1 in ("TRAN", "TRANSACTION", "WORK"):
                name = raw.tokens[2].text
            elif len(words) > 1 and w1 not in ("TRAN", "TRANSACTION", "WORK"):
                name = raw.tokens[1].text
            if w0 == "COMMIT":
                yield from self.commit_transaction()
            else:
                yield from self.rollback_transaction(name)
            yield StatementDone(None)
            return
        if w0 == "SAVE":
            if w1 not in ("TRAN", "TRANSACTION") or len(words) < 3:
                raise syntax_error(raw.tokens[-1].text)
            self.save_transaction(raw.tokens[2].text)
            yield StatementDone(None)
            return
        if w0 == "SET":
            yield from self._set(raw)
            return
        if w0 == "USE":
            name = raw.tokens[1].text
            old = self.database
            db = self.engine.databases.get(name.lower())
            if db is None:
                raise unknown_database(name)
            if not self.has_db_access(db.name):
                raise SqlError(
                    916,
                    14,
                    2,
                    f'The server principal "{self.login.name}" is not able to access the database "{db.name}" under the current security context.',
                )
            self.database = db.name
            yield EnvChange("database", db.name, old)
            yield Message(5701, 2, 0, f"Changed database context to '{db.name}'.")
            yield StatementDone(None)
            return
        if w0 in ("RAISERROR", "THROW"):
            yield from self._raise(raw)
            return
        if w0 in ("EXEC", "EXECUTE") or (
            first
            and raw.tokens[0].token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            and w0 not in ("WITH",)
        ):
            yield from self._exec_statement(raw, implicit=w0 not in ("EXEC", "EXECUTE"))
            return
        if w0 == "PRINT":
            e = parse_expression(raw.text[raw.tokens[1].start - raw.tokens[0].start :])
            c = Compiler(self, Scope())
            ex = c.compile(e)
            v = ex.fn(())
            text = "" if v is None else V.to_text(v, ex.type)
            yield Message(0, 1, 0, text)
            yield StatementDone(None)
            return
        if w0 in ("GRANT", "REVOKE", "DENY"):
            self._grant(raw)
            yield StatementDone(None)
            return
        if w0 == "CHECKPOINT":
            yield StatementDone(None)
            return

        if w0 in (
            "IF",
            "MERGE",
            "RETURN",
            "WAITFOR",
            "DBCC",
            "GOTO",
            "OPEN",
            "FETCH",
            "CLOSE",
            "DEALLOCATE",
            "BULK",
            "READTEXT",
            "WRITETEXT",
            "UPDATETEXT",
            "BACKUP",
            "RESTORE",
            "KILL",
            "SHUTDOWN",
            "RECONFIGURE",
            "ENABLE",
            "DISABLE",
        ):
            raise not_supported(f"{w0} statements")
        if w0 == "INSERT" and (exec_at := _top_level_exec(raw)) is not None:
            yield from self._insert_exec(raw, exec_at)
            return
        handled = ddl.try_special_ddl(self, raw)
        if handled is not None:
            yield from handled
            return
        node = parse_statement(raw.text)
        yield from self._execute_node(node, raw)

    def _execute_node(self, node: exp.Expression, raw: RawStatement) -> Iterator[Any]:
        if isinstance(node, (exp.Select, exp.Union, exp.Except, exp.Intersect, exp.Subquery)):
            xact = self.read_xact()
            snap_holder: list[int] = []
            self._check_snapshot_allowed()
            with self.statement_locks() as lock_owner:
                self.lock_owner = lock_owner
                q = compile_query(self, node)
                if q.assignments:
                    snap = self.engine.begin_read(xact)
                    self.current_snapshot = snap
                    try:
                        q.run()
                    finally:
                        self.engine.end_read(snap)
                    yield StatementDone(None)
                    return
                snap = self.engine.begin_read(xact)
                snap_holder.append(snap)
                self.current_snapshot = snap
                try:
                    count = [0]
                    rows = _counted(q.run(), count)
                    yield ResultSet(q.columns, rows)
                finally:
                    self.engine.end_read(snap)
            self.last_rowcount = count[0]
            yield StatementDone(count[0])
            return
        if isinstance(node, (exp.Insert, exp.Update, exp.Delete)):
            with self.statement_locks() as lock_owner:
                self.lock_owner = lock_owner
                n, output = dml.execute(self, node)
            self.last_rowcount = n
            if output is not None:
                yield ResultSet(output.columns, output.rows)
            yield StatementDone(n)
            return
        if isinstance(node, exp.Declare):
            yield from self._declare(node)
            return
        if isinstance(node, (exp.Create, exp.Drop, exp.Alter, exp.TruncateTable)):
            yield from ddl.execute(self, node, raw.text)
            return
        if isinstance(node, exp.Command):
            raise not_supported(
                f"the statement {raw.text.split()[0].upper()} {raw.text.split()[1].upper() if len(raw.text.split()) > 1 else ''}".strip()
            )
        raise not_supported(f"the statement {type(node).__name__.upper()}")

    def _check_snapshot_allowed(self) -> None:
        if self.isolation == "SNAPSHOT" and not self.current_db().allow_snapshot_isolation:
            raise SqlError(
                3952,
                16,
                1,
                f"Snapshot isolation transaction failed accessing database '{self.database}' because snapshot isolation is "
                "not allowed in this database. Use ALTER DATABASE to allow snapshot isolation.",
            )

    def _raise(self, raw: RawStatement) -> Iterator[Any]:
        """RAISERROR (msg, severity, state) and THROW number, message, state."""
        base = raw.tokens[0].start
        rest = raw.text[raw.tokens[1].start - base :].strip() if len(raw.tokens) > 1 else ""
        if raw.words[0] == "THROW":
            if not rest:
                raise not_supported("THROW without arguments (re-throw outside CATCH)")
            args = [self._eval_arg(t).value for _n, t, _o in self._exec_args(raw, 1)]
            number, message, state = int(args[0]), str(args[1]), int(args[2])
            raise SqlError(number, 16, state, message)
        if rest.startswith("(") and rest.endswith(")"):
            inner = RawStatement(rest[1:-1], [t for t in raw.tokens[2:-1]])
            args = [self._eval_arg(t).value for _n, t, _o in self._exec_args(inner, 0)]
        else:
            args = [self._eval_arg(t).value for _n, t, _o in self._exec_args(raw, 1)]
        message, severity, state = args[0], int(args[1]), int(args[2])
        number = 50000
        if isinstance(message, int):
            number, message = message, f"Error {message}"
        text = str(message)
        for value in args[3:]:  # printf-style substitution of %s / %d
            text = re.sub(r"%[-+ 0#]*\d*(?:\.\d+)?[sdiuxXo]", lambda m, v=value: str(v), text, count=1)
        if severity <= 10:
            yield Message(number, state, severity, text)
            yield StatementDone(None)
            return
        raise SqlError(number, severity, state, text)

    def _grant(self, raw: RawStatement) -> None:
        """GRANT / REVOKE / DENY: server permissions VIEW SERVER [PERFORMANCE] STATE are kept; others are ignored."""
        text = " ".join(raw.text.split()).upper()
        m = re.match(
            r"(GRANT|REVOKE|DENY) (VIEW SERVER (?:PERFORMANCE )?STATE) (?:TO|FROM) \[?([^\];]+)\]?", text
        )
        if not m:
            return  # database object permissions are not enforced (see docs/simulator.md)
        verb, permission, grantee = m.group(1), m.group(2), m.group(3).strip()
        login = self.engine.logins.get(grantee.lower())
        if login is None:
            raise missing_principal(action="find", kind="login", name=grantee)
        if verb == "GRANT":
            login.server_permissions.add(permission)
        else:
            login.server_permissions.discard(permission)

    def require_server_permission(self, permission: str) -> None:
        """Error 300 unless the login holds *permission* (sysadmin holds all)."""
        if not self.login.has_server_permission(permission):
            raise SqlError(
                300,
                14,
                1,
                f"{permission} permission was denied on object 'server', database 'master'.",
            )

    # ---------------------------------------------------------------- statement-scope locks
    def statement_locks(self) -> Any:
        return _StatementLocks(self)

    def acquire_table_lock(self, table: Table, mode: str, hold: bool) -> None:
        """Take a table lock for the current statement (or transaction when *hold*)."""
        owner = self.xact if self.xact is not None else getattr(self, "lock_owner", None)
        if owner is None:
            owner = self.write_xact()
        self.engine.locks.acquire(owner, table.object_id, mode, self.lock_timeout)

    def table_source(self, node: exp.Table, alias: str, hints: list[str], outer: Scope | None = None) -> Any:
        """A FROM item for a table, view, system catalog or table-valued function (its arguments see *outer*)."""
        return table_source(self, node, alias, hints, outer)

    def compile_subquery(self, node: exp.Expression, outer: Scope | None) -> SubqueryPlan:
        """Compile a subquery of an expression.

        :param node: the subquery's SELECT (or set operation).
        :param outer: the scope of the expression, for correlated column references.
        """
        return compile_query(self, node, outer)

    # ---------------------------------------------------------------- SET
    def _set(self, raw: RawStatement) -> Iterator[Any]:
        words = raw.words
        w1 = words[1] if len(words) > 1 else ""
        if raw.tokens[1].token_type == TokenType.PARAMETER or raw.tokens[1].text.startswith("@"):
            # SET @var = expr  /  SET @var += expr
            m = re.match(r"\s*SET\s+(@[\w@#$]+)\s*([-+*/%]?=)\s*(.*)$", raw.text, re.S | re.I)
            if not m:
                raise syntax_error(raw.tokens[-1].text)
            name, op, expr_text = m.group(1), m.group(2), m.group(3)
            var = self.variables.get(name.lower())
            if var is None:
                raise must_declare(name)
            if op != "=":
                expr_text = f"{name} {op[0]} ({expr_text})"
            node = parse_expression(expr_text)
            with self.statement_locks() as owner:
                self.lock_owner = owner
                snap = self.engine.begin_read(self.read_xact())
                self.current_snapshot = snap
                try:
                    e = Compiler(self, Scope()).compile(node)
                    conv = converter(e.type, var.type)
                    v = e.fn(())
                    var.value = conv(v) if conv and v is not None else v
                finally:
                    self.engine.end_read(snap)
            yield StatementDone(None)
            return
        if w1 == "TRANSACTION" and len(words) >= 5 and words[2] == "ISOLATION" and words[3] == "LEVEL":
            level = " ".join(words[4:])
            mapping = {
                "READ COMMITTED": "READ COMMITTED",
                "READ UNCOMMITTED": "READ COMMITTED",
                "REPEATABLE READ": "READ COMMITTED",
                "SERIALIZABLE": "READ COMMITTED",
                "SNAPSHOT": "SNAPSHOT",
            }
            if level not in mapping:
                raise syntax_error(words[-1])
            self.isolation = mapping[level]
            self.declared_isolation = level
            if self.xact is not None and not self.xact.undo and self.xact.snapshot is None:
                self.xact.isolation = self.isolation
            yield StatementDone(None)
            return
        if w1 == "NOCOUNT":
            self.options.nocount = words[2] == "ON"
        elif w1 == "XACT_ABORT":
            self.options.xact_abort = words[2] == "ON"
        elif w1 == "IMPLICIT_TRANSACTIONS":
            self.options.implicit_transactions = words[2] == "ON"
        elif w1 == "ANSI_DEFAULTS" and words[-1] == "ON":
            # ON sets ANSI_NULLS, ANSI_WARNINGS, ... and IMPLICIT_TRANSACTIONS (set-ansi-defaults-transact-sql.md)
            self.options.implicit_transactions = True
        elif w1 == "LOCK_TIMEOUT":
            self.lock_timeout = int(raw.tokens[-1].text) * (-1 if words[2] == "-" else 1)
        elif w1 == "IDENTITY_INSERT":
            base = raw.tokens[0].start
            table_text = raw.text[raw.tokens[2].start - base : raw.tokens[-2].end + 1 - base]
            t = self.lookup_table_by_text(table_text)
            if t is None:
                raise invalid_object(table_text)
            if words[-1] == "ON":
                self.options.identity_insert.add(t.object_id)
            else:
                self.options.identity_insert.discard(t.object_id)
        elif w1 == "ROWCOUNT":
            if raw.tokens[2].text not in ("0",):
                raise not_supported("SET ROWCOUNT with a non-zero value")
        elif w1 in (
            "ANSI_NULLS",
            "ANSI_WARNINGS",
            "ANSI_PADDING",
            "ANSI_NULL_DFLT_ON",
            "ANSI_NULL_DFLT_OFF",
            "ARITHABORT",
            "ARITHIGNORE",
            "CONCAT_NULL_YIELDS_NULL",
            "QUOTED_IDENTIFIER",
            "NUMERIC_ROUNDABORT",
            "TEXTSIZE",
            "DATEFORMAT",
            "DATEFIRST",
            "LANGUAGE",
            "DEADLOCK_PRIORITY",
            "CURSOR_CLOSE_ON_COMMIT",
            "STATISTICS",
            "FMTONLY",
            "NOEXEC",
            "PARSEONLY",
            "SHOWPLAN_ALL",
            "SHOWPLAN_TEXT",
            "SHOWPLAN_XML",
            "QUERY_GOVERNOR_COST_LIMIT",
            "NO_BROWSETABLE",
            "FORCEPLAN",
            "CONTEXT_INFO",
            "ANSI_DEFAULTS",
            "REMOTE_PROC_TRANSACTIONS",
            "XACT_ABORT",
        ):
            if w1 in ("FMTONLY", "NOEXEC", "PARSEONLY") and words[-1] == "ON":
                raise not_supported(f"SET {w1} ON")
            if w1 == "DATEFORMAT" and words[-1] not in ("YMD", "MDY"):
                raise not_supported(f"SET DATEFORMAT {words[-1]}")
            _refuse_other_semantics(w1, words)
        else:
            raise not_supported(f"SET {w1}")
        yield StatementDone(None)

    # ---------------------------------------------------------------- DECLARE
    def _declare(self, node: exp.Declare) -> Iterator[Any]:
        for item in node.expressions:
            targets = item.this if isinstance(item.this, list) else [item.this]
            kind = item.args.get("kind")
            if not isinstance(kind, exp.DataType):
                raise not_supported("DECLARE of table variables or cursors")
            name, args = type_name_of(kind)
            t = T.make_type(name, args)
            if name in ("varchar", "nvarchar", "char", "nchar", "binary", "varbinary") and not args:
                t = T.SqlType(t.name, length=1)
            for target in targets:
                vname = "@" + target.name
                if vname.lower() in self.variables and not getattr(self, "_redeclare_ok", False):
                    raise SqlError(
                        134,
                        15,
                        1,
                        f"The variable name '{vname}' has already been declared. Variable names must be unique within a query batch or stored procedure.",
                    )
                var = Variable(vname, t)
                default = item.args.get("default")
                if isinstance(default, exp.Expression):
                    e = Compiler(self, Scope()).compile(default)
                    snap = self.engine.begin_read(self.read_xact())
                    self.current_snapshot = snap
                    try:
                        v = e.fn(())
                    finally:
                        self.engine.end_read(snap)
                    conv = converter(e.type, t)
                    var.value = conv(v) if conv and v is not None else v
                self.variables[vname.lower()] = var
        yield StatementDone(None)

    def clear_variables(self) -> None:
        """Variables live for one batch (table variables too)."""
        self.variables.clear()
        for name in list(self.table_variables):
            self._drop_table_variable(name)

    # ---------------------------------------------------------------- table variables
    def _with_table_variables(self, raw: RawStatement) -> RawStatement:
        """*raw* with each declared table variable ``@t`` replaced by the temporary table holding it."""

        def name_of(m: re.Match[str]) -> str:
            temp = self.table_variables.get(m.group(1).lower())
            return f"[{temp}]" if temp else m.group(0)

        text = re.sub(r"(?<![@\w])@(\w+)", name_of, raw.text)
        return raw if text == raw.text else split_batch(text)[0]

    def _declare_table_variable(self, name: str, body: str) -> Iterator[Any]:
        """``DECLARE @name TABLE (columns)``: kept in a temporary table private to this session."""
        if name.lower() in self.table_variables:
            self._drop_table_variable(name.lower())
        temp = f"#tv_{name}"
        created = ddl.try_special_ddl(self, split_batch(f"CREATE TABLE [{temp}] ({body})")[0])
        if created is None:
            raise not_supported("this table variable declaration")
        yield from created
        self.table_variables[name.lower()] = temp

    def _drop_table_variable(self, name: str) -> None:
        temp = self.table_variables.pop(name)
        if self.lookup_table_by_text(temp) is not None:
            text = f"DROP TABLE [{temp}]"
            for _ev in ddl.execute(self, parse_statement(text), text):
                pass

    def _insert_exec(self, raw: RawStatement, exec_at: int) -> Iterator[Any]:
        """``INSERT [INTO] target [(columns)] EXEC procedure ...``: the procedure's rows go into target."""
        base = raw.tokens[0].start
        head = raw.text[: raw.tokens[exec_at].start - base]
        call = split_batch(raw.text[raw.tokens[exec_at].start - base :])[0]
        rows: list[tuple[Any, ...]] = []
        types: list[T.SqlType] | None = None
        saved_rpc = self.in_rpc
        self.in_rpc = True  # no DONE of its own: the INSERT reports the row count
        try:
            for ev in self._exec_statement(call, implicit=False):
                if isinstance(ev, ResultSet):
                    rows.extend(ev.rows)
                    types = types or [c.type for c in ev.columns]
                elif not isinstance(ev, StatementDone):
                    yield ev
        finally:
            self.in_rpc = saved_rpc
        node = parse_statement(head + " SELECT 1").copy()
        node.set("expression", None)
        self.insert_exec_source = (rows, types)
        try:
            with self.statement_locks() as lock_owner:
                self.lock_owner = lock_owner
                n, _output = dml.execute(self, node)
        finally:
            self.insert_exec_source = None
        self.last_rowcount = n
        yield StatementDone(n)

    # ---------------------------------------------------------------- EXEC
    def _exec_statement(self, raw: RawStatement, implicit: bool) -> Iterator[Any]:
        toks = raw.tokens
        i = 0 if implicit else 1
        ret_var = None
        if (
            i + 2 < len(toks)
            and toks[i].token_type == TokenType.PARAMETER
            and toks[i + 2].token_type == TokenType.EQ
        ):
            # EXEC @ret = proc ...
            ret_var = "@" + toks[i + 1].text
            i += 3
        if i < len(toks) and toks[i].token_type == TokenType.L_PAREN:
            # EXEC ('sql')
            inner = raw.text[toks[i].end + 1 - toks[0].start : toks[-1].start - toks[0].start]
            e = Compiler(self, Scope()).compile(parse_expression(inner))
            sql = e.fn(())
            yield from self.nested_batch(sql)
            return
        # procedure name: dotted identifiers
        name_parts = []
        while i < len(toks):
            tk = toks[i]
            if tk.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or (
                tk.token_type
                not in (
                    TokenType.PARAMETER,
                    TokenType.NUMBER,
                    TokenType.STRING,
                    TokenType.NATIONAL_STRING,
                    TokenType.COMMA,
                    TokenType.DOT,
                    TokenType.HEX_STRING,
                    TokenType.DASH,
                    TokenType.L_PAREN,
                )
                and tk.text.isidentifier()
            ):
                name_parts.append(tk.text)
                i += 1
                if i < len(toks) and toks[i].token_type == TokenType.DOT:
                    i += 1
                    while i < len(toks) and toks[i].token_type == TokenType.DOT:
                        name_parts.append("")
                        i += 1
                    continue
                break
            break
        if not name_parts:
            raise syntax_error(toks[min(i, len(toks) - 1)].text)
        proc = ".".join(name_parts)
        args = self._exec_args(raw, i)
        yield from self.call_procedure(proc, args, ret_var)

    def _exec_args(self, raw: RawStatement, start: int) -> list[tuple[str | None, str, bool]]:
        """(name or None, expression text, output) per argument."""
        toks = raw.tokens[start:]
        args: list[tuple[str | None, str, bool]] = []
        depth = 0
        cur: list[Any] = []

        def flush() -> None:
            if not cur:
                return
            name = None
            body = cur
            if (
                len(body) >= 3
                and body[0].token_type == TokenType.PARAMETER
                and body[2].token_type == TokenType.EQ
            ):
                name = "@" + body[1].text
                body = body[3:]
            output = False
            if body and body[-1].text.upper() in ("OUTPUT", "OUT"):
                output = True
                body = body[:-1]
            if not body:
                raise syntax_error(",")
            text = raw.text[body[0].start - raw.tokens[0].start : body[-1].end - raw.tokens[0].start + 1]
            args.append((name, text, output))

        for tk in toks:
            if tk.token_type == TokenType.L_PAREN:
                depth += 1
            elif tk.token_type == TokenType.R_PAREN:
                depth -= 1
            if tk.token_type == TokenType.COMMA and depth == 0:
                flush()
                cur = []
                continue
            cur.append(tk)
        flush()
        return args

    def _eval_arg(self, text: str) -> TypedValue:
        if text.upper() == "DEFAULT":
            return TypedValue(T.INT, ...)
        node = parse_expression(text)
        if isinstance(node, exp.Column) and not node.table:
            # bare words are strings in EXEC arguments (EXEC sp_x dbo)
            return TypedValue(T.nvarchar(len(node.name) or 1), node.name)
        e = Compiler(self, Scope()).compile(node)
        return TypedValue(e.type, e.fn(()))

    def call_procedure(
        self, proc: str, raw_args: list[tuple[str | None, str, bool]], ret_var: str | None = None
    ) -> Iterator[Any]:
        key = proc.lower().strip("[]")
        short = key.split(".")[-1]
        if short == "sp_executesql":
            yield from self._sp_executesql_text(raw_args)
            return
        args = ProcedureArgs()
        for name, text, output in raw_args:
            tv = self._eval_arg(text)
            if name:
                args.named[name.lstrip("@").lower()] = tv
                if output:
                    args.output_names.add(name.lstrip("@").lower())
            else:
                args.positional.append(tv)
        yield from self.run_procedure(proc, args, ret_var)
        # OUTPUT arguments: @param = @variable OUTPUT receives the procedure's value
        outputs = getattr(self, "last_outputs", None) or {}
        for name, text, output in raw_args:
            if output and name and text.startswith("@"):
                var = self.variables.get(text.lower())
                key = name.lstrip("@").lower()
                if var is not None and key in outputs:
                    var.value = outputs[key]

    def run_procedure(self, proc: str, args: ProcedureArgs, ret_var: str | None = None) -> Iterator[Any]:
        parts = [p.strip("[]") for p in proc.split(".")]
        saved_db = None
        if len(parts) == 3 and parts[0]:
            target = self.engine.databases.get(parts[0].lower())
            if target is None:
                raise unknown_database(parts[0])
            saved_db = self.database
            self.database = target.name
        try:
            fn = self.engine.registry.find_procedure(proc)
            if fn is None:
                fn = procedures.BUILTIN.get(parts[-1].lower())
            if fn is None:
                if parts[-1].lower() in SYSTEM_PROCEDURES:
                    raise not_supported(f"the system stored procedure {parts[-1]}")
                raise unknown_procedure(proc)
            result = fn(self, args)
            if isinstance(result, Iterator):
                result = yield from result
            if result is None:
                result = ProcedureResult()
            for rs in result.result_sets:
                count = [0]
                yield ResultSet(rs.columns, _counted(rs.rows, count))
                yield StatementDone(count[0])
            for text in result.messages:
                yield Message(0, 1, 0, text)
            if ret_var:
                var = self.variables.get(ret_var.lower())
                if var is None:
                    raise must_declare(ret_var)
                var.value = result.return_status
            self.last_return_status = result.return_status
            self.last_outputs = result.outputs
            if not self.in_rpc:
                yield StatementDone(None)
        finally:
            if saved_db is not None:
                self.database = saved_db

    def _sp_executesql_text(self, raw_args: list[tuple[str | None, str, bool]]) -> Iterator[Any]:
        values = [(n, self._eval_arg(t), o) for n, t, o in raw_args]
        if not values:
            raise SqlError(
                201,
                16,
                4,
                "Procedure or function 'sp_executesql' expects parameter '@statement', which was not supplied.",
            )
        sql = values[0][1].value
        decl = values[1][1].value if len(values) > 1 else ""
        params = [(n, tv) for n, tv, _o in values[2:]]
        yield from self.execute_parameterized(sql, decl or "", params)

    def nested_batch(self, sql: str) -> Iterator[Any]:
        """Run *sql* as a batch inside the current statement (its own variables; errors raise)."""
        saved = self.variables
        self.variables = {}
        try:
            for ev in self.execute_batch(sql):
                if isinstance(ev, ErrorEvent):
                    raise ev.error
                yield ev
        finally:
            self.variables = saved

    def prepare(self, declarations: str, sql: str) -> int:
        """Keep *sql* with its parameter declarations for ``sp_execute``; return its handle.

        :param declarations: the parameters as in sp_executesql (``@P1 int, @P2 nvarchar(10)``).
        :param sql: the statement text.
        """
        handle = self._next_handle
        self._next_handle += 1
        self.prepared[handle] = (declarations, sql)
        return handle

    def execute_parameterized(
        self, sql: str, declarations: str, params: list[tuple[str | None, TypedValue]]
    ) -> Iterator[Any]:
        """Run *sql* with parameters declared as in sp_executesql (``@P1 int, @P2 nvarchar(10)``)."""
        saved = self.variables
        self.variables = {}
        try:
            decls = parse_declarations(declarations)
            by_name = {}
            positional = []
            for name, tv in params:
                if name:
                    by_name[name.lower()] = tv
                else:
                    positional.append(tv)
            for i, (pname, ptype, _out) in enumerate(decls):
                tv = by_name.get(pname.lower())
                if tv is None and i < len(positional):
                    tv = positional[i]
                if tv is None:
                    raise SqlError(
                        8178,
                        16,
                        1,
                        f"The parameterized query '({declarations[:60]}' expects the parameter '{pname}', which was not supplied.",
                    )
                v = tv.value
                if v is ...:
                    v = None
                conv = converter(tv.type, ptype)
                self.variables[pname.lower()] = Variable(
                    pname, ptype, conv(v) if conv and v is not None else v
                )
            for ev in self.execute_batch(sql):
                yield ev
                if isinstance(ev, ErrorEvent) and ev.error.number not in STATEMENT_LEVEL_ERRORS:
                    return
        finally:
            self.param_values = self.variables
            self.variables = saved


# SET options whose other values change what a statement answers: the simulator computes only these
# (what drivers send at connect: ANSI behaviour, us_english, Sunday first); the rest are refused
_ONLY_SUPPORTED_SETTING = {
    "ANSI_NULLS": ("ON",),
    "ANSI_WARNINGS": ("ON",),
    "ANSI_PADDING": ("ON",),
    "CONCAT_NULL_YIELDS_NULL": ("ON",),
    "QUOTED_IDENTIFIER": ("ON",),
    "NUMERIC_ROUNDABORT": ("OFF",),
    "DATEFIRST": ("7",),
    "LANGUAGE": ("US_ENGLISH", "ENGLISH", "[US_ENGLISH]", "N'US_ENGLISH'", "'US_ENGLISH'"),
}


def _refuse_other_semantics(option: str, words: list[str]) -> None:
    """40517 for ``SET option value`` when that value would make the simulator answer differently."""
    allowed = _ONLY_SUPPORTED_SETTING.get(option)
    value = " ".join(words[2:])
    if allowed is not None and value not in allowed:
        raise not_supported(f"SET {option} {value} (only {' / '.join(allowed[:2])})")
    if option == "ANSI_DEFAULTS" and value == "OFF":
        raise not_supported("SET ANSI_DEFAULTS OFF (it turns ANSI_NULLS and ANSI_WARNINGS off)")


_TABLE_VARIABLE = re.compile(r"\s*DECLARE\s+@(\w+)\s+(?:AS\s+)?TABLE\s*\((.*)\)\s*;?\s*$", re.I | re.S)


def _top_level_exec(raw: RawStatement) -> int | None:
    """The index of the EXEC token of ``INSERT ... EXEC`` (outside parentheses), if any."""
    depth = 0
    for i, tk in enumerate(raw.tokens):
        if tk.token_type == TokenType.L_PAREN:
            depth += 1
        elif tk.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and i > 1 and tk.text.upper() in ("EXEC", "EXECUTE"):
            return i
    return None


_IMPLICIT_TRANSACTION_STATEMENTS = frozenset(
    ("ALTER", "CREATE", "DELETE", "DROP", "FETCH", "GRANT", "INSERT", "OPEN", "REVOKE", "DENY")
    + ("TRUNCATE", "UPDATE", "MERGE")
)


def _starts_implicit_transaction(raw: RawStatement) -> bool:
    """Whether a statement opens a transaction in implicit transaction mode.

    SELECT does only when it reads a table (``SELECT GETDATE()`` does not); BEGIN TRANSACTION does,
    so that an explicit one nests inside it (@@TRANCOUNT 2).
    """
    words = raw.words
    w0 = words[0]
    if w0 in _IMPLICIT_TRANSACTION_STATEMENTS:
        return True
    if w0 == "BEGIN":
        return len(words) > 1 and words[1] in ("TRAN", "TRANSACTION")
    if w0 in ("SELECT", "WITH", "("):
        return any(t.token_type == TokenType.FROM for t in raw.tokens)
    return False


def _control_flow(statements: list[RawStatement]) -> list[Any]:
    """Group a batch's statements into IF / ELSE and BEGIN ... END nodes."""
    for raw in statements:
        if raw.words[:2] in (["BEGIN", "TRY"], ["BEGIN", "CATCH"]):
            raise not_supported("TRY ... CATCH blocks")
    pos = 0

    def keyword(raw: RawStatement) -> str:
        return raw.words[0] if len(raw.tokens) == 1 or raw.words[0] in ("IF", "WHILE") else ""

    def one() -> Any:
        nonlocal pos
        if pos >= len(statements):
            raise SqlError(102, 15, 1, "Incorrect syntax near the end of the batch: a statement is missing.")
        raw = statements[pos]
        kw = keyword(raw)
        if kw == "BEGIN":
            pos += 1
            body = []
            while pos < len(statements) and keyword(statements[pos]) != "END":
                body.append(one())
            if pos >= len(statements):
                raise SqlError(102, 15, 1, "Incorrect syntax near 'BEGIN': END is missing.")
            pos += 1
            return ("block", body)
        if kw == "WHILE":
            pos += 1
            return ("while", raw, one())
        if kw == "IF":
            pos += 1
            then = one()
            other = None
            if pos < len(statements) and keyword(statements[pos]) == "ELSE":
                pos += 1
                other = one()
            return ("if", raw, then, other)
        if kw in ("END", "ELSE"):
            raise SqlError(156, 15, 1, f"Incorrect syntax near the keyword '{kw}'.")
        pos += 1
        return ("stmt", raw)

    nodes = []
    while pos < len(statements):
        nodes.append(one())
    return nodes


def _internal_error(exc: Exception, statement: str) -> SqlError:
    log.exception("simulator internal error in %r", statement[:200])
    return SqlError(
        8630,
        16,
        1,
        f"Internal error in the SQL Server simulator ({type(exc).__name__}: {exc}) while running: {statement[:200]}. "
        "Please report it with the statement.",
    )


@functools.lru_cache(maxsize=512)
def parse_declarations(text: str) -> tuple[tuple[str, T.SqlType, bool], ...]:
    """Parse ``@P1 int,@P2 nvarchar(max) OUTPUT`` parameter declarations."""
    out: list[tuple[str, T.SqlType, bool]] = []
    if not text or not text.strip():
        return ()
    depth = 0
    parts = []
    cur = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for p in parts:
        m = re.match(r"\s*(@[\w@#$]+)\s+(?:AS\s+)?([\w]+)\s*(?:\(\s*([^)]*)\))?\s*(OUTPUT|OUT)?\s*$", p, re.I)
        if not m:
            raise syntax_error(p.strip()[:30])
        name, tname, targs, output = m.groups()
        args = [a.strip() for a in targs.split(",")] if targs else []
        t = T.make_type(tname, args)
        out.append((name, t, bool(output)))
    return tuple(out)


def _split_name(text: str) -> list[str]:
    parts = []
    cur = ""
    i = 0
    text = text.strip()
    while i < len(text):
        ch = text[i]
        if ch == "[":
            j = i + 1
            buf = ""
            while j < len(text):
                if text[j] == "]":
                    if j + 1 < len(text) and text[j + 1] == "]":
                        buf += "]"
                        j += 2
                        continue
                    break
                buf += text[j]
                j += 1
            cur += buf
            i = j + 1
            continue
        if ch == '"':
            j = text.index('"', i + 1)
            cur += text[i + 1 : j]
            i = j + 1
            continue
        if ch == ".":
            parts.append(cur)
            cur = ""
            i += 1
            continue
        cur += ch
        i += 1
    parts.append(cur)
    return [p.strip() for p in parts]


def _counted(rows: Iterable[tuple[Any, ...]], count: list[int]) -> Iterator[tuple[Any, ...]]:
    n = 0
    try:
        for r in rows:
            n += 1
            yield r
    finally:
        count[0] = n


class _StatementLocks:
    """Context: a lock owner for statement-duration table locks when no transaction is open."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.owner: Transaction | None = None

    def __enter__(self) -> Transaction | None:
        s = self.session
        self.owner = Transaction(s, s.isolation, explicit=False, descriptor=0)
        return self.owner

    def __exit__(self, *exc: Any) -> None:
        if self.owner is not None:
            self.owner.done.set()
            self.session.engine.locks.release_all(self.owner)
            self.session.lock_owner = None


Rowset = Rowset
