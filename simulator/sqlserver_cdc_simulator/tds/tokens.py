"""TDS response tokens, and per-result-set row encoders compiled once per column list.

:func:`compile_row_encoder` generates (with ``exec``) a function specialised to the column
types of a result set: one expression per column, chosen once, so encoding a row does no type
dispatch; rows are joined into large buffers by the caller.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.types import SqlType
from sqlserver_cdc_simulator.values import (
    DAYS_TO_1900,
    DECIMAL_CONTEXT,
    TICKS_PER_DAY,
    TICKS_PER_SECOND,
)

COLLATION = b"\x09\x04\xd0\x00\x34"  # SQL_Latin1_General_CP1_CI_AS, LCID 1033

# token types
COLMETADATA = 0x81
ROW = 0xD1
DONE = 0xFD
DONEPROC = 0xFE
DONEINPROC = 0xFF
ERROR = 0xAA
INFO = 0xAB
LOGINACK = 0xAD
ENVCHANGE = 0xE3
RETURNSTATUS = 0x79
RETURNVALUE = 0xAC
FEATUREEXTACK = 0xAE
ORDER = 0xA9

# DONE status bits
DONE_FINAL = 0x00
DONE_MORE = 0x01
DONE_ERROR = 0x02
DONE_INXACT = 0x04
DONE_COUNT = 0x10
DONE_ATTN = 0x20

# ENVCHANGE types
ENV_DATABASE = 1
ENV_LANGUAGE = 2
ENV_PACKETSIZE = 4
ENV_COLLATION = 7
ENV_BEGIN_TRAN = 8
ENV_COMMIT_TRAN = 9
ENV_ROLLBACK_TRAN = 10

_u16 = struct.Struct("<H").pack
_u32 = struct.Struct("<I").pack


def b_varchar(s: str) -> bytes:
    data = s.encode("utf-16-le")
    return bytes([len(data) // 2]) + data


def us_varchar(s: str) -> bytes:
    data = s.encode("utf-16-le")
    return _u16(len(data) // 2) + data


def done(status: int, rowcount: int = 0, token: int = DONE, curcmd: int = 0xC1) -> bytes:
    return struct.pack("<BHHQ", token, status, curcmd, rowcount)


def message(
    token: int, number: int, state: int, severity: int, text: str, server: str, proc: str = "", line: int = 1
) -> bytes:
    body = (
        struct.pack("<iBB", number, state, severity)
        + us_varchar(text)
        + b_varchar(server)
        + b_varchar(proc)
        + struct.pack("<i", line)
    )
    return bytes([token]) + _u16(len(body)) + body


def envchange_str(kind: int, new: str, old: str) -> bytes:
    body = bytes([kind]) + b_varchar(new) + b_varchar(old)
    return bytes([ENVCHANGE]) + _u16(len(body)) + body


def envchange_bytes(kind: int, new: bytes, old: bytes) -> bytes:
    body = bytes([kind, len(new)]) + new + bytes([len(old)]) + old
    return bytes([ENVCHANGE]) + _u16(len(body)) + body


def loginack(tds_version: bytes, version: bytes, program: str = "Microsoft SQL Server") -> bytes:
    body = b"\x01" + tds_version + b_varchar(program) + version
    return bytes([LOGINACK]) + _u16(len(body)) + body


def returnstatus(value: int) -> bytes:
    return struct.pack("<Bi", RETURNSTATUS, value)


# ---------------------------------------------------------------- type info


# TYPE_INFO of the fixed-length types (type byte, then the length of the nullable form)
_FIXED_TYPE_INFO = {
    "bit": b"\x68\x01",
    "tinyint": b"\x26\x01",
    "smallint": b"\x26\x02",
    "int": b"\x26\x04",
    "bigint": b"\x26\x08",
    "real": b"\x6d\x04",
    "float": b"\x6d\x08",
    "money": b"\x6e\x08",
    "smallmoney": b"\x6e\x04",
    "uniqueidentifier": b"\x24\x10",
    "date": b"\x28",
    "datetime": b"\x6f\x08",
    "smalldatetime": b"\x6f\x04",
    "timestamp": b"\xad\x08\x00",
}
# the type byte of the types with a fractional-seconds scale
_SCALED_TYPE_CODES = {"time": 0x29, "datetime2": 0x2A, "datetimeoffset": 0x2B}
# variable-length types: type byte, bytes per unit of length, whether a collation follows
_VARIABLE_TYPE_INFO = {
    "varchar": (0xA7, 1, True),
    "char": (0xAF, 1, True),
    "text": (0xA7, 1, True),
    "nvarchar": (0xE7, 2, True),
    "nchar": (0xEF, 2, True),
    "ntext": (0xE7, 2, True),
    "varbinary": (0xA5, 1, False),
    "binary": (0xAD, 1, False),
    "image": (0xA5, 1, False),
}
_LOB_TYPES = ("text", "ntext", "image")


def type_info(t: SqlType) -> bytes:
    """TYPE_INFO of a column or parameter of type *t*."""
    n = t.name
    if n == "sql_variant":
        return b"\x62" + _u32(8016)
    fixed = _FIXED_TYPE_INFO.get(n)
    if fixed is not None:
        return fixed
    if n in ("decimal", "numeric"):
        return bytes([0x6A if n == "decimal" else 0x6C, T.decimal_storage(t.precision), t.precision, t.scale])
    if n in _SCALED_TYPE_CODES:
        return bytes([_SCALED_TYPE_CODES[n], t.scale])
    if n in _VARIABLE_TYPE_INFO:
        code, unit, collated = _VARIABLE_TYPE_INFO[n]
        size = 0xFFFF if t.length == T.MAX or n in _LOB_TYPES else t.length * unit
        return bytes([code]) + _u16(size) + (COLLATION if collated else b"")
    raise ValueError(f"no TDS type for {t}")


def _wire_type(t: SqlType) -> SqlType:
    # text/ntext/image are sent as their (max) equivalents
    if t.name == "text":
        return T.SqlType("varchar", length=T.MAX)
    if t.name == "ntext":
        return T.NVARCHAR_MAX
    if t.name == "image":
        return T.VARBINARY_MAX
    return t


def colmetadata(columns: Sequence[tuple[str, SqlType, bool]]) -> bytes:
    """COLMETADATA for (name, type, nullable) columns."""
    out = bytearray([COLMETADATA]) + _u16(len(columns))
    for name, t, nullable in columns:
        t = _wire_type(t)
        user_type = 80 if t.name == "timestamp" else 0
        flags = (0x01 if nullable else 0) | 0x08
        out += _u32(user_type) + _u16(flags) + type_info(t) + b_varchar(name)
    return bytes(out)


# ---------------------------------------------------------------- values

_PLP_NULL = b"\xff" * 8
_PLP_TERM = b"\x00\x00\x00\x00"


def _plp(data: bytes) -> bytes:
    n = len(data)
    if n == 0:
        return b"\x00" * 8 + _PLP_TERM
    return struct.pack("<QI", n, n) + data + _PLP_TERM


def _decimal_bytes(size: int, scale: int) -> Callable[[Any], bytes]:
    mag_len = size - 1
    if size in (5, 9):
        pack = struct.Struct("<BBI" if size == 5 else "<BBQ").pack

        def enc_small(v: Any) -> bytes:
            n = int(v.scaleb(scale))  # at most 19 digits: the default 28-digit context is exact
            return pack(size, 0, -n) if n < 0 else pack(size, 1, n)

        return enc_small

    def enc(v: Any) -> bytes:
        n = int(v.scaleb(scale, DECIMAL_CONTEXT))
        if n < 0:
            return bytes([size, 0]) + (-n).to_bytes(mag_len, "little")
        return bytes([size, 1]) + n.to_bytes(mag_len, "little")

    return enc


def _money8(v: Any) -> bytes:
    n = int(v.scaleb(4, DECIMAL_CONTEXT))
    return struct.pack("<BiI", 8, n >> 32, n & 0xFFFFFFFF)


def _money4(v: Any) -> bytes:
    return struct.pack("<Bi", 4, int(v.scaleb(4)))


def _time_bytes(scale: int) -> tuple[int, int]:
    return (3, 3, 3, 4, 4, 5, 5, 5)[scale], 10 ** (7 - scale)


_PACK_BQ = struct.Struct("<BQ").pack


def _datetime2_7(v: int) -> bytes:
    days, rest = divmod(v, TICKS_PER_DAY)
    return _PACK_BQ(8, rest | days << 40)


_PACK_BII = struct.Struct("<Bii").pack


def _datetime8(v: int) -> bytes:
    days, rest = divmod(v, TICKS_PER_DAY)
    return _PACK_BII(8, days - DAYS_TO_1900, (rest * 3 + 50_000) // 100_000)


def _datetime4(v: int) -> bytes:
    days, rest = divmod(v, TICKS_PER_DAY)
    return struct.pack("<BHH", 4, days - DAYS_TO_1900, rest // (60 * TICKS_PER_SECOND))


def _variant(v: Any) -> bytes:
    """A sql_variant value (MS-TDS 2.2.5.5.4): length, base type, its properties, the value."""
    t = v.type
    n = t.name
    if n in _VARIABLE_TYPE_INFO and t.length != T.MAX:
        code, unit, collated = _VARIABLE_TYPE_INFO[n]
        data = v.value.encode("utf-16-le" if unit == 2 else "cp1252") if collated else bytes(v.value)
        props = (COLLATION if collated else b"") + _u16(t.length * unit)
    elif n in ("tinyint", "smallint", "int", "bigint", "bit", "float", "real"):
        code = {
            "tinyint": 0x30,
            "smallint": 0x34,
            "int": 0x38,
            "bigint": 0x7F,
            "bit": 0x32,
            "float": 0x3E,
        }.get(n, 0x3B)
        fmt = {"tinyint": "<B", "smallint": "<h", "int": "<i", "bigint": "<q", "bit": "<B", "float": "<d"}
        data = struct.pack(fmt.get(n, "<f"), v.value)
        props = b""
    else:
        raise ValueError(f"sql_variant with base type {n} is not encoded by the simulator")
    body = bytes([code, len(props)]) + props + data
    return _u32(len(body)) + body


def value_encoder(t: SqlType) -> tuple[bytes, str, dict[str, Any]]:
    """(NULL bytes, expression template with ``{v}``, helper globals) for values of type *t*."""
    t = _wire_type(t)
    n = t.name
    key = f"_h_{n}_{t.length}_{t.precision}_{t.scale}".replace("-", "m")
    if n == "sql_variant":
        return b"\x00\x00\x00\x00", "_variant({v})", {"_variant": _variant}
    if n == "bit":
        return b"\x00", "(b'\\x01\\x01' if {v} else b'\\x01\\x00')", {}
    if n in ("tinyint", "smallint", "int", "bigint", "real", "float"):
        fmt = {
            "tinyint": "<BB",
            "smallint": "<Bh",
            "int": "<Bi",
            "bigint": "<Bq",
            "real": "<Bf",
            "float": "<Bd",
        }[n]
        size = struct.calcsize(fmt) - 1
        return b"\x00", f"{key}({size}, {{v}})", {key: struct.Struct(fmt).pack}
    if n in ("decimal", "numeric"):
        size = T.decimal_storage(t.precision)
        return b"\x00", f"{key}({{v}})", {key: _decimal_bytes(size, t.scale)}
    if n == "money":
        return b"\x00", f"{key}({{v}})", {key: _money8}
    if n == "smallmoney":
        return b"\x00", f"{key}({{v}})", {key: _money4}
    if n == "uniqueidentifier":
        return b"\x00", "(b'\\x10' + {v}.bytes_le)", {}
    if n == "date":
        return b"\x00", "(b'\\x03' + {v}.to_bytes(3, 'little'))", {}
    if n == "time":
        size, div = _time_bytes(t.scale)

        def enc_time(v: int, size: int = size, div: int = div) -> bytes:
            return bytes([size]) + (v // div).to_bytes(size, "little")

        return b"\x00", f"{key}({{v}})", {key: enc_time}
    if n == "datetime2" and t.scale == 7:
        # 5 bytes of 100 ns ticks in the day, then 3 bytes of days: one 8-byte little-endian integer
        return b"\x00", f"{key}({{v}})", {key: _datetime2_7}
    if n == "datetime2":
        size, div = _time_bytes(t.scale)

        def enc_dt2(v: int, size: int = size, div: int = div) -> bytes:
            days, rest = divmod(v, TICKS_PER_DAY)
            return bytes([size + 3]) + (rest // div).to_bytes(size, "little") + days.to_bytes(3, "little")

        return b"\x00", f"{key}({{v}})", {key: enc_dt2}
    if n == "datetimeoffset":
        size, div = _time_bytes(t.scale)

        def enc_dto(v: Any, size: int = size, div: int = div) -> bytes:
            days, rest = divmod(v[0], TICKS_PER_DAY)
            return (
                bytes([size + 5])
                + (rest // div).to_bytes(size, "little")
                + days.to_bytes(3, "little")
                + struct.pack("<h", v[1])
            )

        return b"\x00", f"{key}({{v}})", {key: enc_dto}
    if n == "datetime":
        return b"\x00", f"{key}({{v}})", {key: _datetime8}
    if n == "smalldatetime":
        return b"\x00", f"{key}({{v}})", {key: _datetime4}
    if n in ("varchar", "char"):
        return _variable_length(
            t,
            "{v}.encode('cp1252', 'replace')",
            "({v}.encode('ascii') if {v}.isascii() else {v}.encode('cp1252', 'replace'))",
        )
    if n in ("nvarchar", "nchar"):
        utf16 = "{v}.encode('utf-16-le', 'surrogatepass')"
        return _variable_length(t, utf16, utf16)
    if n in ("varbinary", "binary", "timestamp"):
        if t.length == T.MAX:
            return _PLP_NULL, "_plp({v})", {"_plp": _plp}
        return b"\xff\xff", "(_u16(len({v})) + {v})", {"_u16": _u16}
    raise ValueError(f"no TDS encoding for {t}")


def _variable_length(t: SqlType, encode_max: str, encode: str) -> tuple[bytes, str, dict[str, Any]]:
    """The encoding of a string type: PLP chunks for ``(max)``, else a 2-byte length and the bytes.

    :param encode_max: the expression (over ``{v}``) giving the bytes of a ``(max)`` value.
    :param encode: the expression giving the bytes of any other value.
    """
    if t.length == T.MAX:
        return _PLP_NULL, f"_plp({encode_max})", {"_plp": _plp}
    return b"\xff\xff", f"(_u16(len({{b}} := {encode})) + {{b}})", {"_u16": _u16}


def compile_row_encoder(types: Sequence[SqlType]) -> Callable[[Sequence[Any]], bytes]:
    """A function that encodes one row (a tuple of values) as a ROW token."""
    env: dict[str, Any] = {}
    parts = []
    for i, t in enumerate(types):
        null, tmpl, helpers = value_encoder(t)
        env.update(helpers)
        env[f"_null{i}"] = null
        parts.append(f"(_null{i} if v{i} is None else {tmpl.format(v=f'v{i}', b=f'_b{i}')})")
    names = ", ".join(f"v{i}" for i in range(len(types)))
    if len(types) == 1:
        names += ","
    src = f"def encode_row(row):\n    {names} = row\n    return b''.join((b'\\xd1', {', '.join(parts)}))\n"
    exec(compile(src, "<row-encoder>", "exec"), env)
    return env["encode_row"]


def encode_value(t: SqlType, value: Any) -> bytes:
    """Encode one value of type *t* (RETURNVALUE tokens)."""
    null, tmpl, helpers = value_encoder(t)
    if value is None:
        return null
    env = dict(helpers)
    env["v"] = value
    return eval(tmpl.format(v="v", b="_b"), env)


def returnvalue(ordinal: int, name: str, t: SqlType, value: Any) -> bytes:
    """RETURNVALUE token for an output parameter."""
    return (
        bytes([RETURNVALUE])
        + _u16(ordinal)
        + b_varchar(name)
        + b"\x01"
        + _u32(0)
        + _u16(0x09)
        + type_info(_wire_type(t))
        + encode_value(t, value)
    )
