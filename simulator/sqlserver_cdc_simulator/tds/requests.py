"""Decode client requests: PRELOGIN, LOGIN7, SQL_BATCH, RPC and Transaction Manager messages."""

from __future__ import annotations

import datetime as dt
import math
import struct
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.errors import SqlError
from sqlserver_cdc_simulator.types import SqlType
from sqlserver_cdc_simulator.values import (
    DAYS_TO_1900,
    DECIMAL_CONTEXT,
    MAX_DAYS,
    TICKS_PER_DAY,
    TICKS_PER_SECOND,
    DateTimeOffset,
)

# RPC procedure ids
PROC_IDS = {
    1: "sp_cursor",
    2: "sp_cursoropen",
    3: "sp_cursorprepare",
    4: "sp_cursorexecute",
    5: "sp_cursorprepexec",
    6: "sp_cursorunprepare",
    7: "sp_cursorfetch",
    8: "sp_cursoroption",
    9: "sp_cursorclose",
    10: "sp_executesql",
    11: "sp_prepare",
    12: "sp_execute",
    13: "sp_prepexec",
    14: "sp_prepexecrpc",
    15: "sp_unprepare",
}


def parse_prelogin(payload: bytes) -> dict[int, bytes]:
    """PRELOGIN options by token."""
    options: dict[int, bytes] = {}
    pos = 0
    while pos < len(payload) and payload[pos] != 0xFF:
        token, offset, length = struct.unpack_from(">BHH", payload, pos)
        options[token] = payload[offset : offset + length]
        pos += 5
    return options


def prelogin_response(version: bytes, encryption: int = 0x02) -> bytes:
    """PRELOGIN answer: version, the negotiated encryption, no instance, no MARS."""
    opts = [(0, version), (1, bytes([encryption])), (2, b"\x00"), (3, b""), (4, b"\x00")]
    header_len = 5 * len(opts) + 1
    head = bytearray()
    body = bytearray()
    for token, data in opts:
        head += struct.pack(">BHH", token, header_len + len(body), len(data))
        body += data
    return bytes(head) + b"\xff" + bytes(body)


@dataclass
class Login7:
    tds_version: int
    packet_size: int
    user: str
    password: str
    app_name: str
    host_name: str
    database: str
    language: str
    has_feature_ext: bool


def _decode_password(data: bytes) -> str:
    out = bytearray()
    for b in data:
        b ^= 0xA5
        out.append(((b & 0x0F) << 4) | (b >> 4))
    return out.decode("utf-16-le")


def parse_login7(payload: bytes) -> Login7:
    """Decode a LOGIN7 message."""
    (_length, tds_version, packet_size) = struct.unpack_from("<III", payload, 0)
    option_flags3 = payload[27]

    def field_at(offset: int, password: bool = False) -> str:
        off, ln = struct.unpack_from("<HH", payload, offset)
        data = payload[off : off + ln * 2]
        return _decode_password(data) if password else data.decode("utf-16-le")

    return Login7(
        tds_version=tds_version,
        packet_size=packet_size,
        host_name=field_at(36),
        user=field_at(40),
        password=field_at(44, password=True),
        app_name=field_at(48),
        language=field_at(64),
        database=field_at(68),
        has_feature_ext=bool(option_flags3 & 0x10),
    )


@dataclass
class Headers:
    transaction_descriptor: int = 0


def parse_all_headers(payload: bytes) -> tuple[Headers, int]:
    """ALL_HEADERS at the start of SQL_BATCH / RPC / TM messages: (headers, offset after them)."""
    headers = Headers()
    if len(payload) < 4:
        return headers, 0
    total = struct.unpack_from("<I", payload, 0)[0]
    if total < 4 or total > len(payload):
        return headers, 0
    pos = 4
    while pos < total:
        hlen, htype = struct.unpack_from("<IH", payload, pos)
        if htype == 2:
            headers.transaction_descriptor = struct.unpack_from("<Q", payload, pos + 6)[0]
        pos += hlen
    return headers, total


@dataclass
class RpcParam:
    name: str
    type: SqlType
    value: Any
    output: bool


