"""Value conversions between SQL Server types (CAST/CONVERT and implicit conversion).

The value representation of each type is described in :mod:`.types`. Temporal values are
integers of 100 ns ticks so that datetime2(7), time(7) and datetimeoffset(7) keep their full
precision; :func:`ticks_from_datetime` and :func:`datetime_from_ticks` convert from and to
Python's (microsecond) ``datetime``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import re
import struct
import uuid
from typing import Any, NamedTuple

from . import types as T
from .errors import SqlError, arithmetic_overflow, conversion_failed
from .types import SqlType

TICKS_PER_SECOND = 10_000_000
TICKS_PER_DAY = 86_400 * TICKS_PER_SECOND
DAYS_TO_1900 = dt.date(1900, 1, 1).toordinal() - 1
DAYS_TO_UNIX = dt.date(1970, 1, 1).toordinal() - 1
MAX_DAYS = dt.date(9999, 12, 31).toordinal() - 1

#: arithmetic context wide enough for decimal(38, s) values.
DECIMAL_CONTEXT = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP)
_QUANTA = [decimal.Decimal(1).scaleb(-s) for s in range(39)]


class Variant(NamedTuple):
    """A sql_variant value: the value and its base type (what SERVERPROPERTY returns)."""

    type: T.SqlType
    value: Any


class DateTimeOffset(NamedTuple):
    """A datetimeoffset value: UTC ticks since 0001-01-01 and the offset in minutes."""

    utc_ticks: int
    offset: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DateTimeOffset) and self.utc_ticks == other.utc_ticks

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: DateTimeOffset) -> bool:  # type: ignore[override]
        return self.utc_ticks < other.utc_ticks

    def __le__(self, other: DateTimeOffset) -> bool:  # type: ignore[override]
        return self.utc_ticks <= other.utc_ticks

    def __gt__(self, other: DateTimeOffset) -> bool:  # type: ignore[override]
        return self.utc_ticks > other.utc_ticks

    def __ge__(self, other: DateTimeOffset) -> bool:  # type: ignore[override]
        return self.utc_ticks >= other.utc_ticks

    def __hash__(self) -> int:
        return hash(self.utc_ticks)

    @property
    def local_ticks(self) -> int:
        return self.utc_ticks + self.offset * 60 * TICKS_PER_SECOND


# ---------------------------------------------------------------- Python <-> simulator values


def ticks_from_datetime(value: dt.datetime) -> int:
    """Ticks since 0001-01-01 of a naive (or aware: its wall clock) datetime."""
    days = value.toordinal() - 1
    return (
        days * TICKS_PER_DAY
        + (value.hour * 3600 + value.minute * 60 + value.second) * TICKS_PER_SECOND
        + value.microsecond * 10
    )


def datetime_from_ticks(ticks: int) -> dt.datetime:
    """Naive datetime of *ticks* (100 ns below a microsecond are dropped)."""
    days, rest = divmod(ticks, TICKS_PER_DAY)
    d = dt.date.fromordinal(days + 1)
    secs, sub = divmod(rest, TICKS_PER_SECOND)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return dt.datetime(d.year, d.month, d.day, h, m, s, sub // 10)


def dto_from_datetime(value: dt.datetime) -> DateTimeOffset:
    """DateTimeOffset of an aware datetime."""
    off = value.utcoffset()
    minutes = int(off.total_seconds() // 60) if off is not None else 0
    local = ticks_from_datetime(value)
    return DateTimeOffset(local - minutes * 60 * TICKS_PER_SECOND, minutes)


def datetime_from_dto(value: DateTimeOffset) -> dt.datetime:
    """Aware datetime of a DateTimeOffset."""
    tz = dt.timezone(dt.timedelta(minutes=value.offset))
    return datetime_from_ticks(value.local_ticks).replace(tzinfo=tz)


def round_datetime_ticks(ticks: int) -> int:
    """Round to datetime's 1/300 s grid (.000, .003, .007)."""
    days, rest = divmod(ticks, TICKS_PER_DAY)
    n300 = (rest * 3 + 50_000) // 100_000
    return days * TICKS_PER_DAY + (n300 * 100_000 + 1) // 3


