"""Compiled expressions: what :class:`Expr` and :class:`Scope` are, and SQL Server's typing rules.

An expression compiles to an :class:`Expr`: ``fn(row) -> value`` plus its SQL type, resolved
once. This module holds that model (expressions, FROM sources, scopes, aggregate specs), the
implicit conversions and result types that follow SQL Server's data type precedence, and
:class:`ExpressionCompiler`, what the built-in functions (:mod:`.functions`) compile their
arguments with. The compiler itself is :mod:`.compiler`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlglot import exp

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator import values as V
from sqlserver_cdc_simulator.errors import SqlError, ambiguous_column, arithmetic_overflow
from sqlserver_cdc_simulator.extensions import ResultColumn
from sqlserver_cdc_simulator.types import SqlType

from .context import ExecutionContext


@dataclass(slots=True)
class Expr:
    """A compiled expression: ``fn(row)`` and the SQL type of its value."""

    fn: Callable[[Any], Any]
    type: SqlType
    nullable: bool = True
    name: str = ""
    const: bool = False
    index: int = -1  # the row index when the expression is a plain column of the current scope


@dataclass
class Source:
    """A table source of a FROM clause inside the combined row."""

    alias: str  # lower-case alias or table name
    name: str  # object name as written (for messages)
    columns: list[ResultColumn]
    offset: int = 0
    colmap: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.colmap = {}
        for i, c in enumerate(self.columns):
            self.colmap.setdefault(c.name.lower(), i)


class Scope:
    """The columns visible to an expression: the FROM sources, and an outer scope for subqueries."""

    def __init__(self, sources: list[Source] | None = None, outer: Scope | None = None) -> None:
        self.sources: list[Source] = []
        self.width = 0
        self.outer = outer
        self.outer_cell: list[Any] = [None]  # the current row of this scope, for correlated subqueries
        self.correlated = False
        self.extra: dict[str, tuple[int, ResultColumn]] = {}  # select-list aliases (ORDER BY)
        for s in sources or []:
            self.add(s)

    def add(self, source: Source) -> None:
        source.offset = self.width
        self.sources.append(source)
        self.width += len(source.columns)

    def resolve(self, name: str, qualifier: str | None) -> tuple[int, ResultColumn] | None:
        key = name.lower()
        found = None
        for s in self.sources:
            if (
                qualifier is not None
                and s.alias != qualifier.lower()
                and s.name.lower().split(".")[-1] != qualifier.lower()
            ):
                continue
            if (
                qualifier is not None
                and s.alias != qualifier.lower()
                and any(x.alias == qualifier.lower() for x in self.sources)
            ):
                continue
            i = s.colmap.get(key)
            if i is not None:
                if found is not None:
                    raise ambiguous_column(name)
                found = (s.offset + i, s.columns[i])
        return found


# ---------------------------------------------------------------- helpers


def converter(src: SqlType, dst: SqlType, style: int | None = None) -> Callable[[Any], Any] | None:
    """A function converting values from *src* to *dst*, or None when no conversion is needed."""
    if src == dst and style is None:
        return None
    s, d = src.name, dst.name
    if s == "sql_variant":  # converts as its base type does (sql-variant-transact-sql.md)
        return lambda v: None if v is None else _from_variant(v, dst, style)
    if d == "sql_variant":
        return lambda v: None if v is None else V.Variant(src, v)
    if s == d and s in (
        "int",
        "bigint",
        "smallint",
        "tinyint",
        "bit",
        "float",
        "real",
        "date",
        "uniqueidentifier",
        "datetime",
        "smalldatetime",
    ):
        return None
    if (
        s in T.STRING_TYPES
        and d in T.STRING_TYPES
        and (
            dst.length == T.MAX
            or d in ("nvarchar", "varchar")
            and src.length != T.MAX
            and 0 < src.length <= dst.length
        )
        and not (s in T.NCHAR_TYPES and d in T.CHAR_TYPES)
    ):
        return None

    if style is None and d in ("varchar", "nvarchar"):
        # date/time types to a string long enough for their default text: format directly
        temporal = V.default_temporal_text(src)
        if temporal is not None and (dst.length <= 0 or dst.length >= temporal[1]):
            return temporal[0]

    def conv(v: Any) -> Any:
        return V.convert(v, src, dst, style)

    return conv


def _from_variant(v: V.Variant, dst: SqlType, style: int | None) -> Any:
    conv = converter(v.type, dst, style)
    return v.value if conv is None else conv(v.value)


def apply_conversion(conv: Callable[[Any], Any] | None, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    if conv is None:
        return fn
    return lambda row: conv(fn(row))


def null_propagating(
    fa: Callable[[Any], Any], fb: Callable[[Any], Any], body: Callable[[Any, Any], Any]
) -> Callable[[Any], Any]:
    """``row -> body(fa(row), fb(row))``, NULL (None) when either operand is NULL.

    :param fa: the left operand; when it is NULL, *fb* is not evaluated.
    :param fb: the right operand.
    :param body: the operation on two non-NULL values.
    """

    def f(row: Any) -> Any:
        x = fa(row)
        if x is None:
            return None
        y = fb(row)
        return None if y is None else body(x, y)

    return f


def comparison_type(a: SqlType, b: SqlType) -> SqlType:
    """The type two operands are compared in."""
    if a.name in T.STRING_TYPES and b.name in T.STRING_TYPES:
        return (
            T.NVARCHAR_MAX
            if (a.name in T.NCHAR_TYPES or b.name in T.NCHAR_TYPES)
            else SqlType("varchar", length=T.MAX)
        )
    if a.name in T.BINARY_TYPES and b.name in T.BINARY_TYPES:
        return T.VARBINARY_MAX
    t = T.higher_precedence(a, b)
    if t.name in ("decimal", "numeric"):
        pa, sa = T.decimal_params(a)
        pb, sb = T.decimal_params(b)
        s = max(sa, sb)
        p = min(38, max(pa - sa, pb - sb) + s)
        return SqlType("decimal", precision=p, scale=s)
    if t.name == "datetime2" or t.name == "datetimeoffset" or t.name == "time":
        return SqlType(t.name, scale=7)
    return t


def arithmetic_type(op: str, a: SqlType, b: SqlType) -> SqlType:
    """Result type of ``a op b`` for numeric operands (SQL Server's precision/scale rules)."""
    if a.name in T.FLOAT_TYPES or b.name in T.FLOAT_TYPES:
        return T.FLOAT
    if a.name in T.INTEGER_TYPES and b.name in T.INTEGER_TYPES:
        t = T.higher_precedence(a, b)
        return (
            T.INT
            if t.name in ("bit", "tinyint", "smallint") and op != "%"
            else (t if t.name != "bit" else T.INT)
        )
    if {a.name, b.name} <= {
        "money",
        "smallmoney",
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "bit",
    }:
        return T.MONEY
    p1, s1 = T.decimal_params(a)
    p2, s2 = T.decimal_params(b)
    if op in "+-":
        s = max(s1, s2)
        p = max(p1 - s1, p2 - s2) + s + 1
    elif op == "*":
        p, s = p1 + p2 + 1, s1 + s2
    elif op == "/":
        s = max(6, s1 + p2 + 1)
        p = p1 - s1 + s2 + s
    else:
        s = max(s1, s2)
        p = min(p1 - s1, p2 - s2) + s
    if p > 38:
        integral = p - s
        s = max(min(s, 6), 38 - integral) if integral < 32 else min(s, 6)
        s = max(0, min(s, 38))
        p = 38
    return SqlType("decimal", precision=p, scale=s)


AGGREGATES = {"COUNT", "COUNT_BIG", "SUM", "MIN", "MAX", "AVG", "STRING_AGG", "STDEV", "VAR", "CHECKSUM_AGG"}


@dataclass
class AggSpec:
    kind: str
    arg: Expr | None
    distinct: bool
    type: SqlType
    extra: Any = None


class AggContext:
    """Group-by expressions and aggregate calls of an aggregate query."""

    def __init__(self, group_nodes: list[exp.Expression], group_exprs: list[Expr]) -> None:
        self.group_nodes = group_nodes
        self.group_exprs = group_exprs
        self.aggs: list[AggSpec] = []
        self.agg_nodes: list[exp.Expression] = []

    @property
    def width(self) -> int:
        return len(self.group_exprs) + len(self.aggs)


class ExpressionCompiler(Protocol):
    """What compiles the arguments of a built-in function: a session, a scope, aggregate state."""

    session: ExecutionContext
    scope: Scope
    agg: AggContext | None
    source_compiler: ExpressionCompiler | None

    def compile(self, node: exp.Expression) -> Expr: ...


def check_float(v: Any) -> float:
    """SQL Server's errors for float results that are not finite real numbers."""
    if isinstance(v, complex) or v != v:
        raise SqlError(3623, 16, 1, "An invalid floating point operation occurred.")
    if v in (float("inf"), float("-inf")):
        raise arithmetic_overflow("float")
    return v


def result_type(exprs: list[Expr]) -> SqlType:
    """Result type of CASE / COALESCE / UNION branches: the highest precedence type, widened."""
    t = exprs[0].type
    for e in exprs[1:]:
        u = e.type
        if t.name in T.STRING_TYPES and u.name in T.STRING_TYPES:
            unicode_ = t.name in T.NCHAR_TYPES or u.name in T.NCHAR_TYPES
            length = T.MAX if T.MAX in (t.length, u.length) else max(t.length, u.length)
            t = SqlType("nvarchar" if unicode_ else "varchar", length=length)
        elif (
            t.name in ("decimal", "numeric")
            and u.name in ("decimal", "numeric")
            or (
                {t.name, u.name} & {"decimal", "numeric"}
                and T.is_numeric(t)
                and T.is_numeric(u)
                and not ({t.name, u.name} & T.FLOAT_TYPES)
            )
        ):
            p1, s1 = T.decimal_params(t)
            p2, s2 = T.decimal_params(u)
            s = max(s1, s2)
            p = min(38, max(p1 - s1, p2 - s2) + s)
            t = SqlType("decimal", precision=p, scale=s)
        elif t.name in T.BINARY_TYPES and u.name in T.BINARY_TYPES:
            length = T.MAX if T.MAX in (t.length, u.length) else max(t.length, u.length)
            t = SqlType("varbinary", length=length)
        elif t.name == u.name and t.name in ("datetime2", "time", "datetimeoffset"):
            t = SqlType(t.name, scale=max(t.scale, u.scale))
        else:
            t = T.higher_precedence(t, u)
    return t