@dataclass
class RpcCall:
    proc: str
    params: list[RpcParam] = field(default_factory=list)


_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        b = self.data[self.pos : self.pos + n]
        if len(b) != n:
            raise SqlError(
                4002,
                16,
                1,
                "The incoming tabular data stream (TDS) protocol stream is incorrect. The stream ended unexpectedly.",
            )
        self.pos += n
        return b

    def u8(self) -> int:
        return self.take(1)[0]

    def _unsigned(self, fmt: struct.Struct) -> int:
        (v,) = fmt.unpack(self.take(fmt.size))
        return v

    def u16(self) -> int:
        return self._unsigned(_U16)

    def u32(self) -> int:
        return self._unsigned(_U32)

    def u64(self) -> int:
        return self._unsigned(_U64)

    def b_varchar(self) -> str:
        n = self.u8()
        return self.take(n * 2).decode("utf-16-le")

    def us_varchar(self) -> str:
        n = self.u16()
        return self.take(n * 2).decode("utf-16-le")


_PROTOCOL = "The incoming tabular data stream (TDS) remote procedure call (RPC) protocol stream is incorrect."


@dataclass
class _Param:
    """Where a parameter sits in its call, for SQL Server's protocol errors (1-based ordinal)."""

    ordinal: int
    name: str

    def error(self, number: int, detail: str) -> SqlError:
        return SqlError(number, 16, 1, f'{_PROTOCOL} Parameter {self.ordinal} ("{self.name}"): {detail}')

    def bad_length(self, code: int) -> SqlError:
        return self.error(8016, f"Data type 0x{code:02X} has an invalid data length or metadata length.")

    def bad_precision(self, code: int) -> SqlError:
        return self.error(8017, f"Data type 0x{code:02X} has an invalid precision or scale.")

    def invalid_value(self, type_name: str) -> SqlError:
        return self.error(
            8023,
            f"The supplied value is not a valid instance of data type {type_name}. Check the source data "
            "for invalid values. An example of an invalid value is data of numeric type with scale "
            "greater than precision.",
        )

    def odd_length(self, type_name: str) -> SqlError:
        return self.error(
            8028,
            f"The supplied length is not valid for data type {type_name}. Check the source data for "
            "invalid lengths. An example of an invalid length is data of nchar type with an odd length in bytes.",
        )


# fixed-length types: code -> (type name, size)
_FIXED = {
    0x30: ("tinyint", 1),
    0x34: ("smallint", 2),
    0x38: ("int", 4),
    0x7F: ("bigint", 8),
    0x32: ("bit", 1),
    0x3B: ("real", 4),
    0x3E: ("float", 8),
    0x3C: ("money", 8),
    0x7A: ("smallmoney", 4),
    0x3D: ("datetime", 8),
    0x3A: ("smalldatetime", 4),
}
# nullable fixed-length types (BYTELEN): code -> {max length: type name}
_NULLABLE_FIXED = {
    0x26: {1: "tinyint", 2: "smallint", 4: "int", 8: "bigint"},
    0x68: {1: "bit"},
    0x6D: {4: "real", 8: "float"},
    0x6E: {4: "smallmoney", 8: "money"},
    0x6F: {4: "smalldatetime", 8: "datetime"},
}
_STRINGS = {0xA7: "varchar", 0xAF: "char", 0xE7: "nvarchar", 0xEF: "nchar", 0xA5: "varbinary", 0xAD: "binary"}
# types of MS-TDS the simulator does not decode as parameters
_NOT_IMPLEMENTED = {
    0x62: "sql_variant",
    0xF1: "xml",
    0xF0: "CLR user-defined type",
    0xF3: "table-valued",
    0x25: "legacy varbinary",
    0x27: "legacy varchar",
    0x2D: "legacy binary",
    0x2F: "legacy char",
}
_TIME_BYTES = (3, 3, 3, 4, 4, 5, 5, 5)  # time part size by scale (MS-TDS 2.2.5.4.2)
_DAYS_PER_SCALE_UNIT = [86_400 * 10**s for s in range(8)]  # time units per day by scale
_DATETIME_MIN_DAY = dt.date(1753, 1, 1).toordinal() - 1 - DAYS_TO_1900  # -53690
_DATETIME_MAX_DAY = MAX_DAYS - DAYS_TO_1900  # 2958463 (9999-12-31)
_DATETIME_MAX_300 = 300 * 86_400 - 1  # 23:59:59.997
_MINUTES_PER_DAY = 24 * 60
_MAX_OFFSET = 14 * 60  # datetimeoffset offsets: -14:00 .. +14:00
_END_TICKS = (MAX_DAYS + 1) * TICKS_PER_DAY  # first tick after 9999-12-31 23:59:59.9999999