def round_smalldatetime_ticks(ticks: int) -> int:
    minute = 60 * TICKS_PER_SECOND
    return (ticks + minute // 2 - (1 if (ticks % minute) == minute // 2 and False else 0)) // minute * minute


def round_scale(ticks: int, scale: int) -> int:
    """Round ticks to *scale* fractional digits (half up, as SQL Server does)."""
    if scale >= 7:
        return ticks
    unit = 10 ** (7 - scale)
    return (ticks + unit // 2) // unit * unit


def quantize(value: decimal.Decimal, scale: int) -> decimal.Decimal:
    return value.quantize(_QUANTA[scale], context=DECIMAL_CONTEXT)


def python_value(value: Any, t: SqlType) -> Any:
    """Convert a simulator value to the Python value a driver returns (for the internal API)."""
    if value is None:
        return None
    n = t.name
    if n == "date":
        return dt.date.fromordinal(value + 1)
    if n in T.DATETIME_TYPES:
        return datetime_from_ticks(value)
    if n == "time":
        return (dt.datetime.min + dt.timedelta(microseconds=value // 10)).time()
    if n == "datetimeoffset":
        return datetime_from_dto(value)
    if n == "bit":
        return bool(value)
    return value


def from_python(value: Any, t: SqlType) -> Any:
    """Convert a Python value (int, str, Decimal, datetime, ...) to the simulator value of type *t*."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return convert(dto_from_datetime(value), T.DATETIMEOFFSET, t)
        return convert(ticks_from_datetime(value), T.DATETIME2, t)
    if isinstance(value, dt.date):
        return convert(value.toordinal() - 1, T.DATE, t)
    if isinstance(value, dt.time):
        ticks = (
            value.hour * 3600 + value.minute * 60 + value.second
        ) * TICKS_PER_SECOND + value.microsecond * 10
        return convert(ticks, T.TIME, t)
    if isinstance(value, bool):
        return convert(int(value), T.BIT, t)
    if isinstance(value, int):
        return convert(value, T.BIGINT if abs(value) >= 2**31 else T.INT, t)
    if isinstance(value, float):
        return convert(value, T.FLOAT, t)
    if isinstance(value, decimal.Decimal):
        return convert(value, T.decimal_type(38, max(0, -value.as_tuple().exponent)), t)
    if isinstance(value, str):
        return convert(value, T.NVARCHAR_MAX, t)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return convert(bytes(value), T.VARBINARY_MAX, t)
    if isinstance(value, uuid.UUID):
        return convert(value, T.UNIQUEIDENTIFIER, t)
    if isinstance(value, DateTimeOffset):
        return convert(value, T.DATETIMEOFFSET, t)
    raise TypeError(f"cannot store a {type(value).__name__} in a {t} column")


def python_type_of(value: Any) -> SqlType:
    """The SqlType a Python value naturally has."""
    if isinstance(value, bool):
        return T.BIT
    if isinstance(value, int):
        return T.BIGINT if abs(value) >= 2**31 else T.INT
    if isinstance(value, float):
        return T.FLOAT
    if isinstance(value, decimal.Decimal):
        return T.decimal_type(38, max(0, -value.as_tuple().exponent))
    if isinstance(value, str):
        return T.NVARCHAR_MAX
    if isinstance(value, (bytes, bytearray)):
        return T.VARBINARY_MAX
    if isinstance(value, uuid.UUID):
        return T.UNIQUEIDENTIFIER
    if isinstance(value, dt.datetime):
        return T.DATETIMEOFFSET if value.tzinfo else T.DATETIME2
    if isinstance(value, dt.date):
        return T.DATE
    return T.NVARCHAR_MAX


# ---------------------------------------------------------------- text forms

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_MONTH_NAMES = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

_DT_RE = re.compile(
    r"""^\s*
    (?:(?P<y>\d{4})-?(?P<m>\d{1,2})-?(?P<d>\d{1,2}))?
    (?:\s*[T ]?\s*
      (?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:[.:](?P<F>\d{1,9}))?)?\s*(?P<ampm>[AaPp][Mm])?
    )?
    \s*(?P<tz>Z|[+-]\d{1,2}:\d{2})?\s*$""",
    re.X,
)
_MDY_RE = re.compile(
    r"^\s*(?P<mon>[A-Za-z]{3})[a-z]*\s+(?P<d>\d{1,2}),?\s+(?P<y>\d{4})"
    r"(?:\s+(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:[.:](?P<F>\d{1,9}))?)?\s*(?P<ampm>[AaPp][Mm])?)?\s*$"
)


def parse_temporal(text: str, target: str) -> tuple[int | None, int | None, int | None]:
    """Parse a date/time literal: (days or None, ticks in day or None, offset minutes or None)."""
    m = _DT_RE.match(text) or _MDY_RE.match(text)
    if not m or (m.group("y") is None and m.group("H") is None):
        raise conversion_failed(text, "varchar", target)
    g = m.groupdict()
    days = None
    if g.get("y"):
        month = (_MONTHS.index(g["mon"].lower()) + 1) if g.get("mon") else int(g["m"])
        try:
            days = dt.date(int(g["y"]), month, int(g["d"])).toordinal() - 1
        except ValueError:
            raise conversion_failed(text, "varchar", target) from None
    ticks = None
    if g.get("H") is not None:
        h, mi = int(g["H"]), int(g["M"])
        s = int(g["S"] or 0)
        if g.get("ampm"):
            ap = g["ampm"].lower()
            if h == 12:
                h = 0
            if ap == "pm":
                h += 12
        if h > 23 or mi > 59 or s > 59:
            raise conversion_failed(text, "varchar", target)
        frac = g.get("F") or ""
        sub = (int(frac) * 10 ** (7 - len(frac)) if len(frac) <= 7 else int(frac[:7])) if frac else 0
        ticks = (h * 3600 + mi * 60 + s) * TICKS_PER_SECOND + sub
    offset = None
    tz = g.get("tz")
    if tz:
        if tz == "Z":
            offset = 0
        else:
            sign = -1 if tz[0] == "-" else 1
            hh, mm = tz[1:].split(":")
            offset = sign * (int(hh) * 60 + int(mm))
    return days, ticks, offset


@functools.lru_cache(maxsize=4096)
def format_date(days: int) -> str:
    """``yyyy-mm-dd`` of a day number (cached: a result set usually has few distinct days)."""
    d = dt.date.fromordinal(days + 1)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def format_time(ticks: int, scale: int) -> str:
    """``hh:mm:ss[.fffffff]`` with *scale* fractional digits (truncated, as stored)."""
    secs, sub = divmod(ticks, TICKS_PER_SECOND)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    if scale > 0:
        return f"{h:02d}:{m:02d}:{s:02d}.{sub:07d}"[: 9 + scale]
    return f"{h:02d}:{m:02d}:{s:02d}"


def format_datetime2(ticks: int, scale: int) -> str:
    """``yyyy-mm-dd hh:mm:ss[.fffffff]`` (the default text form of datetime2)."""
    days, rest = divmod(ticks, TICKS_PER_DAY)
    return f"{format_date(days)} {format_time(rest, scale)}"


def format_offset(minutes: int) -> str:
    sign = "-" if minutes < 0 else "+"
    h, m = divmod(abs(minutes), 60)
    return f"{sign}{h:02d}:{m:02d}"


def format_dto(value: DateTimeOffset, scale: int) -> str:
    return format_datetime2(value.local_ticks, scale) + " " + format_offset(value.offset)


def format_datetime_default(ticks: int, with_seconds: bool = False) -> str:
    """Style 0 / 100: ``Jan  2 2024  3:04AM``."""
    d = datetime_from_ticks(ticks)
    h12 = d.hour % 12 or 12
    ampm = "AM" if d.hour < 12 else "PM"
    return f"{_MONTH_NAMES[d.month - 1]} {d.day:>2d} {d.year:04d} {h12:>2d}:{d.minute:02d}{ampm}"


def format_legacy_datetime(ticks: int) -> str:
    """datetime as ``yyyy-mm-dd hh:mi:ss.mmm`` (style 121)."""
    days, rest = divmod(ticks, TICKS_PER_DAY)
    n300 = (rest * 3 + 50_000) // 100_000
    ms = (n300 * 10 + 1) // 3
    secs, msec = divmod(ms, 1000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{format_date(days)} {h:02d}:{m:02d}:{s:02d}.{msec:03d}"


def format_float(value: float, real: bool = False) -> str:
    """float -> varchar the way SQL Server's default style prints it (up to 6 significant digits)."""
    if value == 0:
        return "0"
    text = f"{value:.6g}"
    if "e" in text:
        mant, exp_ = text.split("e")
        return f"{mant}e{int(exp_):+04d}"
    return text


def format_guid(value: uuid.UUID) -> str:
    return str(value).upper()


def to_text(value: Any, t: SqlType, style: int | None = None) -> str:
    """Text form of a value, as CAST(value AS nvarchar) / CONVERT(nvarchar, value, style) gives it."""
    n = t.name
    if n in T.STRING_TYPES:
        return value
    if n in T.INTEGER_TYPES:
        return str(value)
    if n in ("decimal", "numeric"):
        return f"{value:f}"
    if n in ("money", "smallmoney"):
        if style == 2:
            return f"{value:.4f}"
        if style == 1:
            return f"{value:,.2f}"
        return f"{value:.2f}"
    if n in T.FLOAT_TYPES:
        if style in (1, 2, 3):
            return f"{value:.16e}" if style != 1 else f"{value:.8e}"
        return format_float(value, n == "real")
    if n in T.BINARY_TYPES:
        if style in (1, 2):
            h = value.hex().upper()
            return ("0x" + h) if style == 1 else h
        return value.decode("cp1252", errors="replace")
    if n == "uniqueidentifier":
        return format_guid(value)
    if n == "date":
        return format_date(value) if style not in (112, 101, 103) else _styled_date(value, style)
    if n == "time":
        return format_time(value, t.scale)
    if n == "datetime2":
        if style == 126 or style == 127:
            return format_datetime2(value, t.scale).replace(" ", "T")
        if style in (112, 101, 103, 23):
            return _styled_date(value // TICKS_PER_DAY, style)
        return format_datetime2(value, t.scale)
    if n in ("datetime", "smalldatetime"):
        if style in (120, 20):
            return format_legacy_datetime(value)[:19]
        if style in (121, 21, 25):
            return format_legacy_datetime(value)
        if style in (126, 127):
            text = format_legacy_datetime(value).replace(" ", "T")
            return text[:-4] if text.endswith(".000") else text
        if style in (112, 101, 103, 23):
            return _styled_date(value // TICKS_PER_DAY, style)
        if n == "smalldatetime" and style is None:
            return format_legacy_datetime(value)[:19]
        return format_datetime_default(value)
    if n == "datetimeoffset":
        if style in (126, 127):
            return format_datetime2(value.local_ticks, t.scale).replace(" ", "T") + format_offset(
                value.offset
            )
        return format_dto(value, t.scale)
    return str(value)


def default_temporal_text(t: SqlType) -> tuple[Any, int] | None:
    """
    For date, time, datetime2 and datetimeoffset: a function giving a value's default text form
    (what ``to_text`` returns without a style; None for NULL) and the longest such text; None
    for other types.

    The text is ASCII, so it is the same as varchar and nvarchar.
    """
    n, scale = t.name, t.scale
    fraction = scale + 1 if scale > 0 else 0
    if n == "date":

        def date_text(v: int | None) -> str | None:
            return None if v is None else format_date(v)

        return date_text, 10
    if n == "time":

        def time_text(v: int | None) -> str | None:
            return None if v is None else format_time(v, scale)

        return time_text, 8 + fraction
    if n == "datetime2":

        def datetime2_text(v: int | None) -> str | None:
            return None if v is None else format_datetime2(v, scale)

        return datetime2_text, 19 + fraction
    if n == "datetimeoffset":

        def dto_text(v: DateTimeOffset | None) -> str | None:
            return None if v is None else format_dto(v, scale)

        return dto_text, 26 + fraction
    return None


def _styled_date(days: int, style: int) -> str:
    d = dt.date.fromordinal(days + 1)
    if style == 112:
        return f"{d.year:04d}{d.month:02d}{d.day:02d}"
    if style == 101:
        return f"{d.month:02d}/{d.day:02d}/{d.year:04d}"
    if style == 103:
        return f"{d.day:02d}/{d.month:02d}/{d.year:04d}"
    return format_date(days)


# ---------------------------------------------------------------- conversion

_INT_RANGES = {
    "bit": (0, 1),
    "tinyint": (0, 255),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
_MONEY_RANGE = {
    "money": (decimal.Decimal("-922337203685477.5808"), decimal.Decimal("922337203685477.5807")),
    "smallmoney": (decimal.Decimal("-214748.3648"), decimal.Decimal("214748.3647")),
}


def _check_int(v: int, name: str) -> int:
    lo, hi = _INT_RANGES[name]
    if (v < lo or v > hi) and name in ("int", "bigint"):
        raise arithmetic_overflow(name)
    if v < lo or v > hi:
        raise SqlError(220, 16, 2, f"Arithmetic overflow error for data type {name}, value = {v}.")
    return v


def _to_decimal(value: decimal.Decimal, t: SqlType) -> decimal.Decimal:
    n = t.name
    if n in ("money", "smallmoney"):
        q = quantize(value, 4)
        lo, hi = _MONEY_RANGE[n]
        if q < lo or q > hi:
            raise arithmetic_overflow(n)
        return q
    q = quantize(value, t.scale)
    digits = len(q.as_tuple().digits)
    if q != 0 and digits > t.precision:
        raise SqlError(
            8115, 16, 8, f"Arithmetic overflow error converting {_num_name(value)} to data type numeric."
        )
    return q


def _num_name(value: Any) -> str:
    return "numeric" if isinstance(value, decimal.Decimal) else "expression"


def convert(value: Any, src: SqlType, dst: SqlType, style: int | None = None) -> Any:
    """Convert *value* of type *src* to type *dst* (CAST / CONVERT / implicit conversion)."""
    if value is None:
        return None
    s, d = src.name, dst.name
    if (
        s == d
        and s not in ("decimal", "numeric", "datetime2", "time", "datetimeoffset")
        and not (s in T.STRING_TYPES or s in T.BINARY_TYPES)
    ):
        return value
    # ---- to strings
    if d in T.STRING_TYPES:
        text = value if s in T.STRING_TYPES else to_text(value, src, style)
        if d in T.CHAR_TYPES:
            text = text.encode("cp1252", errors="replace").decode("cp1252")
        if dst.length > 0:
            if d in T.CHAR_TYPES:
                encoded = text.encode("cp1252", errors="replace")
                if len(encoded) > dst.length:
                    text = encoded[: dst.length].decode("cp1252")
            elif text_units(text) > dst.length:
                text = text.encode("utf-16-le", "surrogatepass")[: dst.length * 2].decode(
                    "utf-16-le", "ignore"
                )
            if d in ("char", "nchar") and text_units(text) < dst.length:
                text = text + " " * (dst.length - text_units(text))
        return text
    # ---- to binary
    if d in T.BINARY_TYPES:
        if s in T.BINARY_TYPES:
            b = value
        elif s in T.STRING_TYPES:
            if style in (1, 2):
                h = value[2:] if style == 1 and value[:2].lower() == "0x" else value
                try:
                    b = bytes.fromhex(h)
                except ValueError:
                    raise conversion_failed(value, s, d) from None
            else:
                b = (
                    value.encode("utf-16-le")
                    if s in T.NCHAR_TYPES
                    else value.encode("cp1252", errors="replace")
                )
        elif s in T.INTEGER_TYPES:
            size = {"bit": 1, "tinyint": 1, "smallint": 2, "int": 4, "bigint": 8}[s]
            b = value.to_bytes(size, "big", signed=s != "tinyint" and s != "bit")
        elif s == "uniqueidentifier":
            b = value.bytes_le
        else:
            raise _explicit_not_allowed(src, dst)
        if d == "timestamp":
            return b[-8:].rjust(8, b"\0")
        if dst.length > 0:
            if len(b) > dst.length:
                b = b[: dst.length]
            if d == "binary" and len(b) < dst.length:
                b = b.ljust(dst.length, b"\0")
        return b
    # ---- to integers
    if d in T.INTEGER_TYPES:
        if s in T.INTEGER_TYPES:
            v = value
        elif s in T.EXACT_TYPES:
            v = int(value)  # truncates toward zero
        elif s in T.FLOAT_TYPES:
            v = int(value)
        elif s in T.STRING_TYPES:
            txt = value.strip()
            if d == "bit" and txt.lower() in ("true", "false"):
                return 1 if txt.lower() == "true" else 0
            try:
                v = int(txt)
            except ValueError:
                raise conversion_failed(value, "varchar" if s in T.CHAR_TYPES else "nvarchar", d) from None
        elif s in T.BINARY_TYPES:
            size = {"bit": 1, "tinyint": 1, "smallint": 2, "int": 4, "bigint": 8}[d]
            v = int.from_bytes(value[-size:].rjust(size, b"\0"), "big", signed=d not in ("tinyint", "bit"))
        elif s in ("datetime", "smalldatetime"):
            v = round(value / TICKS_PER_DAY) - DAYS_TO_1900
        else:
            raise _explicit_not_allowed(src, dst)
        if d == "bit":
            return 1 if v != 0 else 0
        return _check_int(v, d)
    # ---- to exact numerics
    if d in T.EXACT_TYPES:
        if s in T.INTEGER_TYPES:
            v = decimal.Decimal(value)
        elif s in T.EXACT_TYPES:
            v = value
        elif s in T.FLOAT_TYPES:
            v = decimal.Decimal(repr(value))
        elif s in T.STRING_TYPES:
            try:
                v = decimal.Decimal(
                    value.strip().replace("$", "").replace(",", "")
                    if d in ("money", "smallmoney")
                    else value.strip()
                )
            except decimal.InvalidOperation:
                raise conversion_failed(value, "varchar", d) from None
            if not v.is_finite():
                raise conversion_failed(value, "varchar", d)
        elif s in ("datetime", "smalldatetime"):
            v = decimal.Decimal(value - DAYS_TO_1900 * TICKS_PER_DAY) / TICKS_PER_DAY
        else:
            raise _explicit_not_allowed(src, dst)
        return _to_decimal(v, dst)
    # ---- to approximate numerics
    if d in T.FLOAT_TYPES:
        if s in T.INTEGER_TYPES or s in T.EXACT_TYPES:
            v = float(value)
        elif s in T.FLOAT_TYPES:
            v = value
        elif s in T.STRING_TYPES:
            try:
                v = float(value.strip())
            except ValueError:
                raise conversion_failed(value, "varchar", d) from None
        elif s in ("datetime", "smalldatetime"):
            v = (value - DAYS_TO_1900 * TICKS_PER_DAY) / TICKS_PER_DAY
        else:
            raise _explicit_not_allowed(src, dst)
        if v != v or v in (float("inf"), float("-inf")):
            raise arithmetic_overflow(d)
        if d == "real":
            try:
                return struct.unpack("<f", struct.pack("<f", v))[0]
            except OverflowError:
                raise arithmetic_overflow("real") from None
        return v
    # ---- to uniqueidentifier
    if d == "uniqueidentifier":
        if s in T.STRING_TYPES:
            txt = value.strip()
            if txt.startswith("{") and txt.endswith("}"):
                txt = txt[1:-1]
            if len(txt) != 36:
                raise conversion_failed(value, "varchar", d)
            try:
                return uuid.UUID(txt)
            except ValueError:
                raise conversion_failed(value, "varchar", d) from None
        if s in T.BINARY_TYPES:
            return uuid.UUID(bytes_le=value[:16].ljust(16, b"\0"))
        if s == "uniqueidentifier":
            return value
        raise _explicit_not_allowed(src, dst)
    # ---- to temporal types
    if d in T.TEMPORAL_TYPES:
        return _to_temporal(value, src, dst)
    raise _explicit_not_allowed(src, dst)


def _explicit_not_allowed(src: SqlType, dst: SqlType) -> SqlError:
    return SqlError(
        529, 16, 2, f"Explicit conversion from data type {src.name} to {dst.name} is not allowed."
    )


def _to_temporal(value: Any, src: SqlType, dst: SqlType) -> Any:
    s, d = src.name, dst.name
    offset = None
    if s in T.STRING_TYPES:
        days, tick, offset = parse_temporal(value, d)
        if d == "time":
            if tick is None:
                tick = 0
            return round_scale(tick, dst.scale) % TICKS_PER_DAY
        if days is None:
            days = DAYS_TO_1900
        local = days * TICKS_PER_DAY + (tick or 0)
    elif s == "date":
        local = value * TICKS_PER_DAY
    elif s in T.DATETIME_TYPES:
        local = value
    elif s == "time":
        if d == "date":
            raise _explicit_not_allowed(src, dst)
        local = DAYS_TO_1900 * TICKS_PER_DAY + value
    elif s == "datetimeoffset":
        local = value.local_ticks
        offset = value.offset
    elif s in T.INTEGER_TYPES or s in T.EXACT_TYPES or s in T.FLOAT_TYPES:
        if d not in ("datetime", "smalldatetime"):
            raise SqlError(206, 16, 2, f"Operand type clash: {s} is incompatible with {d}")
        local = DAYS_TO_1900 * TICKS_PER_DAY + round(float(value) * TICKS_PER_DAY)
    else:
        raise _explicit_not_allowed(src, dst)
    result = _temporal_result(local, offset, s, dst)
    if not in_temporal_range(result, d):
        raise _temporal_out_of_range(src, d)
    return result


_SMALLDATETIME_END = (DAYS_TO_1900 + 65536) * TICKS_PER_DAY  # after 2079-06-06 23:59
_DATETIME_START = (DAYS_TO_1900 - 53690) * TICKS_PER_DAY  # 1753-01-01
_END_TICKS = (MAX_DAYS + 1) * TICKS_PER_DAY  # after 9999-12-31 23:59:59.9999999


def _temporal_result(local: int, offset: int | None, s: str, dst: SqlType) -> Any:
    d = dst.name
    if d == "date":
        return local // TICKS_PER_DAY
    if d == "time":
        return round_scale(local % TICKS_PER_DAY, dst.scale) % TICKS_PER_DAY
    if d == "datetime2":
        return round_scale(local, dst.scale)
    if d == "datetime":
        return round_datetime_ticks(local)
    if d == "smalldatetime":
        minute = 60 * TICKS_PER_SECOND
        return (local + minute // 2) // minute * minute
    if d == "datetimeoffset":
        off = offset if offset is not None else 0
        return DateTimeOffset(round_scale(local, dst.scale) - off * 60 * TICKS_PER_SECOND, off)
    raise _explicit_not_allowed(T.SqlType(s), dst)


def in_temporal_range(value: Any, d: str) -> bool:
    """True if a temporal value lies inside its type's documented range (0001-01-01..9999-12-31, ...).

    :param value: the simulator's value (days, ticks or DateTimeOffset)
    :param d: the type name
    """
    if d == "date":
        return 0 <= value <= MAX_DAYS
    if d == "datetime":
        return _DATETIME_START <= value < _END_TICKS
    if d == "smalldatetime":
        return DAYS_TO_1900 * TICKS_PER_DAY <= value < _SMALLDATETIME_END
    if d == "datetime2":
        return 0 <= value < _END_TICKS
    if d == "datetimeoffset":
        return 0 <= value.utc_ticks < _END_TICKS and 0 <= value.local_ticks < _END_TICKS
    return True


def _temporal_out_of_range(src: SqlType, d: str) -> SqlError:
    """Error 242 (8115 from numbers): a value outside the target type's range, as SQL Server words it."""
    s = src.name
    if s in T.INTEGER_TYPES or s in T.EXACT_TYPES or s in T.FLOAT_TYPES:
        return arithmetic_overflow(d)
    name = "varchar" if s in T.CHAR_TYPES else "nvarchar" if s in T.NCHAR_TYPES else s
    return SqlError(
        242,
        16,
        3,
        f"The conversion of a {name} data type to a {d} data type resulted in an out-of-range value.",
    )


def text_units(value: str) -> int:
    """Length of a string in UTF-16 code units (what nchar/nvarchar lengths count)."""
    return len(value) if value.isascii() else len(value.encode("utf-16-le", "surrogatepass")) // 2


def check_fits(value: Any, t: SqlType) -> bool:
    """True if a string/binary value fits the declared length of *t* (for truncation errors)."""
    if value is None or t.length <= 0:
        return True
    n = t.name
    if n in T.CHAR_TYPES:
        return (
            len(value.encode("cp1252", errors="replace")) <= t.length
            if not value.isascii()
            else len(value) <= t.length
        )
    if n in T.NCHAR_TYPES:
        return len(value) <= t.length if value.isascii() else len(value.encode("utf-16-le")) // 2 <= t.length
    if n in ("binary", "varbinary"):
        return len(value) <= t.length
    return True
