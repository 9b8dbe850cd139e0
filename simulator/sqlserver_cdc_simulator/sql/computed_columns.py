"""Computed columns: their definition checks at CREATE / ALTER TABLE and their values when a row is written.

``name AS expression [PERSISTED [NOT NULL]]`` (alter-table-computed-column-definition-transact-sql.md,
specify-computed-columns-in-a-table.md in MicrosoftDocs/sql-docs). The column's type and nullability
come from its expression. Its values are stored in the row like any column's and computed whenever a
row is written (INSERT, UPDATE, and ALTER TABLE ADD for the rows already there). For a PERSISTED column
that is what SQL Server does; for a non-persisted one SQL Server computes on read, which gives the same
values for a deterministic expression. So the simulator refuses what would tell the two apart: a
non-deterministic expression in a non-persisted column, and an expression that fails for a row of a
non-persisted column (SQL Server fails the read; the simulator would fail the write) -- both 40517.

CDC captures a computed column as NULL (track-data-changes-sql-server.md, "Data Type Considerations
for Change Data Capture"): :meth:`..cdc.capture_instance.CaptureInstance.projection` does that.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from sqlglot import exp

from sqlserver_cdc_simulator.errors import (
    SqlError,
    not_supported,
    null_not_allowed,
)
from sqlserver_cdc_simulator.extensions import ResultColumn
from sqlserver_cdc_simulator.storage import Column, Table

from .compiler import Compiler
from .context import ExecutionContext
from .dialect import parse_expression
from .expressions import Scope, Source

#: functions whose value can change between calls with the same arguments (deterministic-and-
#: nondeterministic-functions.md): a computed column using one cannot be PERSISTED (4936)
NONDETERMINISTIC_FUNCTIONS = frozenset(
    {
        "APP_NAME",
        "CHECKSUM_AGG",
        "CRYPT_GEN_RANDOM",
        "CURRENT_TIMESTAMP",
        "CURRENT_USER",
        "DB_NAME",
        "GETDATE",
        "GETUTCDATE",
        "HOST_ID",
        "HOST_NAME",
        "NEWID",
        "NEWSEQUENTIALID",
        "ORIGINAL_LOGIN",
        "RAND",
        "SESSION_USER",
        "SUSER_NAME",
        "SUSER_SNAME",
        "SYSDATETIME",
        "SYSDATETIMEOFFSET",
        "SYSTEM_USER",
        "SYSUTCDATETIME",
        "USER_NAME",
    }
)

_NONDETERMINISTIC_NODES = (exp.CurrentTimestamp, exp.CurrentDate, exp.CurrentTime, exp.CurrentUser, exp.Rand)


def cannot_modify(column: str) -> SqlError:
    """Msg 271: INSERT or UPDATE naming a computed column."""
    return SqlError(
        271,
        16,
        1,
        f'The column "{column}" cannot be modified because it is either a computed column or is the '
        "result of a UNION operator.",
    )


def definition_text(expression: str) -> str:
    """``sys.computed_columns.definition``: the expression in parentheses, as SQL Server shows it."""
    text = expression.strip()
    return text if _fully_parenthesised(text) else f"({text})"


def _fully_parenthesised(text: str) -> bool:
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i < len(text) - 1:
            return False
    return True


@lru_cache(maxsize=256)
def _parsed(expression: str) -> exp.Expression:
    return parse_expression(expression)


def referenced_columns(column: Column) -> list[str]:
    """The names of the columns a computed column's expression reads (as written)."""
    if not column.computed or column.computed_sql is None:
        return []
    return [c.name for c in _parsed(column.computed_sql).find_all(exp.Column)]


def dependents(table: Table, name: str) -> list[str]:
    """The computed columns of ``table`` whose expression reads column ``name``."""
    wanted = name.lower()
    return [c.name for c in table.columns if any(r.lower() == wanted for r in referenced_columns(c))]


def _is_nondeterministic(node: exp.Expression) -> bool:
    for n in node.walk():
        if isinstance(n, _NONDETERMINISTIC_NODES):
            return True
        if isinstance(n, exp.Anonymous) and n.name.upper() in NONDETERMINISTIC_FUNCTIONS:
            return True
    return False