def _read_type_and_value(r: _Reader, p: _Param) -> tuple[SqlType, Any]:
    """One parameter's TYPE_INFO and value; protocol errors (8009/8016/8017/8023/8028) for what SQL Server rejects."""
    code = r.u8()
    if code in _FIXED:
        name, size = _FIXED[code]
        return _decode_fixed(name, r.take(size), p)
    if code == 0x1F:  # NULLTYPE
        return T.SqlType("int"), None
    if code in _NULLABLE_FIXED:
        maxlen = r.u8()
        name = _NULLABLE_FIXED[code].get(maxlen)
        ln = r.u8()
        if name is None or ln not in (0, maxlen):
            raise p.bad_length(code)
        if ln == 0:
            return T.make_type(name), None
        return _decode_fixed(name, r.take(ln), p)
    if code in (0x6A, 0x6C, 0x37, 0x3F):
        return _read_decimal(r, p, code)
    if code == 0x24:
        maxlen = r.u8()
        ln = r.u8()
        if maxlen != 16 or ln not in (0, 16):
            raise p.bad_length(code)
        return T.UNIQUEIDENTIFIER, (uuid.UUID(bytes_le=r.take(16)) if ln else None)
    if code in (0x28, 0x29, 0x2A, 0x2B):
        return _read_temporal(r, p, code)
    if code in _STRINGS:
        return _read_string(r, p, code)
    if code in (0x63, 0x23, 0x22):  # NTEXT, TEXT, IMAGE
        return _read_lob(r, p, code)
    if code in _NOT_IMPLEMENTED:
        raise SqlError(
            40517,
            16,
            1,
            f'The SQL Server simulator does not support {_NOT_IMPLEMENTED[code]} parameters (data type 0x{code:02X}, parameter {p.ordinal} "{p.name}").',
        )
    raise p.error(8009, f"Data type 0x{code:02X} is unknown.")


def _read_decimal(r: _Reader, p: _Param, code: int) -> tuple[SqlType, Any]:
    maxlen = r.u8()
    precision = r.u8()
    scale = r.u8()
    if not 1 <= precision <= 38 or scale > precision:
        raise p.bad_precision(code)
    name = "decimal" if code in (0x6A, 0x37) else "numeric"
    t = T.SqlType(name, precision=precision, scale=scale)
    ln = r.u8()
    if ln == 0:
        return t, None
    if not 2 <= ln <= min(maxlen, 17):  # a sign byte and 1..16 bytes (FreeTDS sends the fewest)
        raise p.bad_length(code)
    data = r.take(ln)
    mag = int.from_bytes(data[1:], "little")
    if data[0] not in (0, 1) or mag >= 10**precision:
        raise p.invalid_value(name)
    return t, Decimal(mag if data[0] else -mag).scaleb(-scale, DECIMAL_CONTEXT)


