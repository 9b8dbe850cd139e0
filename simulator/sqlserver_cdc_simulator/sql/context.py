"""What the SQL modules see of the server and of the session running a statement.

The modules of :mod:`.sql` (expressions, queries, DML, DDL, catalog views, procedures) compile
and run statements against an :class:`ExecutionContext`; :class:`~..session.Session` is the
implementation. Depending on these protocols instead of on ``session.py`` and ``engine.py``
keeps the imports one way: ``engine -> session -> sql/* -> sql/context``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Protocol

from sqlglot import exp

from sqlserver_cdc_simulator.clock import ServerClock
from sqlserver_cdc_simulator.extensions import ExtensionRegistry, ResultColumn
from sqlserver_cdc_simulator.log import SchemaChange
from sqlserver_cdc_simulator.login import Login
from sqlserver_cdc_simulator.storage import Database, Table, Transaction


class ServerState(Protocol):
    """The server (engine) as statements see it: databases, logins, clock, extensions, write path."""

    server_name: str
    version_string: str
    clock: ServerClock
    registry: ExtensionRegistry
    mutex: threading.RLock
    commit_seq: int
    databases: dict[str, Database]
    logins: dict[str, Login]
    sessions: dict[int, ExecutionContext]
    durable: Any  # the data directory's journal, or None in memory

    def database(self, name: str) -> Database: ...

    def database_by_id(self, database_id: int) -> Database | None: ...

    def database_name_by_id(self, database_id: int) -> str | None: ...

    def create_database(self, name: str) -> Database: ...

    def create_login(self, name: str, password: str, default_database: str = "master") -> Login: ...

    def server_property(self, name: str) -> Any: ...

    def begin_read(self, xact: Transaction | None) -> int: ...

    def end_read(self, snap: int) -> None: ...

    def next_rowversion(self, db: Database) -> bytes: ...

    def write_row(
        self, xact: Transaction, db: Database, table: Table, rowid: int | None, compute: Any
    ) -> tuple[str, Any]: ...

    def log_ddl(self, xact: Transaction, db: Database, table: Table | None, change: SchemaChange) -> None: ...


class SubqueryPlan(Protocol):
    """A compiled subquery as an expression uses it: its columns and a way to run it."""

    columns: list[ResultColumn]
    correlated: bool

    def run(self) -> Iterator[tuple[Any, ...]]: ...


class ExecutionContext(Protocol):
    """The session a statement runs in: login, current database, variables, transaction, options."""

    engine: ServerState
    login: Login
    database: str
    spid: int
    app_name: str
    host_name: str
    isolation: str
    variables: dict[str, Any]
    xact: Transaction | None
    options: Any
    lock_timeout: int
    last_rowcount: int
    last_identity: int | None
    last_error: int
    temp_tables: set[str]
    current_snapshot: int | None
    ctes: dict[str, tuple[exp.Expression, list[str]]]
    ctes_compiling: set[str]

    @property
    def trancount(self) -> int: ...

    def current_db(self) -> Database: ...

    def default_schema(self) -> str: ...

    def user_name(self) -> str: ...

    def is_member(self, role: str) -> int | None: ...

    def has_db_access(self, database: str) -> bool: ...

    def lookup_table_by_text(self, name: str) -> Table | None: ...

    def temp_table_name(self, name: str) -> str: ...

    def resolve_table(
        self, node: exp.Table, must_exist: bool = True
    ) -> tuple[Any, Table | None, str, str]: ...

    def write_xact(self) -> Transaction: ...

    def acquire_table_lock(self, table: Table, mode: str, hold: bool) -> None: ...

    def require_server_permission(self, permission: str) -> None: ...

    def table_source(self, node: exp.Table, alias: str, hints: list[str], outer: Any = None) -> Any: ...

    def compile_subquery(self, node: exp.Expression, outer: Any) -> SubqueryPlan: ...

    def nested_batch(self, sql: str) -> Iterator[Any]: ...