def resolve(session: ExecutionContext, table_name: str, columns: Sequence[Column], column: Column) -> None:
    """Check a computed column's expression against the table's ``columns``; set its type and nullability.

    :param table_name: the table's name, for messages.
    :param columns: the table's columns (the computed one among them or not).
    :raises SqlError: a subquery or variable (1046 / 40517), a computed column read by another
        (1759), a non-deterministic PERSISTED column (4936), NOT NULL without PERSISTED (8183),
        an unknown column (207).
    """
    node = _parsed(column.computed_sql or "")
    if any(isinstance(n, (exp.Subquery, exp.Select)) for n in node.walk()):
        raise SqlError(
            1046, 15, 1, "Subqueries are not allowed in this context. Only scalar expressions are allowed."
        )
    if any(isinstance(n, exp.Parameter) for n in node.walk()):
        raise not_supported("variables in a computed column's expression")
    by_name = {c.name.lower(): c for c in columns}
    for ref in node.find_all(exp.Column):
        other = by_name.get(ref.name.lower())
        if other is not None and other.computed and other is not column:
            raise SqlError(
                1759,
                16,
                0,
                f"Computed column '{other.name}' in table '{table_name}' is not allowed to be used in another "
                "computed-column definition.",
            )
    nondeterministic = _is_nondeterministic(node)
    if nondeterministic and column.persisted:
        raise SqlError(
            4936,
            16,
            1,
            f"Computed column '{column.name}' in table '{table_name}' cannot be persisted because the column "
            "is non-deterministic.",
        )
    if nondeterministic:
        raise not_supported("non-persisted computed columns with a non-deterministic expression")
    if not column.nullable and not column.persisted:
        raise SqlError(
            8183,
            16,
            1,
            "Only UNIQUE or PRIMARY KEY constraints can be created on computed columns, while CHECK, FOREIGN KEY, "
            "and NOT NULL constraints require that computed columns be persisted.",
        )
    plain = [c for c in columns if not c.computed]
    compiled = Compiler(session, _scope(table_name, plain)).compile(node)
    column.type = compiled.type
    if column.nullable:
        # "The result of most expressions is considered nullable even if only nonnullable columns are
        # present" (create-table-transact-sql.md, computed_column_expression); "ISNULL with the
        # check_expression constant" makes one nonnullable, and a plain column keeps its own.
        keeps = isinstance(node, exp.Column) or (
            isinstance(node, exp.Anonymous) and node.name.upper() == "ISNULL"
        )
        column.nullable = compiled.nullable if keeps else True


def _scope(table_name: str, columns: Sequence[Column]) -> Scope:
    cols = [ResultColumn(c.name, c.type, c.nullable) for c in columns]
    return Scope([Source(table_name.lower(), table_name, cols)])


# table -> (the columns' definitions it was compiled for, the function filling a row's computed values)
_ROW_FUNCTIONS: weakref.WeakKeyDictionary[Table, tuple[tuple[Any, ...], Callable[..., Any]]] = (
    weakref.WeakKeyDictionary()
)


def row_function(
    session: ExecutionContext, table: Table, table_label: str, statement: str
) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """A function giving a row of ``table`` its computed values; None when the table has no computed column.

    :param table_label: ``db.schema.table`` for error 515.
    :param statement: ``INSERT`` or ``UPDATE`` for error 515.
    """
    if not any(c.computed for c in table.columns):
        return None
    signature = tuple((c.name, c.computed_sql, c.persisted, c.nullable) for c in table.columns)
    cached = _ROW_FUNCTIONS.get(table)
    if cached is None or cached[0] != signature:
        cached = (signature, _compile_row_function(session, table))
        _ROW_FUNCTIONS[table] = cached
    fill = cached[1]
    return lambda values: fill(values, table_label, statement)


def _compile_row_function(session: ExecutionContext, table: Table) -> Callable[..., tuple[Any, ...]]:
    scope = _scope(table.name, table.columns)
    compiler = Compiler(session, scope)
    computed = [
        (i, c, compiler.compile(_parsed(c.computed_sql or "")).fn)
        for i, c in enumerate(table.columns)
        if c.computed
    ]

    def fill(values: tuple[Any, ...], table_label: str, statement: str) -> tuple[Any, ...]:
        row = list(values)
        for i, column, fn in computed:
            value = evaluate(column, fn, values)
            if value is None and not column.nullable:
                raise null_not_allowed(column=column.name, table=table_label, statement=statement)
            row[i] = value
        return tuple(row)

    return fill


def evaluate(column: Column, fn: Callable[[Any], Any], values: Sequence[Any]) -> Any:
    """``fn(values)``: the computed column's value for one row (see the module docstring on errors)."""
    if column.persisted:
        return fn(values)
    try:
        return fn(values)
    except SqlError as err:
        raise not_supported(
            f"a non-persisted computed column whose expression fails for a row (SQL Server fails the read "
            f"of {column.name}; error {err.number}: {err.message})"
        ) from None


def added_column_values(
    session: ExecutionContext, table_name: str, columns: Sequence[Column], column: Column
) -> Callable[[tuple[Any, ...]], Any]:
    """For ALTER TABLE ADD: the new computed column's value from a row of the existing ``columns``."""
    fn = Compiler(session, _scope(table_name, columns)).compile(_parsed(column.computed_sql or "")).fn
    return lambda values: evaluate(column, fn, values)
