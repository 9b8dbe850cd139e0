"""Extension registry: system procedures, functions, views and DDL hooks added by other modules.

The CDC module (part 2) registers its objects here; the engine consults the registry when a
statement names something it does not know itself. Every callable receives the calling
:class:`~.session.Session` first; it raises :class:`~.errors.SqlError` for errors.

* ``procedure(name, fn)``: ``EXEC name @a = 1, 2`` calls ``fn(session, args)`` where *args* is a
  :class:`ProcedureArgs` (named and positional :class:`TypedValue` arguments). It returns a
  :class:`ProcedureResult` (result sets, return status) or None.
* ``scalar_function(name, fn, returns)``: ``SELECT name(x, y)`` calls ``fn(session, [TypedValue...])``
  and returns a value of type *returns* (a SqlType, or a function of the argument types).
* ``table_function_prefix(prefix, fn)``: ``FROM prefix<suffix>(a, b)`` calls
  ``fn(session, suffix, [TypedValue...])`` returning a :class:`Rowset`.
* ``view(name, fn)``: a system view / table such as ``sys.something`` or ``msdb.dbo.x`` computed by
  ``fn(session, database)`` returning a :class:`Rowset`.
* ``ddl_hook(fn)``: ``fn(session, event)`` before and after DDL on a table (:class:`DdlEvent`);
  raising :class:`~.errors.SqlError` from a ``before`` event cancels the statement.
* ``reset_hooks``: functions ``fn(engine)`` that :meth:`~.engine.Engine.reset` calls first.
* ``state_hook(name, dump, load)``: keep extension state of a database across restarts with
  ``--data``: ``dump(database)`` returns a picklable value stored in the snapshot, ``load(database,
  value)`` restores it on start.

The engine installs the CDC objects itself when the :mod:`.cdc` package is present
(``cdc.registration.register_cdc(registry)``).

Names are matched case-insensitively with any schema prefix written out (``sys.fn_cdc_get_max_lsn``);
a name registered with the ``sys.`` prefix also matches without it, as SQL Server resolves
system objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .types import SqlType, make_type


@dataclass(frozen=True, slots=True)
class TypedValue:
    """A value with its SQL type (values in :mod:`.types` representation)."""

    type: SqlType
    value: Any


@dataclass(frozen=True, slots=True)
class ResultColumn:
    """A column of a result set or rowset."""

    name: str
    type: SqlType
    nullable: bool = True


_COLUMN_SPEC = re.compile(r"\s*(\w+)\s+(\w+)(?:\(([^)]*)\))?(\s+NOT NULL)?\s*(?:,|$)")


def result_columns(spec: str) -> list[ResultColumn]:
    """The columns of a system view or procedure result, written as in its documentation.

    :param spec: ``"name type [NOT NULL], ..."``; a type takes its arguments in parentheses
        (``nvarchar(60)``, ``decimal(25,0)``, ``nvarchar(max)``, ``binary(10)``).
    """
    return [
        ResultColumn(
            m.group(1), make_type(m.group(2), m.group(3).split(",") if m.group(3) else None), not m.group(4)
        )
        for m in _COLUMN_SPEC.finditer(spec.strip())
    ]


@dataclass
class Rowset:
    """Columns and rows (tuples in column order); rows may be any iterable, consumed once."""

    columns: list[ResultColumn]
    rows: Iterable[tuple[Any, ...]]


@dataclass
class ProcedureArgs:
    """Arguments of an EXEC: named (lower-case name without ``@``) and positional."""

    named: dict[str, TypedValue] = field(default_factory=dict)
    positional: list[TypedValue] = field(default_factory=list)
    output_names: set[str] = field(default_factory=set)

    def get(self, name: str, position: int | None = None, default: Any = None) -> Any:
        """The value of ``@name`` (or of the positional argument *position*, 0-based), else *default*."""
        key = name.lstrip("@").lower()
        if key in self.named:
            return self.named[key].value
        if position is not None and position < len(self.positional):
            return self.positional[position].value
        return default

    def has(self, name: str) -> bool:
        return name.lstrip("@").lower() in self.named


@dataclass
class ProcedureResult:
    """What a procedure returns: result sets, a return status, output parameter values by name."""

    result_sets: list[Rowset] = field(default_factory=list)
    return_status: int = 0
    outputs: dict[str, Any] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)


@dataclass
class DdlEvent:
    """DDL on a table. *phase* is ``before`` or ``after``; *kind* is ``create_table``, ``drop_table``,
    ``add_column``, ``drop_column``, ``truncate_table``, ``alter_column`` or ``drop_primary_key`` (its
    ``columns`` the constraint's name)."""

    phase: str
    kind: str
    database: str
    schema: str
    table: str
    object_id: int
    columns: tuple[str, ...]
    statement: str


ProcedureFn = Callable[[Any, ProcedureArgs], "ProcedureResult | None"]
ScalarFn = Callable[[Any, list[TypedValue]], Any]
TableFn = Callable[[Any, str, list[TypedValue]], Rowset]
ViewFn = Callable[[Any, Any], Rowset]
DdlHook = Callable[[Any, DdlEvent], None]


def _key(name: str) -> str:
    parts = [p.strip("[]").lower() for p in name.split(".")]
    return ".".join(parts)


class ExtensionRegistry:
    """Registered procedures, functions, views and hooks."""

    def __init__(self) -> None:
        self.procedures: dict[str, ProcedureFn] = {}
        self.scalar_functions: dict[str, tuple[ScalarFn, Any]] = {}
        self.table_prefixes: list[tuple[str, TableFn]] = []
        self.views: dict[str, ViewFn] = {}
        self.ddl_hooks: list[DdlHook] = []
        self.reset_hooks: list[Callable[[Any], None]] = []
        self.state_hooks: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any], None]]] = {}
        self.commit_hooks: list[Callable[[Any, list[tuple[Any, Any]], int], None]] = []
        self.statement_hooks: list[Callable[[Any, Any], Any]] = []
        self.statement_prefixes: dict[str, Callable[[Any, Any, Callable[[Any], Any]], Any]] = {}
        self.value_checks: list[Callable[[Any, Any, Any, Any], None]] = []

    def procedure(self, name: str, fn: ProcedureFn) -> None:
        """Register ``EXEC name``."""
        self.procedures[_key(name)] = fn

    def scalar_function(
        self, name: str, fn: ScalarFn, returns: SqlType | Callable[[list[SqlType]], SqlType]
    ) -> None:
        """Register a scalar function returning type *returns*."""
        self.scalar_functions[_key(name)] = (fn, returns)

    def table_function_prefix(self, prefix: str, fn: TableFn) -> None:
        """Register table-valued functions whose (schema-qualified) name starts with *prefix*."""
        self.table_prefixes.append((_key(prefix), fn))

    def view(self, name: str, fn: ViewFn) -> None:
        """Register a computed table/view, e.g. ``sys.dm_cdc_log_scan_sessions`` or ``msdb.dbo.cdc_jobs``."""
        self.views[_key(name)] = fn

    def functions_and_views(
        self,
        scalar_functions: dict[str, tuple[ScalarFn, Any]],
        table_function_prefixes: dict[str, TableFn],
        views: dict[str, ViewFn],
    ) -> None:
        """Register a feature's tables of scalar functions (name: (fn, returns)), table-valued function
        prefixes and views, as :meth:`scalar_function`, :meth:`table_function_prefix` and :meth:`view`."""
        for name, (fn, returns) in scalar_functions.items():
            self.scalar_function(name, fn, returns)
        for prefix, table_fn in table_function_prefixes.items():
            self.table_function_prefix(prefix, table_fn)
        for name, view in views.items():
            self.view(name, view)

    def state_hook(self, name: str, dump: Callable[[Any], Any], load: Callable[[Any, Any], None]) -> None:
        """Persist per-database extension state in the data directory's snapshot."""
        self.state_hooks[name] = (dump, load)

    def ddl_hook(self, fn: DdlHook) -> None:
        """Call *fn* before and after DDL on tables."""
        self.ddl_hooks.append(fn)

    def commit_hook(self, fn: Callable[[Any, list[tuple[Any, Any]], int], None]) -> None:
        """Call ``fn(engine, [(database, CommittedTransaction)], commit_seq)`` inside every commit."""
        self.commit_hooks.append(fn)

    def value_check(self, fn: Callable[[Any, Any, Any, Any], None]) -> None:
        """Call ``fn(engine, table, column, value)`` for every value an INSERT or UPDATE writes; it may raise."""
        self.value_checks.append(fn)

    def check_written_value(self, engine: Any, table: Any, column: Any, value: Any) -> None:
        """Run the value checks (e.g. CDC's ``max text repl size``) on one written value."""
        for check in self.value_checks:
            check(engine, table, column, value)

    def statement_prefix(self, word: str, fn: Callable[[Any, Any, Callable[[Any], Any]], Any]) -> None:
        """Run statements ``WITH <word> ...`` through ``fn(session, raw, dispatch)`` (dispatch runs a statement)."""
        self.statement_prefixes[word.upper()] = fn

    def statement_hook(self, fn: Callable[[Any, Any], Any]) -> None:
        """Offer every DDL statement to ``fn(session, raw)``: an iterator of events if it handles it, else None."""
        self.statement_hooks.append(fn)

    # -- lookups used by the engine
    def find_procedure(self, name: str) -> ProcedureFn | None:
        k = _key(name)
        fn = self.procedures.get(k)
        if fn is None and "." not in k:
            fn = self.procedures.get("sys." + k)
        if fn is None and k.startswith("dbo."):
            fn = self.procedures.get("sys." + k[4:])
        if fn is None and k.count(".") == 2:
            # db.schema.name: the procedure runs in that database
            fn = self.procedures.get(k.split(".", 1)[1])
        return fn

    def find_scalar(self, name: str) -> tuple[ScalarFn, Any] | None:
        k = _key(name)
        return self.scalar_functions.get(k) or self.scalar_functions.get("sys." + k)

    def find_table_function(self, name: str) -> tuple[TableFn, str] | None:
        k = _key(name)
        original = ".".join(p.strip("[]") for p in name.split("."))
        for prefix, fn in self.table_prefixes:
            if k.startswith(prefix):
                return fn, original[len(prefix) :]
        return None

    def find_view(self, name: str) -> ViewFn | None:
        return self.views.get(_key(name))

    def fire_ddl(self, session: Any, event: DdlEvent) -> None:
        for hook in self.ddl_hooks:
            hook(session, event)
