"""Compile sqlglot expression trees into Python closures over a row tuple.

:class:`Compiler` turns an expression into an :class:`~.expressions.Expr`: ``fn(row) -> value``
plus its SQL type, resolved once; column references become tuple indexes, implicit conversions
follow SQL Server's data type precedence, predicates use three-valued logic (True / False /
None). Strings compare case-insensitively and ignore trailing spaces, as the default collation
SQL_Latin1_General_CP1_CI_AS does. Subqueries compile through the session
(:meth:`~.context.ExecutionContext.compile_subquery`), built-in functions through
:mod:`.functions`.
"""

from __future__ import annotations

import decimal
import operator
import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator import values as V
from sqlserver_cdc_simulator.collation import ci_key
from sqlserver_cdc_simulator.errors import (
    SqlError,
    arithmetic_overflow,
    divide_by_zero,
    invalid_column,
    must_declare,
    not_supported,
)
from sqlserver_cdc_simulator.types import SqlType

from .context import ExecutionContext
from .dialect import type_name_of
from .expressions import (
    AggContext,
    Expr,
    Scope,
    apply_conversion,
    arithmetic_type,
    check_float,
    comparison_type,
    converter,
    null_propagating,
    result_type,
)
from .functions import at_time_zone, call_function, datepart

_INT_LIMITS = {
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "tinyint": (0, 255),
}


def _int_check(name: str) -> Callable[[int], int]:
    lo, hi = _INT_LIMITS.get(name, _INT_LIMITS["bigint"])

    def check(v: int) -> int:
        if v < lo or v > hi:
            raise arithmetic_overflow(name)
        return v

    return check


def _trunc_div(a: int, b: int) -> int:
    if b == 0:
        raise divide_by_zero()
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _trunc_mod(a: Any, b: Any) -> Any:
    if b == 0:
        raise divide_by_zero()
    if isinstance(a, int) and isinstance(b, int):
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    return a - b * int(a / b)


_LIKE_CACHE: dict[tuple[str, str | None, bool], Any] = {}
_NEVER = re.compile(r"(?!)")


def utf16_units(s: str) -> str:
    """*s* with each character beyond the BMP as its two surrogates: what a non-SC collation matches on."""
    if s.isascii() or all(ord(ch) < 0x10000 for ch in s):
        return s
    out = []
    for ch in s:
        n = ord(ch)
        if n < 0x10000:
            out.append(ch)
        else:
            n -= 0x10000
            out.append(chr(0xD800 + (n >> 10)) + chr(0xDC00 + (n & 0x3FF)))
    return "".join(out)


