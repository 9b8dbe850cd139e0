"""Built-in scalar functions and aggregate calls, by their T-SQL names."""

from __future__ import annotations

import calendar
import datetime as dt
import decimal
import hashlib
import math
import operator
import re
import uuid
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

from sqlglot import exp

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator import values as V
from sqlserver_cdc_simulator.errors import SqlError, not_supported, unknown_function
from sqlserver_cdc_simulator.extensions import TypedValue
from sqlserver_cdc_simulator.types import SqlType

from .expressions import (
    AGGREGATES,
    AggSpec,
    Expr,
    ExpressionCompiler,
    apply_conversion,
    check_float,
    converter,
    null_propagating,
    result_type,
)
from .system_object_names import SCALAR_FUNCTIONS, SYSTEM_FUNCTIONS

TPD = V.TICKS_PER_DAY
TPS = V.TICKS_PER_SECOND

_UNITS = {
    "year": "year",
    "yy": "year",
    "yyyy": "year",
    "quarter": "quarter",
    "qq": "quarter",
    "q": "quarter",
    "month": "month",
    "mm": "month",
    "m": "month",
    "dayofyear": "dayofyear",
    "dy": "dayofyear",
    "y": "dayofyear",
    "day": "day",
    "dd": "day",
    "d": "day",
    "week": "week",
    "wk": "week",
    "ww": "week",
    "weekday": "weekday",
    "dw": "weekday",
    "w": "weekday",
    "hour": "hour",
    "hh": "hour",
    "minute": "minute",
    "mi": "minute",
    "n": "minute",
    "second": "second",
    "ss": "second",
    "s": "second",
    "millisecond": "millisecond",
    "ms": "millisecond",
    "microsecond": "microsecond",
    "mcs": "microsecond",
    "nanosecond": "nanosecond",
    "ns": "nanosecond",
    "tzoffset": "tzoffset",
    "tz": "tzoffset",
    "timezone_minute": "tzoffset",
    "iso_week": "iso_week",
    # names sqlglot gives DATEPART units
    "dayofweek": "weekday",
    "weekofyear": "week",
    "isoweek": "iso_week",
    "dayofmonth": "day",
    "microseconds": "microsecond",
    "nanoseconds": "nanosecond",
    "isowk": "iso_week",
    "isoww": "iso_week",
}
_UNIT_TICKS = {
    "day": TPD,
    "hour": 3600 * TPS,
    "minute": 60 * TPS,
    "second": TPS,
    "millisecond": 10_000,
    "microsecond": 10,
    "nanosecond": 1,
}


def _unit(node: exp.Expression) -> str:
    name = node.name if isinstance(node, (exp.Column, exp.Var, exp.Identifier)) else node.sql()
    u = _UNITS.get(name.lower())
    if u is None:
        raise SqlError(155, 15, 1, f"'{name}' is not a recognized datepart option.")
    return u


def _as_local_ticks(e: Expr) -> tuple[Callable[[Any], Any], SqlType]:
    """A function giving local ticks (datetime-like) of a temporal or string expression."""
    t = e.type
    fa = e.fn
    if t.name == "date":
        return (lambda row: None if (x := fa(row)) is None else x * TPD), t
    if t.name in T.DATETIME_TYPES:
        return fa, t
    if t.name == "time":
        return (lambda row: None if (x := fa(row)) is None else V.DAYS_TO_1900 * TPD + x), t
    if t.name == "datetimeoffset":
        return (lambda row: None if (x := fa(row)) is None else x.local_ticks), t
    conv = converter(t, T.DATETIME2)
    return apply_conversion(conv, fa), T.DATETIME2


def datepart(c: ExpressionCompiler, unit: str, arg: exp.Expression) -> Expr:
    unit = _UNITS.get(unit.lower(), unit.lower())
    e = c.compile(arg)
    if unit == "tzoffset":
        if e.type.name == "datetimeoffset":
            fa = e.fn
            return Expr(lambda row: None if (x := fa(row)) is None else x.offset, T.INT)
        fd = apply_conversion(converter(e.type, T.DATETIMEOFFSET), e.fn)
        return Expr(lambda row: None if (x := fd(row)) is None else x.offset, T.INT)
    f, _ = _as_local_ticks(e)

    def part(row: Any) -> Any:
        ticks = f(row)
        if ticks is None:
            return None
        return _part(unit, ticks)

    return Expr(part, T.INT)


def _part(unit: str, ticks: int) -> int:
    days, rest = divmod(ticks, TPD)
    if unit in ("hour", "minute", "second", "millisecond", "microsecond", "nanosecond"):
        secs, sub = divmod(rest, TPS)
        return {
            "hour": secs // 3600,
            "minute": secs // 60 % 60,
            "second": secs % 60,
            "millisecond": sub // 10_000,
            "microsecond": sub // 10,
            "nanosecond": sub * 100,
        }[unit]
    d = dt.date.fromordinal(days + 1)
    if unit == "year":
        return d.year
    if unit == "month":
        return d.month
    if unit == "day":
        return d.day
    if unit == "quarter":
        return (d.month - 1) // 3 + 1
    if unit == "dayofyear":
        return d.timetuple().tm_yday
    if unit == "weekday":
        return d.isoweekday() % 7 + 1
    if unit == "week":
        jan1 = dt.date(d.year, 1, 1)
        return (d.toordinal() - jan1.toordinal() + (jan1.isoweekday() % 7)) // 7 + 1
    if unit == "iso_week":
        return d.isocalendar()[1]
    raise SqlError(9810, 16, 1, f"The datepart {unit} is not supported by date function datepart.")


def _add_months(ticks: int, months: int) -> int:
    days, rest = divmod(ticks, TPD)
    d = dt.date.fromordinal(days + 1)
    m = d.month - 1 + months
    y = d.year + m // 12
    m = m % 12 + 1
    day = min(d.day, calendar.monthrange(y, m)[1])
    return (dt.date(y, m, day).toordinal() - 1) * TPD + rest