def _read_temporal(r: _Reader, p: _Param, code: int) -> tuple[SqlType, Any]:
    """DATEN, TIMEN, DATETIME2N, DATETIMEOFFSETN (MS-TDS 2.2.5.4.2): checked against 0001-01-01..9999-12-31."""
    if code == 0x28:
        ln = r.u8()
        if ln not in (0, 3):
            raise p.bad_length(code)
        if ln == 0:
            return T.DATE, None
        days = int.from_bytes(r.take(3), "little")
        if days > MAX_DAYS:
            raise p.invalid_value("date")
        return T.DATE, days
    scale = r.u8()
    if scale > 7:
        raise p.bad_precision(code)
    name = {0x29: "time", 0x2A: "datetime2", 0x2B: "datetimeoffset"}[code]
    t = T.SqlType(name, scale=scale)
    ln = r.u8()
    tsize = _TIME_BYTES[scale]
    if ln == 0:
        return t, None
    if ln != tsize + {0x29: 0, 0x2A: 3, 0x2B: 5}[code]:
        raise p.bad_length(code)
    data = r.take(ln)
    units = int.from_bytes(data[:tsize], "little")
    if units >= _DAYS_PER_SCALE_UNIT[scale]:
        raise p.invalid_value(name)
    ticks = units * 10 ** (7 - scale)
    if code == 0x29:
        return t, ticks
    days = int.from_bytes(data[tsize : tsize + 3], "little")
    if days > MAX_DAYS:
        raise p.invalid_value(name)
    if code == 0x2A:
        return t, days * TICKS_PER_DAY + ticks
    offset = struct.unpack_from("<h", data, tsize + 3)[0]
    value = DateTimeOffset(days * TICKS_PER_DAY + ticks, offset)
    if abs(offset) > _MAX_OFFSET or not 0 <= value.local_ticks < _END_TICKS:
        raise p.invalid_value(name)
    return t, value