def like_regex(pattern: str, escape: str | None, unicode: bool = False) -> Any:
    """The regular expression of LIKE *pattern* (like-transact-sql.md).

    :param pattern: the LIKE pattern (``%``, ``_``, ``[...]``, ``[^...]``)
    :param escape: the ESCAPE character, if any; one at the end of the pattern matches nothing
    :param unicode: Unicode pattern matching, where trailing blanks of the matched value count
    """
    key = (pattern, escape, unicode)
    rx = _LIKE_CACHE.get(key)
    if rx is not None:
        return rx
    pattern = utf16_units(pattern)  # "_" matches one UTF-16 code unit (non-SC collation)
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape and c == escape:
            if i + 1 == len(pattern):
                _LIKE_CACHE[key] = _NEVER
                return _NEVER
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body.startswith("^"):
                    body = "^" + body[1:].replace("\\", "\\\\")
                else:
                    body = body.replace("\\", "\\\\")
                out.append("[" + body + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    # ASCII LIKE ignores trailing blanks of the matched value; Unicode LIKE does not
    rx = re.compile("".join(out) + (r"\Z" if unicode else r" *\Z"), re.S | re.I)
    _LIKE_CACHE[key] = rx
    return rx


# ---------------------------------------------------------------- compiler


def _three_valued(fa: Callable[[Any], Any], fb: Callable[[Any], Any], *, decisive: bool) -> Expr:
    """Combine two predicates with T-SQL's three-valued AND (``decisive=False``) or OR (``decisive=True``).

    :param decisive: the value of either side that settles the result without the other.
    """

    def f(row: Any) -> Any:
        x = fa(row)
        if x is decisive:
            return decisive
        y = fb(row)
        if y is decisive:
            return decisive
        if x is None or y is None:
            return None
        return not decisive

    return Expr(f, T.BIT)


class Compiler:
    """Compile expressions against a scope (and, for aggregate queries, an AggContext)."""

    def __init__(
        self,
        session: ExecutionContext,
        scope: Scope,
        agg: AggContext | None = None,
        source_compiler: Compiler | None = None,
    ) -> None:
        self.session = session
        self.scope = scope
        self.agg = agg
        self.source_compiler = source_compiler  # compiles aggregate arguments against the source rows

    # -- entry points
    def compile(self, node: exp.Expression) -> Expr:
        if self.agg is not None:
            for i, g in enumerate(self.agg.group_nodes):
                if node == g:
                    ge = self.agg.group_exprs[i]
                    return Expr(operator.itemgetter(i), ge.type, ge.nullable, ge.name)
        operator_node = _OPERATOR_NODES.get(type(node))
        if operator_node is not None:
            build, op = operator_node
            return build(self, node, op)
        method = getattr(self, "c_" + type(node).__name__, None)
        if method is None:
            raise not_supported(f"the expression {node.sql(dialect='tsql')[:80]!r} ({type(node).__name__})")
        return method(node)

    def predicate(self, node: exp.Expression) -> Callable[[Any], Any]:
        return self.compile(node).fn

    # -- leaves
    def c_Literal(self, node: exp.Literal) -> Expr:
        text = node.this
        if node.is_string:
            v = text
            t = SqlType("varchar", length=max(1, len(v)) if len(v) <= 8000 else T.MAX)
        elif "e" in text.lower():
            v = float(text)
            t = T.FLOAT
        elif "." in text:
            d = decimal.Decimal(text)
            scale = max(0, -d.as_tuple().exponent)
            digits = len(d.as_tuple().digits)
            v = d
            t = SqlType("numeric", precision=max(digits, scale, 1), scale=scale)
        else:
            n = int(text)
            if n <= 2**31 - 1:
                v, t = n, T.INT
            else:
                d = decimal.Decimal(n)
                v, t = d, SqlType("numeric", precision=len(text), scale=0)
        return Expr(lambda row: v, t, False, "", True)

    def c_National(self, node: exp.National) -> Expr:
        v = node.this
        units = len(v) if v.isascii() else len(v.encode("utf-16-le", "surrogatepass")) // 2
        return Expr(
            lambda row: v,
            SqlType("nvarchar", length=max(1, min(units, 4000)) if units <= 4000 else T.MAX),
            False,
            "",
            True,
        )

    def c_HexString(self, node: exp.HexString) -> Expr:
        text = node.this
        if len(text) % 2:
            text = "0" + text
        v = bytes.fromhex(text)
        return Expr(lambda row: v, SqlType("varbinary", length=max(1, len(v))), False, "", True)

    def c_Null(self, node: exp.Null) -> Expr:
        return Expr(lambda row: None, T.INT, True, "", True)

    def c_Boolean(self, node: exp.Boolean) -> Expr:
        v = bool(node.this)
        return Expr(lambda row: v, T.BIT, False, "", True)

    def c_Paren(self, node: exp.Paren) -> Expr:
        return self.compile(node.this)

    def c_Alias(self, node: exp.Alias) -> Expr:
        e = self.compile(node.this)
        return Expr(e.fn, e.type, e.nullable, node.alias, e.const)

    def c_Column(self, node: exp.Column) -> Expr:
        if isinstance(node.this, exp.Star):
            raise not_supported("* in this position")
        name = node.name
        qualifier = node.table or None
        if node.args.get("db"):
            qualifier = node.table
        if self.agg is not None:
            # a bare column in an aggregate query must be a GROUP BY column
            found = self.source_compiler.scope.resolve(name, qualifier) if self.source_compiler else None
            if found is not None:
                raise SqlError(
                    8120,
                    16,
                    1,
                    f"Column '{(qualifier + '.') if qualifier else ''}{name}' is invalid in the select list because it is "
                    "not contained in either an aggregate function or the GROUP BY clause.",
                )
        found = self.scope.resolve(name, qualifier)
        if found is not None:
            idx, col = found
            return Expr(operator.itemgetter(idx), col.type, col.nullable, col.name, False, idx)
        if qualifier is None and name.lower() in self.scope.extra:
            idx, col = self.scope.extra[name.lower()]
            return Expr(operator.itemgetter(idx), col.type, col.nullable, col.name)
        # outer scopes (correlated subquery)
        scope = self.scope.outer
        inner = self.scope
        while scope is not None:
            found = scope.resolve(name, qualifier)
            if found is not None:
                idx, col = found
                cell = scope.outer_cell
                inner.correlated = True
                return Expr(lambda row, cell=cell, idx=idx: cell[0][idx], col.type, col.nullable, col.name)
            inner = scope
            scope = scope.outer
        if node.args.get("db") or (qualifier and "." in qualifier):
            raise SqlError(
                4104, 16, 1, f'The multi-part identifier "{node.sql(dialect="tsql")}" could not be bound.'
            )
        if qualifier:
            raise SqlError(4104, 16, 1, f'The multi-part identifier "{qualifier}.{name}" could not be bound.')
        raise invalid_column(name)

    def c_Identifier(self, node: exp.Identifier) -> Expr:
        return self.c_Column(exp.Column(this=node))

    def c_Var(self, node: exp.Var) -> Expr:
        return self.c_Column(exp.Column(this=exp.Identifier(this=node.name)))

    def c_Parameter(self, node: exp.Parameter) -> Expr:
        inner = node.this
        if isinstance(inner, exp.Parameter):
            return self.global_variable(inner.name.upper())
        name = "@" + node.name
        var = self.session.variables.get(name.lower())
        if var is None:
            raise must_declare(name)
        return Expr(lambda row: var.value, var.type, True, "")

    def global_variable(self, name: str) -> Expr:
        s = self.session
        fns: dict[str, tuple[Callable[[Any], Any], SqlType]] = {
            "VERSION": (lambda row: s.engine.version_string, T.nvarchar(300)),
            "SPID": (lambda row: s.spid, T.SMALLINT),
            "TRANCOUNT": (lambda row: s.trancount, T.INT),
            "ROWCOUNT": (lambda row: s.last_rowcount, T.INT),
            "IDENTITY": (
                lambda row: None if s.last_identity is None else decimal.Decimal(s.last_identity),
                T.decimal_type(38, 0),
            ),
            "SERVERNAME": (lambda row: s.engine.server_name, T.nvarchar(128)),
            "SERVICENAME": (lambda row: "MSSQLSERVER", T.nvarchar(128)),
            "ERROR": (lambda row: s.last_error, T.INT),
            "DBTS": (lambda row: s.current_db().flags.get("dbts", 2000).to_bytes(8, "big"), T.varbinary(8)),
            "LANGUAGE": (lambda row: "us_english", T.nvarchar(128)),
            "MAX_PRECISION": (lambda row: 38, T.TINYINT),
            "OPTIONS": (lambda row: 5496, T.INT),
            "LOCK_TIMEOUT": (lambda row: s.lock_timeout, T.INT),
            "DATEFIRST": (lambda row: 7, T.TINYINT),
            "TEXTSIZE": (lambda row: 2147483647, T.INT),
            "FETCH_STATUS": (lambda row: -1, T.INT),
            "NESTLEVEL": (lambda row: 0, T.INT),
            "PROCID": (lambda row: 0, T.INT),
            "MICROSOFTVERSION": (lambda row: 0x10000FA0, T.INT),
        }
        if name not in fns:
            raise must_declare("@@" + name)
        fn, t = fns[name]
        return Expr(fn, t, True, "")

    # -- operators
    def _binary_operands(self, node: exp.Binary) -> tuple[Expr, Expr]:
        return self.compile(node.this), self.compile(node.expression)

    def _compare(self, node: exp.Binary, op: Callable[[Any, Any], bool]) -> Expr:
        a, b = self._binary_operands(node)
        if a.type.name == "sql_variant" and b.type.name != "sql_variant":  # compared as its base value
            a = Expr(apply_conversion(converter(a.type, b.type), a.fn), b.type, a.nullable)
        elif b.type.name == "sql_variant" and a.type.name != "sql_variant":
            b = Expr(apply_conversion(converter(b.type, a.type), b.fn), a.type, b.nullable)
        ct = comparison_type(a.type, b.type)
        fa = apply_conversion(converter(a.type, ct), a.fn)
        fb = apply_conversion(converter(b.type, ct), b.fn)
        if ct.name in T.STRING_TYPES:
            return Expr(
                null_propagating(fa, fb, lambda x, y: op(x.rstrip(" ").casefold(), y.rstrip(" ").casefold())),
                T.BIT,
                True,
            )
        return Expr(null_propagating(fa, fb, op), T.BIT, True)

    def c_And(self, node: exp.And) -> Expr:
        return _three_valued(self.predicate(node.this), self.predicate(node.expression), decisive=False)

    def c_Or(self, node: exp.Or) -> Expr:
        return _three_valued(self.predicate(node.this), self.predicate(node.expression), decisive=True)

    def c_Not(self, node: exp.Not) -> Expr:
        fa = self.predicate(node.this)

        def f(row: Any) -> Any:
            x = fa(row)
            return None if x is None else not x

        return Expr(f, T.BIT)

    def c_Is(self, node: exp.Is) -> Expr:
        if not isinstance(node.expression, exp.Null):
            raise not_supported("IS with anything but NULL")
        fa = self.compile(node.this).fn
        if node.args.get("negate"):
            return Expr(lambda row: fa(row) is not None, T.BIT, False)
        return Expr(lambda row: fa(row) is None, T.BIT, False)

    def c_Between(self, node: exp.Between) -> Expr:
        ge = self.compile(exp.GTE(this=node.this, expression=node.args["low"]))
        le = self.compile(exp.LTE(this=node.this, expression=node.args["high"]))
        return _three_valued(ge.fn, le.fn, decisive=False)

    def c_In(self, node: exp.In) -> Expr:
        a = self.compile(node.this)
        query = node.args.get("query")
        if query is not None:
            q = self.session.compile_subquery(
                query.this if isinstance(query, exp.Subquery) else query, self.scope
            )
            if len(q.columns) != 1:
                raise SqlError(
                    116,
                    16,
                    1,
                    "Only one expression can be specified in the select list when the subquery is not introduced with EXISTS.",
                )
            ct = comparison_type(a.type, q.columns[0].type)
            fa = apply_conversion(converter(a.type, ct), a.fn)
            cv = converter(q.columns[0].type, ct)
            cell = self.scope.outer_cell
            cache: list[Any] = []

            def f(row: Any) -> Any:
                x = fa(row)
                if x is None:
                    return None
                if q.correlated or not cache:
                    cell[0] = row
                    vals = [r[0] if cv is None else cv(r[0]) for r in q.run()]
                    keys = {ci_key(v) for v in vals if v is not None}
                    has_null = any(v is None for v in vals)
                    cache[:] = [(keys, has_null)]
                keys, has_null = cache[0]
                if ci_key(x) in keys:
                    return True
                return None if has_null else False

            return Expr(f, T.BIT)
        items = [self.compile(e) for e in node.expressions]
        ct = a.type
        for it in items:
            ct = comparison_type(ct, it.type)
        fa = apply_conversion(converter(a.type, ct), a.fn)
        fitems = [apply_conversion(converter(it.type, ct), it.fn) for it in items]
        if all(it.const for it in items):
            vals = [fi(None) for fi in fitems]
            keys = {ci_key(v) for v in vals if v is not None}
            has_null = any(v is None for v in vals)

            def f(row: Any) -> Any:
                x = fa(row)
                if x is None:
                    return None
                if ci_key(x) in keys:
                    return True
                return None if has_null else False

            return Expr(f, T.BIT)

        def g(row: Any) -> Any:
            x = fa(row)
            if x is None:
                return None
            kx = ci_key(x)
            unknown = False
            for fi in fitems:
                y = fi(row)
                if y is None:
                    unknown = True
                elif ci_key(y) == kx:
                    return True
            return None if unknown else False

        return Expr(g, T.BIT)

    def c_Exists(self, node: exp.Exists) -> Expr:
        q = self.session.compile_subquery(node.this, self.scope)
        cell = self.scope.outer_cell
        cache: list[bool] = []

        def f(row: Any) -> Any:
            if q.correlated or not cache:
                cell[0] = row
                found = False
                for _ in q.run():
                    found = True
                    break
                cache[:] = [found]
            return cache[0]

        return Expr(f, T.BIT, False)

    def c_Subquery(self, node: exp.Subquery) -> Expr:
        q = self.session.compile_subquery(node.this, self.scope)
        if len(q.columns) != 1:
            raise SqlError(
                116,
                16,
                1,
                "Only one expression can be specified in the select list when the subquery is not introduced with EXISTS.",
            )
        cell = self.scope.outer_cell
        cache: list[Any] = []

        def f(row: Any) -> Any:
            if q.correlated or not cache:
                cell[0] = row
                rows = []
                for r in q.run():
                    rows.append(r)
                    if len(rows) > 1:
                        raise SqlError(
                            512,
                            16,
                            1,
                            "Subquery returned more than 1 value. This is not permitted when the subquery follows =, !=, <, <= , >, >= or when the subquery is used as an expression.",
                        )
                cache[:] = [rows[0][0] if rows else None]
            return cache[0]

        return Expr(f, q.columns[0].type, True, q.columns[0].name)

    def c_Like(self, node: exp.Like, escape: str | None = None) -> Expr:
        """``x [NOT] LIKE p [ESCAPE e]``: NULL when x or p is NULL, else the (negated) match."""
        negate = bool(node.args.get("negate"))
        e = self._like(node, escape)
        if not negate:
            return e
        fe = e.fn
        return Expr(lambda row: None if (x := fe(row)) is None else not x, T.BIT)

    def _like(self, node: exp.Like, escape: str | None) -> Expr:
        a, b = self._binary_operands(node)
        fa = (
            apply_conversion(converter(a.type, T.NVARCHAR_MAX), a.fn)
            if a.type.name not in T.STRING_TYPES
            else a.fn
        )
        fb = b.fn
        unicode = any(t.name in ("nchar", "nvarchar", "ntext") for t in (a.type, b.type))
        if b.const:
            pat = fb(None)
            rx = like_regex(pat, escape, unicode) if pat is not None else None

            def f(row: Any) -> Any:
                x = fa(row)
                if x is None or rx is None:
                    return None
                return rx.match(utf16_units(x)) is not None

            return Expr(f, T.BIT)

        def g(row: Any) -> Any:
            x = fa(row)
            p = fb(row)
            if x is None or p is None:
                return None
            return like_regex(p, escape, unicode).match(utf16_units(x)) is not None

        return Expr(g, T.BIT)

    def c_Escape(self, node: exp.Escape) -> Expr:
        esc_node = node.expression
        if not (isinstance(esc_node, exp.Literal) and esc_node.is_string) and not isinstance(
            esc_node, exp.National
        ):
            raise not_supported("an ESCAPE character that is not a string literal")
        esc = esc_node.this
        if len(esc) != 1:
            raise SqlError(
                506, 16, 1, f'The invalid escape character "{esc}" was specified in a LIKE predicate.'
            )
        inner = node.this
        if isinstance(inner, exp.Not):
            e = self.c_Like(inner.this, esc)
            fa = e.fn
            return Expr(lambda row: None if (x := fa(row)) is None else not x, T.BIT)
        if not isinstance(inner, exp.Like):
            raise not_supported(f"ESCAPE after {type(inner).__name__.upper()}")
        return self.c_Like(inner, esc)

    def c_ILike(self, node: exp.ILike) -> Expr:
        raise not_supported("ILIKE (not T-SQL)")

    def c_Neg(self, node: exp.Neg) -> Expr:
        a = self.compile(node.this)
        fa = a.fn
        t = a.type if a.type.name not in T.STRING_TYPES else T.FLOAT
        if a.const and isinstance(node.this, exp.Literal):
            v = fa(None)
            if v == 2**31 and a.type.name == "numeric":
                return Expr(lambda row: -(2**31), T.INT, False, "", True)
            nv = _negate(v)
            return Expr(lambda row: nv, t, False, "", True)
        return Expr(lambda row: None if (x := fa(row)) is None else _negate(x), t, a.nullable)

    def c_BitwiseNot(self, node: exp.BitwiseNot) -> Expr:
        a = self.compile(node.this)
        fa = a.fn
        return Expr(lambda row: None if (x := fa(row)) is None else ~x, a.type)

    def _arith(self, node: exp.Binary, op: str) -> Expr:
        a, b = self._binary_operands(node)
        # a NULL literal takes the other operand's type ('a' + NULL is a NULL string)
        if a.const and a.fn(None) is None:
            return Expr(lambda row: None, b.type if op == "+" or T.is_numeric(b.type) else T.INT)
        if b.const and b.fn(None) is None:
            return Expr(lambda row: None, a.type if op == "+" or T.is_numeric(a.type) else T.INT)
        ta, tb = a.type, b.type
        # string concatenation
        if (
            op == "+"
            and (ta.name in T.STRING_TYPES or tb.name in T.STRING_TYPES)
            and not (
                T.is_numeric(ta)
                or T.is_numeric(tb)
                or ta.name in T.TEMPORAL_TYPES
                or tb.name in T.TEMPORAL_TYPES
            )
        ):
            unicode_ = ta.name in T.NCHAR_TYPES or tb.name in T.NCHAR_TYPES
            la = ta.length if ta.name in T.STRING_TYPES else 30
            lb = tb.length if tb.name in T.STRING_TYPES else 30
            limit = 4000 if unicode_ else 8000
            length = T.MAX if la == T.MAX or lb == T.MAX or la + lb > limit else la + lb
            rt = SqlType("nvarchar" if unicode_ else "varchar", length=length)
            fa = apply_conversion(converter(ta, rt), a.fn)
            fb = apply_conversion(converter(tb, rt), b.fn)
            return Expr(null_propagating(fa, fb, operator.add), rt)
        if op == "+" and ta.name in T.BINARY_TYPES and tb.name in T.BINARY_TYPES:
            fa, fb = a.fn, b.fn
            return Expr(
                lambda row: None if (x := fa(row)) is None or (y := fb(row)) is None else x + y,
                T.VARBINARY_MAX,
            )
        # date arithmetic: datetime +/- number (days)
        if ta.name in ("datetime", "smalldatetime") and (T.is_numeric(tb)) and op in "+-":
            fa, fb = a.fn, b.fn
            sign = 1 if op == "+" else -1

            def dadd(row: Any) -> Any:
                x = fa(row)
                y = fb(row)
                if x is None or y is None:
                    return None
                return V.round_datetime_ticks(x + sign * round(float(y) * V.TICKS_PER_DAY))

            return Expr(dadd, ta)
        if (
            op == "-"
            and ta.name in ("datetime", "smalldatetime")
            and tb.name in ("datetime", "smalldatetime")
        ):
            fa, fb = a.fn, b.fn
            return Expr(
                lambda row: (
                    None
                    if (x := fa(row)) is None or (y := fb(row)) is None
                    else V.DAYS_TO_1900 * V.TICKS_PER_DAY + x - y
                ),
                T.DATETIME,
            )
        # numbers (strings convert to the other operand's numeric type)
        if ta.name in T.STRING_TYPES:
            ta = tb if T.is_numeric(tb) else T.FLOAT
            a = Expr(apply_conversion(converter(a.type, ta), a.fn), ta)
        if tb.name in T.STRING_TYPES:
            tb = ta if T.is_numeric(ta) else T.FLOAT
            b = Expr(apply_conversion(converter(b.type, tb), b.fn), tb)
        if not (T.is_numeric(ta) and T.is_numeric(tb)):
            raise SqlError(
                8117, 16, 1, f"Operand data type {ta.name} is invalid for {_OPNAMES[op]} operator."
            )
        rt = arithmetic_type(op, _literal_decimal(a, ta, tb), _literal_decimal(b, tb, ta))
        fa, fb = a.fn, b.fn
        if rt.name in T.INTEGER_TYPES:
            check = _int_check(rt.name)
            pyop = {
                "+": operator.add,
                "-": operator.sub,
                "*": operator.mul,
                "/": _trunc_div,
                "%": _trunc_mod,
            }[op]
            return Expr(null_propagating(fa, fb, lambda x, y: check(pyop(x, y))), rt)
        if rt.name == "float":
            pyop = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _fdiv, "%": _trunc_mod}[op]
            return Expr(null_propagating(fa, fb, lambda x, y: check_float(pyop(float(x), float(y)))), rt)
        # exact numerics
        pyop = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _ddiv, "%": _trunc_mod}[op]

        def exact(x: Any, y: Any) -> Any:
            with decimal.localcontext(V.DECIMAL_CONTEXT):
                r = pyop(decimal.Decimal(x), decimal.Decimal(y))
            return _fit(r, rt)

        return Expr(null_propagating(fa, fb, exact), rt)

    def _bitwise(self, node: exp.Binary, op: Callable[[Any, Any], Any]) -> Expr:
        a, b = self._binary_operands(node)
        t = T.higher_precedence(a.type, b.type)
        fa, fb = a.fn, b.fn
        return Expr(lambda row: None if (x := fa(row)) is None or (y := fb(row)) is None else op(x, y), t)

    # -- CASE / CAST
    def c_Case(self, node: exp.Case) -> Expr:
        operand = self.compile(node.this) if node.this is not None else None
        whens = []
        for if_ in node.args.get("ifs") or []:
            cond_node = if_.this
            if operand is not None:
                cond_node = exp.EQ(this=node.this, expression=cond_node)
            whens.append((self.predicate(cond_node), self.compile(if_.args["true"])))
        default = self.compile(node.args["default"]) if node.args.get("default") is not None else None
        results = [w[1] for w in whens] + ([default] if default else [])
        rt = result_type([r for r in results if not (r.const and r.fn(None) is None)] or results)
        conds = [(c, apply_conversion(converter(r.type, rt), r.fn)) for c, r in whens]
        dfn = apply_conversion(converter(default.type, rt), default.fn) if default else (lambda row: None)

        def f(row: Any) -> Any:
            for c, r in conds:
                if c(row) is True:
                    return r(row)
            return dfn(row)

        return Expr(f, rt)

    def c_If(self, node: exp.If) -> Expr:
        return self.c_Case(
            exp.Case(ifs=[exp.If(this=node.this, true=node.args["true"])], default=node.args.get("false"))
        )

    def _cast(
        self,
        value_node: exp.Expression,
        type_node: exp.DataType,
        style_node: exp.Expression | None,
        safe: bool,
    ) -> Expr:
        a = self.compile(value_node)
        name, args = type_name_of(type_node)
        target = T.make_type(name, args)
        if name in ("varchar", "nvarchar", "char", "nchar", "binary", "varbinary") and not args:
            target = SqlType(target.name, length=30)
        style = None
        if style_node is not None:
            style = int(self.compile(style_node).fn(None))
        if target.name in ("varchar", "nvarchar") and target.length == 30 and not args:
            pass
        conv = converter(a.type, target, style)
        fa = a.fn
        if conv is None:
            return Expr(fa, target, a.nullable, a.name)
        if safe:

            def sf(row: Any) -> Any:
                try:
                    return conv(fa(row))
                except SqlError:
                    return None

            return Expr(sf, target, True)
        return Expr(lambda row: conv(fa(row)), target, a.nullable)

    def c_Cast(self, node: exp.Cast) -> Expr:
        return self._cast(node.this, node.args["to"], None, False)

    def c_TryCast(self, node: exp.TryCast) -> Expr:
        return self._cast(node.this, node.args["to"], None, True)

    def c_Convert(self, node: exp.Convert) -> Expr:
        return self._cast(node.expression, node.this, node.args.get("style"), bool(node.args.get("safe")))

    def c_Extract(self, node: exp.Extract) -> Expr:
        unit = node.this.name.upper()
        unit = {"TIMEZONE_MINUTE": "TZOFFSET"}.get(unit, unit)
        return datepart(self, unit, node.expression)

    def c_AtTimeZone(self, node: exp.AtTimeZone) -> Expr:
        return at_time_zone(self, node)

    def c_CurrentTimestamp(self, node: exp.Expression) -> Expr:
        clock = self.session.engine.clock
        return Expr(lambda row: V.round_datetime_ticks(clock.local_ticks()), T.DATETIME, False)

    def c_CurrentUser(self, node: exp.Expression) -> Expr:
        s = self.session
        return Expr(lambda row: s.login.name, T.SYSNAME, False)

    def c_SessionUser(self, node: exp.Expression) -> Expr:
        s = self.session
        return Expr(lambda row: s.user_name(), T.SYSNAME, False)

    def c_CurrentUser_(self, node: exp.Expression) -> Expr:
        return self.c_SessionUser(node)

    def c_Anonymous(self, node: exp.Anonymous) -> Expr:
        return call_function(self, node.name, list(node.expressions), node)

    def c_Dot(self, node: exp.Dot) -> Expr:
        # schema-qualified function: sys.fn_x(...)
        fn = node.expression
        parts = []
        cur: exp.Expression = node.this
        while isinstance(cur, exp.Dot):
            parts.insert(0, cur.expression.name)
            cur = cur.this
        parts.insert(0, cur.name)
        if isinstance(fn, exp.Anonymous):
            return call_function(self, ".".join(parts + [fn.name]), list(fn.expressions), fn)
        raise not_supported(f"the expression {node.sql(dialect='tsql')!r}")

    def c_Chr(self, node: exp.Chr) -> Expr:
        return call_function(self, "CHAR", list(node.expressions), node)

    def c_Substring(self, node: exp.Substring) -> Expr:
        return call_function(self, "SUBSTRING", [node.this, node.args["start"], node.args["length"]], node)

    def c_Trim(self, node: exp.Trim) -> Expr:
        return call_function(self, "TRIM", [node.this], node)

    def c_GroupConcat(self, node: exp.GroupConcat) -> Expr:
        args = [node.this] + ([node.args["separator"]] if node.args.get("separator") is not None else [])
        return call_function(self, "STRING_AGG", args, node)

    def c_Star(self, node: exp.Star) -> Expr:
        raise not_supported("* in this position")

    def c_Window(self, node: exp.Window) -> Expr:
        for w, slot, t in (
            getattr(self, "window_slots", None) or getattr(self.source_compiler, "window_slots", None) or []
        ):
            if w == node:
                return Expr(operator.itemgetter(slot), t, True, "")
        raise not_supported("window functions (OVER) in this position")

    def c_Select(self, node: exp.Select) -> Expr:
        return self.c_Subquery(exp.Subquery(this=node))