def at_time_zone(c: ExpressionCompiler, node: exp.AtTimeZone) -> Expr:
    e = c.compile(node.this)
    zone_e = c.compile(node.args["zone"])
    fz = zone_e.fn
    fa = e.fn
    is_dto = e.type.name == "datetimeoffset"
    conv = None if is_dto else converter(e.type, T.DATETIME2)
    scale = e.type.scale if e.type.name in ("datetime2", "datetimeoffset") else 7

    def f(row: Any) -> Any:
        v = fa(row)
        z = fz(row)
        if v is None or z is None:
            return None
        zone = ZoneInfo("UTC" if z.upper() in ("UTC", "COORDINATED UNIVERSAL TIME") else z)
        if is_dto:
            utc = v.utc_ticks
        else:
            local = conv(v) if conv else v
            naive = V.datetime_from_ticks(local)
            aware = naive.replace(tzinfo=zone)
            off = aware.utcoffset()
            utc = local - int(off.total_seconds()) * TPS
        seconds = (utc - V.DAYS_TO_UNIX * TPD) // TPS
        off = dt.datetime.fromtimestamp(seconds, tz=dt.UTC).astimezone(zone).utcoffset()
        return V.DateTimeOffset(utc, int(off.total_seconds() // 60))

    return Expr(f, SqlType("datetimeoffset", scale=scale))


def _const(v: Any, t: SqlType) -> Expr:
    return Expr(lambda row: v, t, v is None, "", True)


def _args(c: ExpressionCompiler, args: list[exp.Expression]) -> list[Expr]:
    return [c.compile(a) for a in args]


def _nullsafe(fns: list[Callable[[Any], Any]], body: Callable[..., Any]) -> Callable[[Any], Any]:
    if len(fns) == 1:
        f0 = fns[0]
        return lambda row: None if (x := f0(row)) is None else body(x)
    if len(fns) == 2:
        return null_propagating(fns[0], fns[1], body)

    def g(row: Any) -> Any:
        vals = [f(row) for f in fns]
        if any(v is None for v in vals):
            return None
        return body(*vals)

    return g


def _str_arg(e: Expr) -> tuple[Callable[[Any], Any], SqlType]:
    if e.type.name in T.STRING_TYPES:
        return e.fn, e.type
    t = T.nvarchar(4000) if e.type.name not in T.BINARY_TYPES else T.varchar(8000)
    return apply_conversion(converter(e.type, t), e.fn), t


def _int_arg(e: Expr) -> Callable[[Any], Any]:
    if e.type.name in T.INTEGER_TYPES:
        return e.fn
    return apply_conversion(converter(e.type, T.BIGINT), e.fn)


def call_function(c: ExpressionCompiler, name: str, args: list[exp.Expression], node: exp.Expression) -> Expr:
    """Compile a call of the function *name* (possibly schema-qualified)."""
    s = c.session
    upper = name.upper()
    short = upper.split(".")[-1]
    if upper.count(".") == 2:
        return _in_database(c, name, args, node)
    if "." in upper and not upper.startswith("SYS.") and not upper.startswith("DBO."):
        ext = s.engine.registry.find_scalar(name)
        if ext is None:
            raise unknown_function(name)
    ext = s.engine.registry.find_scalar(name)
    if ext is not None:
        fn, returns = ext
        compiled = _args(c, args)
        rt = (
            returns([a.type for a in compiled])
            if callable(returns) and not isinstance(returns, SqlType)
            else returns
        )
        fns = [(a.fn, a.type) for a in compiled]
        if len(fns) == 1:  # the common case (e.g. fn_cdc_map_lsn_to_time per change row): no loop
            ((f0, t0),) = fns

            def ext_call(row: Any) -> Any:
                return fn(s, [TypedValue(t0, f0(row))])

        else:

            def ext_call(row: Any) -> Any:
                return fn(s, [TypedValue(t, f(row)) for f, t in fns])

        return Expr(ext_call, rt, True, "")
    if short in AGGREGATES:
        return _aggregate(c, short, args, node)
    impl = _BUILTINS.get(short)
    if impl is not None:
        try:
            return impl(c, args)
        except IndexError:
            raise SqlError(
                174, 15, 1, f"The {short.lower()} function requires more arguments than were supplied."
            ) from None
    if impl is None:
        if short.lower() in SYSTEM_FUNCTIONS or ("." not in upper and short.lower() in SCALAR_FUNCTIONS):
            raise not_supported(f"the function {name}")
        if "." in upper:
            raise SqlError(
                4121,
                16,
                1,
                f'Cannot find either column "{name.split(".")[0]}" or the user-defined function or aggregate "{name}", or the name is ambiguous.',
            )
        raise unknown_function(name)
    return impl(c, args)


def _in_database(c: ExpressionCompiler, name: str, args: list[exp.Expression], node: exp.Expression) -> Expr:
    """``[db].schema.fn(...)``: the function compiled and evaluated in database *db*."""
    s = c.session
    db_name, rest = name.split(".", 1)
    db = s.engine.databases.get(db_name.strip("[]").lower())
    if db is None:
        raise SqlError(
            4121,
            16,
            1,
            f'Cannot find either column "{db_name}" or the user-defined function or aggregate "{name}", '
            "or the name is ambiguous.",
        )
    saved = s.database
    s.database = db.name
    try:
        inner = call_function(c, rest, args, node)
    finally:
        s.database = saved
    fn = inner.fn

    def in_db(row: Any) -> Any:
        previous = s.database
        s.database = db.name
        try:
            return fn(row)
        finally:
            s.database = previous

    return Expr(in_db, inner.type, inner.nullable, inner.name)


def _sum_avg_type(kind: str, at: SqlType) -> SqlType:
    """The result type of SUM or AVG over values of type *at* (SQL Server's return-type tables).

    :param kind: ``SUM`` or ``AVG``; they differ in the scale of decimals (AVG keeps at least 6)
        and in what they accept (SUM refuses non-numeric types, AVG falls back to float).
    """
    if at.name in ("tinyint", "smallint", "int", "bit"):
        return T.INT
    if at.name == "bigint":
        return T.BIGINT
    if at.name in ("decimal", "numeric"):
        return SqlType("decimal", precision=38, scale=at.scale if kind == "SUM" else max(6, at.scale))
    if at.name in ("money", "smallmoney"):
        return T.MONEY
    if kind == "AVG" or at.name in T.FLOAT_TYPES:
        return T.FLOAT
    raise SqlError(8117, 16, 1, f"Operand data type {at.name} is invalid for sum operator.")


def _aggregate(c: ExpressionCompiler, kind: str, args: list[exp.Expression], node: exp.Expression) -> Expr:
    if c.agg is None or c.source_compiler is None:
        raise SqlError(
            147,
            15,
            1,
            "An aggregate may not appear in the WHERE clause unless it is in a subquery contained in a HAVING clause "
            "or a select list, and the column being aggregated is an outer reference.",
        )
    for i, n in enumerate(c.agg.agg_nodes):
        if n == node:
            spec = c.agg.aggs[i]
            return Expr(operator.itemgetter(len(c.agg.group_exprs) + i), spec.type, True, "")
    distinct = False
    arg_node = args[0] if args else None
    if isinstance(arg_node, exp.Distinct):
        distinct = True
        arg_node = arg_node.expressions[0]
    arg = None
    if arg_node is not None and not isinstance(arg_node, exp.Star):
        arg = c.source_compiler.compile(arg_node)
    extra = None
    if kind in ("COUNT", "COUNT_BIG"):
        t = T.INT if kind == "COUNT" else T.BIGINT
    elif kind in ("SUM", "AVG"):
        t = _sum_avg_type(kind, arg.type)
    elif kind == "STRING_AGG":
        sep = c.source_compiler.compile(args[1]).fn(None)
        extra = sep
        t = T.NVARCHAR_MAX if arg.type.name in T.NCHAR_TYPES else SqlType("varchar", length=T.MAX)
    elif kind in ("MIN", "MAX"):
        t = arg.type
    else:
        raise not_supported(f"the aggregate {kind}")
    spec = AggSpec(kind, arg, distinct, t, extra)
    c.agg.aggs.append(spec)
    c.agg.agg_nodes.append(node)
    return Expr(operator.itemgetter(len(c.agg.group_exprs) + len(c.agg.aggs) - 1), t, True, "")


# ---------------------------------------------------------------- builtin table

_BUILTINS: dict[str, Callable[[ExpressionCompiler, list[exp.Expression]], Expr]] = {}


def builtin(
    *names: str,
) -> Callable[
    [Callable[[ExpressionCompiler, list[exp.Expression]], Expr]],
    Callable[[ExpressionCompiler, list[exp.Expression]], Expr],
]:
    def deco(
        fn: Callable[[ExpressionCompiler, list[exp.Expression]], Expr],
    ) -> Callable[[ExpressionCompiler, list[exp.Expression]], Expr]:
        for n in names:
            _BUILTINS[n] = fn
        return fn

    return deco


def _argc(name: str, args: list[Any], lo: int, hi: int | None = None) -> None:
    hi = lo if hi is None else hi
    if not lo <= len(args) <= hi:
        raise SqlError(174, 15, 1, f"The {name.lower()} function requires {lo} argument(s).")


# the clock functions: how each reads the server clock, and the type of its value
_CLOCK_FUNCTIONS: dict[str, tuple[Callable[[Any], Any], SqlType]] = {
    "GETDATE": (lambda clock: V.round_datetime_ticks(clock.local_ticks()), T.DATETIME),
    "CURRENT_TIMESTAMP": (lambda clock: V.round_datetime_ticks(clock.local_ticks()), T.DATETIME),
    "GETUTCDATE": (lambda clock: V.round_datetime_ticks(clock.utc_ticks()), T.DATETIME),
    "SYSDATETIME": (lambda clock: clock.local_ticks(), T.DATETIME2),
    "SYSUTCDATETIME": (lambda clock: clock.utc_ticks(), T.DATETIME2),
    "SYSDATETIMEOFFSET": (lambda clock: clock.now_dto(), T.DATETIMEOFFSET),
}


def _clock_function(
    read: Callable[[Any], Any], t: SqlType
) -> Callable[[ExpressionCompiler, list[exp.Expression]], Expr]:
    """The builtin for a clock function: *read* applied to the server clock at each evaluation."""

    def build(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
        clock = c.session.engine.clock
        return Expr(lambda row: read(clock), t, False)

    return build


for _name, (_read, _type) in _CLOCK_FUNCTIONS.items():
    _BUILTINS[_name] = _clock_function(_read, _type)


@builtin("DATEPART")
def _datepart(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    _argc("DATEPART", args, 2)
    return datepart(c, _unit(args[0]), args[1])


@builtin("YEAR", "MONTH", "DAY")
def _ymd(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    raise AssertionError  # replaced below


def _safe_pow(a: float, b: float) -> float:
    try:
        return a**b
    except OverflowError:
        return float("inf")
    except ZeroDivisionError:
        return float("nan")


def _ymd_factory(unit: str) -> Callable[[ExpressionCompiler, list[exp.Expression]], Expr]:
    def f(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
        _argc(unit, args, 1)
        return datepart(c, unit, args[0])

    return f


for _u in ("YEAR", "MONTH", "DAY"):
    _BUILTINS[_u] = _ymd_factory(_u.lower())


@builtin("DATEADD")
def _dateadd(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    _argc("DATEADD", args, 3)
    unit = _unit(args[0])
    n = _int_arg(c.compile(args[1]))
    e = c.compile(args[2])
    t = e.type if e.type.name in T.TEMPORAL_TYPES else T.DATETIME
    fa = e.fn if e.type.name in T.TEMPORAL_TYPES else apply_conversion(converter(e.type, T.DATETIME), e.fn)
    name = t.name
    if unit in ("microsecond", "nanosecond") and name in ("smalldatetime", "date", "datetime"):
        raise SqlError(
            9810,
            16,
            1,
            f"The datepart {unit} is not supported by date function dateadd for data type {name}.",
        )
    if unit == "nanosecond":
        # 100 ns ticks: 1..49 ns round down, 50..99 round up (dateadd-transact-sql.md)
        whole_ns = n
        n = lambda row: None if (k := whole_ns(row)) is None else _round_half_away(k, 100)  # noqa: E731

    def shift(ticks: int, k: int) -> int:
        if unit in ("year", "quarter", "month"):
            months = k * {"year": 12, "quarter": 3, "month": 1}[unit]
            return _add_months(ticks, months)
        if unit in ("dayofyear", "weekday"):
            return ticks + k * TPD
        if unit == "week":
            return ticks + 7 * k * TPD
        return ticks + k * _UNIT_TICKS[unit]

    def add(v: Any, k: int) -> Any:
        if name == "date":
            return shift(v * TPD, k) // TPD
        if name == "time":
            return shift(v, k) % TPD
        if name == "datetimeoffset":
            local = shift(v.local_ticks, k)
            return V.DateTimeOffset(local - v.offset * 60 * TPS, v.offset)
        r = shift(v, k)
        if name == "datetime":
            return V.round_datetime_ticks(r)
        return r

    def f(row: Any) -> Any:
        v = fa(row)
        k = n(row)
        if v is None or k is None:
            return None
        try:
            r = add(v, k)
        except (ValueError, OverflowError):  # a year outside 1..9999
            r = None
        if r is None or not V.in_temporal_range(r, name):
            raise SqlError(517, 16, 1, f"Adding a value to a '{name}' column caused an overflow.")
        return r

    return Expr(f, t)


@builtin("DATEDIFF")
def _datediff(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    return _datediff_of(c, args, big=False)


@builtin("DATEDIFF_BIG")
def _datediff_big(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    return _datediff_of(c, args, big=True)


def _datediff_of(c: ExpressionCompiler, args: list[exp.Expression], big: bool) -> Expr:
    """DATEDIFF (int; error 535 past its range) or DATEDIFF_BIG (bigint) in *unit* boundaries crossed."""
    _argc("DATEDIFF", args, 3)
    unit = _unit(args[0])
    a = c.compile(args[1])
    b = c.compile(args[2])
    if a.type.name == "datetimeoffset" or b.type.name == "datetimeoffset":
        fa = apply_conversion(converter(a.type, T.DATETIMEOFFSET), a.fn)
        fb = apply_conversion(converter(b.type, T.DATETIMEOFFSET), b.fn)
        ga: Callable[[Any], Any] = lambda row: None if (x := fa(row)) is None else x.utc_ticks  # noqa: E731
        gb: Callable[[Any], Any] = lambda row: None if (x := fb(row)) is None else x.utc_ticks  # noqa: E731
    else:
        ga, _ = _as_local_ticks(a)
        gb, _ = _as_local_ticks(b)

    def diff(x: int, y: int) -> int:
        if unit in ("year", "quarter", "month"):
            dx = dt.date.fromordinal(x // TPD + 1)
            dy = dt.date.fromordinal(y // TPD + 1)
            if unit == "year":
                return dy.year - dx.year
            months = (dy.year - dx.year) * 12 + dy.month - dx.month
            if unit == "quarter":
                return (dy.year * 4 + (dy.month - 1) // 3) - (dx.year * 4 + (dx.month - 1) // 3)
            return months
        if unit in ("day", "dayofyear", "weekday"):
            return y // TPD - x // TPD
        if unit == "week":
            return ((y // TPD + 1) // 7) - ((x // TPD + 1) // 7)
        if unit == "nanosecond":
            return (y - x) * 100
        u = _UNIT_TICKS[unit]
        return y // u - x // u

    limit = 2**63 if big else 2**31

    def checked(x: int, y: int) -> int:
        r = diff(x, y)
        if not -limit <= r < limit:
            raise SqlError(
                535,
                16,
                1,
                "The datediff function resulted in an overflow. The number of dateparts separating two "
                "date/time instances is too large. Try to use datediff with a less precise datepart.",
            )
        return r

    f = _nullsafe([ga, gb], checked)
    return Expr(f, T.BIGINT if big else T.INT)


def _round_half_away(k: int, unit: int) -> int:
    """*k* / *unit* rounded half away from zero."""
    q, r = divmod(abs(k), unit)
    q += 1 if 2 * r >= unit else 0
    return q if k >= 0 else -q


@builtin("EOMONTH")
def _eomonth(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    f, _ = _as_local_ticks(e)

    def g(ticks: int) -> int:
        d = dt.date.fromordinal(ticks // TPD + 1)
        return dt.date(d.year, d.month, calendar.monthrange(d.year, d.month)[1]).toordinal() - 1

    return Expr(_nullsafe([f], g), T.DATE)


@builtin("DATEFROMPARTS")
def _datefromparts(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fns = [_int_arg(c.compile(a)) for a in args]
    return Expr(_nullsafe(fns, lambda y, m, d: dt.date(y, m, d).toordinal() - 1), T.DATE)


@builtin("TODATETIMEOFFSET")
def _todto(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    f, _ = _as_local_ticks(e)
    o = c.compile(args[1])
    fo = o.fn
    is_str = o.type.name in T.STRING_TYPES

    def g(ticks: int, off: Any) -> Any:
        minutes = _parse_offset(off) if is_str else int(off)
        return V.DateTimeOffset(ticks - minutes * 60 * TPS, minutes)

    scale = e.type.scale if e.type.name in ("datetime2", "datetimeoffset") else 7
    return Expr(_nullsafe([f, fo], g), SqlType("datetimeoffset", scale=scale))


def _parse_offset(text: str) -> int:
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    hh, mm = text.lstrip("+-").split(":")
    return sign * (int(hh) * 60 + int(mm))


@builtin("SWITCHOFFSET")
def _switchoffset(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    fa = (
        apply_conversion(converter(e.type, T.DATETIMEOFFSET), e.fn)
        if e.type.name != "datetimeoffset"
        else e.fn
    )
    o = c.compile(args[1])
    is_str = o.type.name in T.STRING_TYPES

    def g(v: Any, off: Any) -> Any:
        minutes = _parse_offset(off) if is_str else int(off)
        return V.DateTimeOffset(v.utc_ticks, minutes)

    return Expr(_nullsafe([fa, o.fn], g), e.type if e.type.name == "datetimeoffset" else T.DATETIMEOFFSET)


@builtin("ISDATE")
def _isdate(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    fa = e.fn

    def g(row: Any) -> int:
        v = fa(row)
        if v is None:
            return 0
        try:
            V.convert(v, e.type, T.DATETIME)
            return 1
        except SqlError:
            return 0

    return Expr(g, T.INT, False)


# -- strings


@builtin("LEN")
def _len(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    f, _ = _str_arg(c.compile(args[0]))
    return Expr(_nullsafe([f], lambda s: utf16_length(s.rstrip(" "))), T.INT)


@builtin("DATALENGTH")
def _datalength(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    t = e.type

    def size(v: Any) -> int:
        if t.name in T.NCHAR_TYPES:
            return len(v.encode("utf-16-le", "surrogatepass"))
        if t.name in T.CHAR_TYPES:
            return len(v.encode("cp1252", "replace"))
        if t.name in T.BINARY_TYPES:
            return len(v)
        return t.max_length

    return Expr(_nullsafe([e.fn], size), T.INT if t.length != T.MAX else T.BIGINT)


def _string_fn(name: str, body: Callable[..., Any], nargs: int, keep_type: bool = True) -> None:
    def impl(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
        _argc(name, args, nargs)
        first, t = _str_arg(c.compile(args[0]))
        rest = [c.compile(a).fn for a in args[1:]]
        return Expr(_nullsafe([first, *rest], body), t if keep_type else T.nvarchar(4000))

    _BUILTINS[name] = impl


# The collation (SQL_Latin1_General_CP1_CI_AS) is not supplementary-character aware: string
# functions count UTF-16 code units, so a character beyond the BMP counts 2 (len-transact-sql.md,
# collation-and-unicode-support.md). Python strings count code points; these helpers convert.


def _utf16(s: str) -> bytes:
    return s.encode("utf-16-le", "surrogatepass")


def _from_utf16(b: bytes) -> str:
    return b.decode("utf-16-le", "surrogatepass")


def utf16_length(s: str) -> int:
    """The length of *s* in UTF-16 code units (what LEN counts under a non-SC collation)."""
    return len(s) if s.isascii() else len(_utf16(s)) // 2


def utf16_slice(s: str, begin: int, end: int | None) -> str:
    """``s[begin:end]`` counted in UTF-16 code units (a surrogate pair may be split, as in SQL Server)."""
    if s.isascii() or all(ord(ch) < 0x10000 for ch in s):
        return s[begin:end]
    units = _utf16(s)
    return _from_utf16(units[2 * begin : None if end is None else 2 * end])


def _case_map(mapping: Callable[[str], str]) -> Callable[[str], str]:
    """UPPER / LOWER character by character: a character whose mapping is longer stays (ß)."""

    def convert(s: str) -> str:
        if s.isascii():
            return mapping(s)
        return "".join(m if len(m := mapping(ch)) == 1 else ch for ch in s)

    return convert


def _left(s: str, n: Any) -> str:
    return utf16_slice(s, 0, max(0, int(n)))


def _right(s: str, n: Any) -> str:
    n = int(n)
    if n <= 0:
        return ""
    return utf16_slice(s, max(0, utf16_length(s) - n), None)


def _reverse(s: str) -> str:
    if s.isascii():
        return s[::-1]
    units = _utf16(s)
    return _from_utf16(b"".join(units[i : i + 2] for i in range(len(units) - 2, -1, -2)))


_string_fn("UPPER", _case_map(str.upper), 1)
_string_fn("LOWER", _case_map(str.lower), 1)
_string_fn("LTRIM", lambda s: s.lstrip(" "), 1)
_string_fn("RTRIM", lambda s: s.rstrip(" "), 1)
_string_fn("TRIM", lambda s: s.strip(" "), 1)
_string_fn("REVERSE", _reverse, 1)
_string_fn("LEFT", _left, 2)
_string_fn("RIGHT", _right, 2)


@builtin("SUBSTRING")
def _substring(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    _argc("SUBSTRING", args, 3)
    e = c.compile(args[0])
    fa = e.fn if e.type.name in T.STRING_TYPES or e.type.name in T.BINARY_TYPES else _str_arg(e)[0]
    fs = _int_arg(c.compile(args[1]))
    fl = _int_arg(c.compile(args[2]))

    def sub(s: Any, start: int, length: int) -> Any:
        if length < 0:
            raise SqlError(537, 16, 3, "Invalid length parameter passed to the LEFT or SUBSTRING function.")
        begin = start - 1
        end = begin + length
        if isinstance(s, str):
            return utf16_slice(s, max(0, begin), max(0, end))
        return s[max(0, begin) : max(0, end)]

    t = e.type if e.type.name in T.STRING_TYPES or e.type.name in T.BINARY_TYPES else T.nvarchar(4000)
    return Expr(_nullsafe([fa, fs, fl], sub), t)


@builtin("REPLACE")
def _replace(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    _argc("REPLACE", args, 3)
    fa, t = _str_arg(c.compile(args[0]))
    fb, _ = _str_arg(c.compile(args[1]))
    fc, _ = _str_arg(c.compile(args[2]))

    def rep(s: str, old: str, new: str) -> str:
        if old == "":
            return s
        return re.sub(re.escape(old), lambda m: new, s, flags=re.I)

    return Expr(_nullsafe([fa, fb, fc], rep), T.nvarchar(4000) if t.length != T.MAX else t)


@builtin("CHARINDEX")
def _charindex(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fa, _ = _str_arg(c.compile(args[0]))
    fb, _ = _str_arg(c.compile(args[1]))
    fs = _int_arg(c.compile(args[2])) if len(args) > 2 else (lambda row: 1)
    return Expr(
        _nullsafe(
            [fa, fb, fs],
            lambda needle, hay, start: hay.casefold().find(needle.casefold(), max(0, start - 1)) + 1,
        ),
        T.INT,
    )


@builtin("CONCAT")
def _concat(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    parts = [_str_arg(c.compile(a)) for a in args]
    fns = [p[0] for p in parts]
    unicode_ = any(p[1].name in T.NCHAR_TYPES for p in parts)

    def f(row: Any) -> str:
        return "".join(v for fn in fns if (v := fn(row)) is not None)

    return Expr(f, T.nvarchar(4000) if unicode_ else T.varchar(8000), False)


@builtin("REPLICATE")
def _replicate(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fa, t = _str_arg(c.compile(args[0]))
    fn = _int_arg(c.compile(args[1]))
    return Expr(
        _nullsafe([fa, fn], lambda s, n: s * max(0, n) if n >= 0 else None),
        SqlType(
            t.name if t.name in ("varchar", "nvarchar") else "nvarchar",
            length=T.MAX if t.length == T.MAX else 8000 if t.name == "varchar" else 4000,
        ),
    )


@builtin("SPACE")
def _space(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fn = _int_arg(c.compile(args[0]))
    return Expr(_nullsafe([fn], lambda n: " " * n), T.varchar(8000))


@builtin("STUFF")
def _stuff(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fa, t = _str_arg(c.compile(args[0]))
    fs = _int_arg(c.compile(args[1]))
    fl = _int_arg(c.compile(args[2]))
    fr, _ = _str_arg(c.compile(args[3]))
    return Expr(
        _nullsafe([fa, fs, fl, fr], lambda s, st, ln, r: s[: st - 1] + r + s[st - 1 + ln :]), T.nvarchar(4000)
    )


@builtin("CHAR")
def _char(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fn = _int_arg(c.compile(args[0]))
    return Expr(
        _nullsafe([fn], lambda n: bytes([n]).decode("cp1252", "replace") if 0 <= n < 256 else None),
        T.varchar(1),
    )


@builtin("NCHAR")
def _nchar(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fn = _int_arg(c.compile(args[0]))
    return Expr(_nullsafe([fn], chr), T.nvarchar(1))


@builtin("ASCII")
def _ascii(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fa, _ = _str_arg(c.compile(args[0]))
    return Expr(_nullsafe([fa], lambda s: s.encode("cp1252", "replace")[0] if s else None), T.INT)


@builtin("UNICODE")
def _unicode(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fa, _ = _str_arg(c.compile(args[0]))
    return Expr(_nullsafe([fa], lambda s: ord(s[0]) if s else None), T.INT)


@builtin("QUOTENAME")
def _quotename(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fa, _ = _str_arg(c.compile(args[0]))
    fq = c.compile(args[1]).fn if len(args) > 1 else (lambda row: "[")

    def q(s: str, ch: str) -> Any:
        if len(s) > 128:
            return None
        if ch in ("[", "]"):
            return "[" + s.replace("]", "]]") + "]"
        if ch == '"':
            return '"' + s.replace('"', '""') + '"'
        if ch == "'":
            return "'" + s.replace("'", "''") + "'"
        return None

    return Expr(_nullsafe([fa, fq], q), T.nvarchar(258))


@builtin("STR")
def _str(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    fa = apply_conversion(converter(e.type, T.FLOAT), e.fn)
    ln = c.compile(args[1]).fn(None) if len(args) > 1 else 10
    dec = c.compile(args[2]).fn(None) if len(args) > 2 else 0
    return Expr(
        _nullsafe([fa], lambda v: f"{v:>{ln}.{dec}f}"[:ln] if len(f"{v:.{dec}f}") <= ln else "*" * ln),
        T.varchar(ln),
    )


# -- NULL handling


@builtin("ISNULL")
def _isnull(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    _argc("ISNULL", args, 2)
    a = c.compile(args[0])
    b = c.compile(args[1])
    fa = a.fn
    fb = apply_conversion(converter(b.type, a.type), b.fn) if not (a.const and fa(None) is None) else b.fn
    t = a.type if not (a.const and fa(None) is None) else b.type

    def f(row: Any) -> Any:
        v = fa(row)
        return fb(row) if v is None else v

    return Expr(f, t, b.nullable)


@builtin("COALESCE")
def _coalesce(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    items = _args(c, args)
    t = result_type([i for i in items if not (i.const and i.fn(None) is None)] or items)
    fns = [apply_conversion(converter(i.type, t), i.fn) for i in items]

    def f(row: Any) -> Any:
        for fn in fns:
            v = fn(row)
            if v is not None:
                return v
        return None

    return Expr(f, t, all(i.nullable for i in items))


@builtin("NULLIF")
def _nullif(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    a = c.compile(args[0])
    eq = c.compile(exp.EQ(this=args[0], expression=args[1])).fn
    fa = a.fn
    return Expr(lambda row: None if eq(row) is True else fa(row), a.type)


@builtin("IIF")
def _iif(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    return c.compile(exp.Case(ifs=[exp.If(this=args[0], true=args[1])], default=args[2]))


# -- math


@builtin("ABS")
def _abs(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    return Expr(_nullsafe([e.fn], abs), e.type)


@builtin("SIGN")
def _sign(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    return Expr(_nullsafe([e.fn], lambda v: type(v)((v > 0) - (v < 0))), e.type)


@builtin("CEILING", "FLOOR")
def _ceil(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    raise AssertionError


def _rounder(up: bool) -> Callable[[ExpressionCompiler, list[exp.Expression]], Expr]:
    def impl(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
        e = c.compile(args[0])
        t = e.type
        rt = SqlType("decimal", precision=t.precision, scale=0) if t.name in ("decimal", "numeric") else t

        def g(v: Any) -> Any:
            if isinstance(v, float):
                return float(math.ceil(v) if up else math.floor(v))
            if isinstance(v, decimal.Decimal):
                return decimal.Decimal(math.ceil(v) if up else math.floor(v))
            return v

        return Expr(_nullsafe([e.fn], g), rt)

    return impl


_BUILTINS["CEILING"] = _rounder(True)
_BUILTINS["FLOOR"] = _rounder(False)


@builtin("ROUND")
def _round(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    fd = _int_arg(c.compile(args[1]))
    t = e.type

    def g(v: Any, d: int) -> Any:
        if isinstance(v, float):
            q = decimal.Decimal(repr(v)).quantize(
                decimal.Decimal(1).scaleb(-d), rounding=decimal.ROUND_HALF_UP
            )
            return float(q)
        if isinstance(v, decimal.Decimal):
            q = v.quantize(
                decimal.Decimal(1).scaleb(-d), rounding=decimal.ROUND_HALF_UP, context=V.DECIMAL_CONTEXT
            )
            return V.quantize(q, t.scale) if t.name in ("decimal", "numeric") else q
        if isinstance(v, int) and d < 0:
            unit = 10 ** (-d)
            return (abs(v) + unit // 2) // unit * unit * (1 if v >= 0 else -1)
        return v

    return Expr(_nullsafe([e.fn, fd], g), t)


@builtin("POWER")
def _power(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    p = c.compile(args[1])
    fe = apply_conversion(converter(e.type, T.FLOAT), e.fn)
    fp = apply_conversion(converter(p.type, T.FLOAT), p.fn)
    return Expr(_nullsafe([fe, fp], lambda a, b: check_float(_safe_pow(a, b))), T.FLOAT)


@builtin("SQUARE")
def _square(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    fe = apply_conversion(converter(e.type, T.FLOAT), e.fn)
    return Expr(_nullsafe([fe], lambda a: check_float(a * a)), T.FLOAT)


@builtin("SQRT")
def _sqrt(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    e = c.compile(args[0])
    fe = apply_conversion(converter(e.type, T.FLOAT), e.fn)
    return Expr(_nullsafe([fe], lambda a: check_float(math.sqrt(a) if a >= 0 else float("nan"))), T.FLOAT)


# -- system


def _named_or_current(
    by_id: bool, lookup: Callable[[Any, Any], Any], current: Callable[[Any], Any], t: SqlType
) -> Callable[[ExpressionCompiler, list[exp.Expression]], Expr]:
    """A function of a database or schema named by its argument, or of the current one without.

    :param by_id: the argument is an id (int), else a name (string).
    :param lookup: ``(session, argument)`` to the value; None for an unknown object.
    :param current: ``session`` to the value for the current database or default schema.
    :param t: the type of the value.
    """

    def build(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
        s = c.session
        if args:
            e = c.compile(args[0])
            fa = _int_arg(e) if by_id else _str_arg(e)[0]
            return Expr(_nullsafe([fa], lambda v: lookup(s, v)), t)
        return Expr(lambda row: current(s), t, False)

    return build


def _schema_name_by_id(s: Any, schema_id: int) -> Any:
    for sch in s.current_db().schemas.values():
        if sch.schema_id == schema_id:
            return sch.name
    return None


def _database_id(s: Any, name: str) -> Any:
    db = s.engine.databases.get(name.lower())
    return db.database_id if db else None


def _schema_id(s: Any, name: str) -> Any:
    sch = s.current_db().schema(name)
    return sch.schema_id if sch else None


_BUILTINS["DB_NAME"] = _named_or_current(
    True, lambda s, i: s.engine.database_name_by_id(i), lambda s: s.database, T.SYSNAME
)
_BUILTINS["DB_ID"] = _named_or_current(False, _database_id, lambda s: s.current_db().database_id, T.SMALLINT)
_BUILTINS["SCHEMA_NAME"] = _named_or_current(
    True, _schema_name_by_id, lambda s: s.default_schema(), T.SYSNAME
)
_BUILTINS["SCHEMA_ID"] = _named_or_current(
    False, _schema_id, lambda s: s.current_db().schema(s.default_schema()).schema_id, T.INT
)


def _of_named_table(
    c: ExpressionCompiler, args: list[exp.Expression], value: Callable[[Any], Any], t: SqlType
) -> Expr:
    """A function of the table its first argument names (``'dbo.t'``); NULL for an unknown table.

    :param value: what the function gives for the table.
    :param t: the type of that value.
    """
    s = c.session
    fa, _ = _str_arg(c.compile(args[0]))

    def lookup(name: str) -> Any:
        found = s.lookup_table_by_text(name)
        return None if found is None else value(found)

    return Expr(_nullsafe([fa], lookup), t)


@builtin("OBJECT_ID")
def _object_id(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    return _of_named_table(c, args, lambda table: table.object_id, T.INT)


@builtin("OBJECT_NAME", "OBJECT_SCHEMA_NAME")
def _object_name(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    raise AssertionError


def _object_name_factory(schema: bool) -> Callable[[ExpressionCompiler, list[exp.Expression]], Expr]:
    def impl(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
        s = c.session
        fa = _int_arg(c.compile(args[0]))
        fdb = _int_arg(c.compile(args[1])) if len(args) > 1 else (lambda row: s.current_db().database_id)

        def lookup(oid: int, dbid: int) -> Any:
            db = s.engine.database_by_id(dbid)
            t = db.table_by_id(oid) if db else None
            if t is None:
                return None
            return t.schema.name if schema else t.name

        return Expr(_nullsafe([fa, fdb], lookup), T.SYSNAME)

    return impl


_BUILTINS["OBJECT_NAME"] = _object_name_factory(False)
_BUILTINS["OBJECT_SCHEMA_NAME"] = _object_name_factory(True)


@builtin("SERVERPROPERTY")
def _serverproperty(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    fa, _ = _str_arg(c.compile(args[0]))

    def prop(name: str) -> Any:
        value = s.engine.server_property(name)
        if value is None:
            return None
        base = _SERVER_PROPERTY_TYPES.get(name.lower(), T.nvarchar(128))
        return V.Variant(base, int(value) if base.name in ("int", "bigint") else value)

    return Expr(_nullsafe([fa], prop), T.SQL_VARIANT)


# SERVERPROPERTY returns sql_variant; the base type of each property (serverproperty-transact-sql.md)
_SERVER_PROPERTY_TYPES = {
    "engineedition": T.INT,
    "editionid": T.BIGINT,
    "isclustered": T.INT,
    "ishadrenabled": T.INT,
    "isintegratedsecurityonly": T.INT,
    "productmajorversion": T.nvarchar(128),
}


# DATABASEPROPERTYEX: the same for every database of the simulator
_DATABASE_PROPERTIES = {
    "status": "ONLINE",
    "updateability": "READ_WRITE",
    "recovery": "FULL",
    "collation": "SQL_Latin1_General_CP1_CI_AS",
    "version": "957",
}


@builtin("DATABASEPROPERTYEX")
def _dbpropex(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    fa, _ = _str_arg(c.compile(args[0]))
    fp, _ = _str_arg(c.compile(args[1]))

    def prop(db: str, p: str) -> Any:
        if db.lower() not in s.engine.databases:
            return None
        return _DATABASE_PROPERTIES.get(p.lower())

    return Expr(_nullsafe([fa, fp], prop), SqlType("nvarchar", length=4000))


@builtin("USER_NAME", "CURRENT_USER")
def _user_name(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(lambda row: s.user_name(), T.SYSNAME, False)


@builtin("SUSER_SNAME", "SUSER_NAME", "ORIGINAL_LOGIN", "SYSTEM_USER")
def _suser(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(lambda row: s.login.name, T.SYSNAME, False)


@builtin("APP_NAME")
def _app_name(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(lambda row: s.app_name, T.nvarchar(128), False)


@builtin("HOST_NAME")
def _host_name(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(lambda row: s.host_name, T.nvarchar(128), False)


@builtin("IS_MEMBER")
def _is_member(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    fa, _ = _str_arg(c.compile(args[0]))
    return Expr(_nullsafe([fa], lambda r: s.is_member(r)), T.INT)


@builtin("IS_SRVROLEMEMBER")
def _is_srvrole(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    fa, _ = _str_arg(c.compile(args[0]))
    return Expr(
        _nullsafe(
            [fa],
            lambda r: 1 if (r.lower() == "sysadmin" and s.login.is_sysadmin) or r.lower() == "public" else 0,
        ),
        T.INT,
    )


@builtin("HAS_DBACCESS")
def _has_dbaccess(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    fa, _ = _str_arg(c.compile(args[0]))
    return Expr(
        _nullsafe([fa], lambda d: 1 if s.engine.databases.get(d.lower()) and s.has_db_access(d) else 0), T.INT
    )


@builtin("HAS_PERMS_BY_NAME")
def _has_perms(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(lambda row: 1 if s.login.is_sysadmin or s.is_member("db_owner") else 0, T.INT, False)


@builtin("NEWID", "NEWSEQUENTIALID")
def _newid(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    return Expr(lambda row: uuid.uuid4(), T.UNIQUEIDENTIFIER, False)


@builtin("SCOPE_IDENTITY")
def _scope_identity(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(
        lambda row: None if s.last_identity is None else decimal.Decimal(s.last_identity),
        T.decimal_type(38, 0),
    )


@builtin("IDENT_CURRENT")
def _ident_current(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    def current(table: Any) -> Any:
        return None if table.identity_current is None else decimal.Decimal(table.identity_current)

    return _of_named_table(c, args, current, T.decimal_type(38, 0))


@builtin("XACT_STATE")
def _xact_state(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(
        lambda row: 0 if s.xact is None or not s.xact.explicit else (-1 if s.xact.doomed else 1),
        T.SMALLINT,
        False,
    )


@builtin("CURRENT_TRANSACTION_ID")
def _current_xact(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(lambda row: s.xact.xid if s.xact else None, T.BIGINT)


@builtin("TYPE_NAME")
def _type_name(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fa = _int_arg(c.compile(args[0]))
    by_id = {v: k for k, v in T.TYPE_IDS.items() if k != "sysname"}
    return Expr(_nullsafe([fa], lambda i: by_id.get(i)), T.SYSNAME)


@builtin("COL_NAME")
def _col_name(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    fo = _int_arg(c.compile(args[0]))
    fc = _int_arg(c.compile(args[1]))

    def name(oid: int, cid: int) -> Any:
        t = s.current_db().table_by_id(oid)
        if t is None:
            return None
        for col in t.columns:
            if col.column_id == cid:
                return col.name
        return None

    return Expr(_nullsafe([fo, fc], name), T.SYSNAME)


@builtin("COLUMNPROPERTY")
def _columnproperty(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    fo = _int_arg(c.compile(args[0]))
    fc, _ = _str_arg(c.compile(args[1]))
    fp, _ = _str_arg(c.compile(args[2]))

    def prop(oid: int, col: str, p: str) -> Any:
        t = s.current_db().table_by_id(oid)
        if t is None:
            return None
        i = t.column_index(col)
        if i is None:
            return None
        column = t.columns[i]
        p = p.lower()
        if p == "isidentity":
            return 1 if column.identity else 0
        if p == "allowsnull":
            return 1 if column.nullable else 0
        if p == "iscomputed":
            return 1 if column.computed else 0
        if p == "precision":
            return column.type.catalog_precision or column.type.length
        if p == "scale":
            return column.type.catalog_scale
        if p == "columnid":
            return column.column_id
        return None

    return Expr(_nullsafe([fo, fc, fp], prop), T.INT)


@builtin("HASHBYTES")
def _hashbytes(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    fa, _ = _str_arg(c.compile(args[0]))
    e = c.compile(args[1])
    t = e.type

    def to_bytes(v: Any) -> bytes:
        if t.name in T.NCHAR_TYPES:
            return v.encode("utf-16-le")
        if t.name in T.CHAR_TYPES:
            return v.encode("cp1252", "replace")
        if isinstance(v, bytes):
            return v
        return str(v).encode()

    algos = {"MD5": "md5", "SHA1": "sha1", "SHA": "sha1", "SHA2_256": "sha256", "SHA2_512": "sha512"}
    return Expr(
        _nullsafe([fa, e.fn], lambda a, v: hashlib.new(algos[a.upper()], to_bytes(v)).digest()),
        T.varbinary(8000),
    )


@builtin("MIN_ACTIVE_ROWVERSION")
def _min_active_rv(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    s = c.session
    return Expr(
        lambda row: (s.current_db().flags.get("dbts", 2000) + 1).to_bytes(8, "big"), T.binary(8), False
    )


@builtin("SESSIONPROPERTY")
def _sessionprop(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    return Expr(lambda row: 1, T.INT, False)


@builtin("ERROR_NUMBER", "ERROR_MESSAGE", "ERROR_SEVERITY", "ERROR_STATE", "ERROR_LINE", "ERROR_PROCEDURE")
def _error_fn(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    return Expr(lambda row: None, T.INT)


@builtin("FORMAT")
def _format(c: ExpressionCompiler, args: list[exp.Expression]) -> Expr:
    raise not_supported("FORMAT()")