def _read_string(r: _Reader, p: _Param, code: int) -> tuple[SqlType, Any]:
    """BIGVARCHR, BIGCHAR, NVARCHAR, NCHAR, BIGVARBIN, BIGBINARY; (max) types in PLP chunks."""
    maxlen = r.u16()
    if code in (0xA7, 0xAF, 0xE7, 0xEF):
        r.take(5)  # collation
    unicode_ = code in (0xE7, 0xEF)
    name = _STRINGS[code]
    if maxlen == 0xFFFF:
        if not name.startswith(("var", "nvar")):
            raise p.bad_length(code)
        t = T.SqlType(name, length=T.MAX)
        data = _read_plp(r, p, code)
    else:
        if maxlen > 8000 or (unicode_ and maxlen % 2):
            raise p.bad_length(code)
        t = T.SqlType(name, length=max(1, maxlen // 2 if unicode_ else maxlen))
        ln = r.u16()
        if ln != 0xFFFF and ln > maxlen:
            raise p.bad_length(code)
        data = None if ln == 0xFFFF else r.take(ln)
    if data is None:
        return t, None
    return t, _decode_text(data, code, p, name)


def _read_plp(r: _Reader, p: _Param, code: int) -> bytes | None:
    """A PLP value (MS-TDS 2.2.5.2.3); chunks that do not add up to the announced length are error 8007."""
    total = r.u64()
    if total == 0xFFFFFFFFFFFFFFFF:
        return None
    out = bytearray()
    while True:
        n = r.u32()
        if n == 0:
            break
        out += r.take(n)
    if total != 0xFFFFFFFFFFFFFFFE and total != len(out):
        raise p.error(
            8007, f"The chunking format is incorrect for a large object parameter of type 0x{code:02X}."
        )
    return bytes(out)


def _read_lob(r: _Reader, p: _Param, code: int) -> tuple[SqlType, Any]:
    """NTEXT, TEXT, IMAGE (LONGLEN types)."""
    r.u32()
    if code != 0x22:
        r.take(5)
    ln = r.u32()
    t = {0x63: T.NVARCHAR_MAX, 0x23: T.SqlType("varchar", length=T.MAX), 0x22: T.VARBINARY_MAX}[code]
    if ln == 0xFFFFFFFF:
        return t, None
    return t, _decode_text(r.take(ln), code, p, {0x63: "ntext", 0x23: "text", 0x22: "image"}[code])


def _decode_text(data: bytes, code: int, p: _Param, name: str) -> Any:
    if code in (0xE7, 0xEF, 0x63):
        if len(data) % 2:
            raise p.odd_length(name)
        return data.decode("utf-16-le", "surrogatepass")
    if code in (0xA7, 0xAF, 0x23):
        return data.decode("cp1252", "replace")
    return data


def _decode_fixed(name: str, data: bytes, p: _Param) -> tuple[SqlType, Any]:
    t = T.make_type(name)
    if name == "tinyint":
        return t, data[0]
    if name == "bit":
        return t, 1 if data[0] else 0
    if name in ("smallint", "int", "bigint"):
        return t, int.from_bytes(data, "little", signed=True)
    if name in ("real", "float"):
        v = struct.unpack("<f" if name == "real" else "<d", data)[0]
        if not math.isfinite(v):
            raise p.invalid_value(name)
        return t, v
    if name == "money":
        hi, lo = struct.unpack("<iI", data)
        return t, Decimal((hi << 32) | lo).scaleb(-4)
    if name == "smallmoney":
        return t, Decimal(struct.unpack("<i", data)[0]).scaleb(-4)
    if name == "datetime":
        days, t300 = struct.unpack("<iI", data)
        if not _DATETIME_MIN_DAY <= days <= _DATETIME_MAX_DAY or t300 > _DATETIME_MAX_300:
            raise p.invalid_value(name)
        return t, (days + DAYS_TO_1900) * TICKS_PER_DAY + (t300 * 100_000 + 1) // 3
    if name == "smalldatetime":
        days, mins = struct.unpack("<HH", data)
        if mins >= _MINUTES_PER_DAY:
            raise p.invalid_value(name)
        return t, (days + DAYS_TO_1900) * TICKS_PER_DAY + mins * 60 * TICKS_PER_SECOND
    raise AssertionError(name)


def parse_rpc(payload: bytes) -> tuple[Headers, list[RpcCall]]:
    """Decode an RPC message (one or more calls)."""
    headers, pos = parse_all_headers(payload)
    r = _Reader(payload, pos)
    calls = []
    while r.pos < len(payload):
        name_len = r.u16()
        if name_len == 0xFFFF:
            proc_id = r.u16()
            proc = PROC_IDS.get(proc_id, f"#{proc_id}")
        else:
            proc = r.take(name_len * 2).decode("utf-16-le")
        r.u16()  # option flags
        call = RpcCall(proc)
        while r.pos < len(payload) and payload[r.pos] not in (0x80, 0xFF, 0xFE):
            pname = r.b_varchar()
            status = r.u8()
            t, v = _read_type_and_value(r, _Param(len(call.params) + 1, pname))
            call.params.append(RpcParam(pname, t, v, bool(status & 0x01)))
        calls.append(call)
        if r.pos < len(payload):
            r.u8()  # batch separator
    return headers, calls


def parse_sql_batch(payload: bytes) -> tuple[Headers, str]:
    headers, pos = parse_all_headers(payload)
    return headers, payload[pos:].decode("utf-16-le", "surrogatepass")


@dataclass
class TmRequest:
    kind: str  # begin / commit / rollback / save / other
    name: str = ""
    begin_new: bool = False
    isolation: int = 0


def parse_tm(payload: bytes) -> tuple[Headers, TmRequest]:
    """A Transaction Manager request (MS-TDS 2.2.6.9); a transaction name's length is in bytes."""
    headers, pos = parse_all_headers(payload)
    r = _Reader(payload, pos)
    req_type = r.u16()
    if req_type == 5:
        iso = r.u8()
        return headers, TmRequest("begin", _tm_name(r), isolation=iso)
    if req_type in (7, 8):
        name = _tm_name(r)
        flags = r.u8() if r.pos < len(payload) else 0
        req = TmRequest("commit" if req_type == 7 else "rollback", name, begin_new=bool(flags & 0x01))
        if req.begin_new and r.pos < len(payload):
            req.isolation = r.u8()
            if r.pos < len(payload):
                req.name = _tm_name(r)
        return headers, req
    if req_type == 9:
        return headers, TmRequest("save", _tm_name(r))
    return headers, TmRequest("other")


def _tm_name(r: _Reader) -> str:
    """A transaction or savepoint name: a byte count, then UTF-16 text (absent: no name)."""
    if r.pos >= len(r.data):
        return ""
    n = r.u8()
    return r.take(n).decode("utf-16-le", "replace")