def _literal_decimal(e: Expr, t: SqlType, other: SqlType) -> SqlType:
    """An integer constant in decimal arithmetic counts with the precision of its digits, as in SQL Server."""
    if e.const and t.name in ("int", "bigint") and other.name in ("decimal", "numeric"):
        v = e.fn(None)
        if isinstance(v, int):
            return SqlType("numeric", precision=max(1, len(str(abs(v)))), scale=0)
    return t


_OPNAMES = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "modulo"}


def _fdiv(a: float, b: float) -> float:
    if b == 0:
        raise divide_by_zero()
    return a / b


def _ddiv(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    if b == 0:
        raise divide_by_zero()
    return a / b


def _fit(value: decimal.Decimal, t: SqlType) -> decimal.Decimal:
    if t.name in ("money", "smallmoney"):
        return V.quantize(value, 4)
    q = V.quantize(value, t.scale)
    if len(q.as_tuple().digits) > t.precision and q != 0:
        raise arithmetic_overflow("numeric")
    return q


# binary operator nodes: the Compiler method that builds each, and the operator it applies
_OPERATOR_NODES: dict[type[exp.Expression], tuple[Callable[[Compiler, Any, Any], Expr], Any]] = {
    exp.EQ: (Compiler._compare, operator.eq),
    exp.NEQ: (Compiler._compare, operator.ne),
    exp.GT: (Compiler._compare, operator.gt),
    exp.GTE: (Compiler._compare, operator.ge),
    exp.LT: (Compiler._compare, operator.lt),
    exp.LTE: (Compiler._compare, operator.le),
    exp.Add: (Compiler._arith, "+"),
    exp.Sub: (Compiler._arith, "-"),
    exp.Mul: (Compiler._arith, "*"),
    exp.Div: (Compiler._arith, "/"),
    exp.Mod: (Compiler._arith, "%"),
    exp.BitwiseAnd: (Compiler._bitwise, operator.and_),
    exp.BitwiseOr: (Compiler._bitwise, operator.or_),
    exp.BitwiseXor: (Compiler._bitwise, operator.xor),
}


def _negate(value: Any) -> Any:
    """-value; exact for 38-digit decimals (the default decimal context would round them to 28 digits)."""
    return value.copy_negate() if isinstance(value, decimal.Decimal) else -value
