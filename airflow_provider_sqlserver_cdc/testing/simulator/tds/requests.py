"""Decode client requests: PRELOGIN, LOGIN7, SQL_BATCH, RPC and Transaction Manager messages."""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from airflow_provider_sqlserver_cdc.testing.simulator import types as T
from airflow_provider_sqlserver_cdc.testing.simulator.errors import SqlError
from airflow_provider_sqlserver_cdc.testing.simulator.types import SqlType
from airflow_provider_sqlserver_cdc.testing.simulator.values import (
    DAYS_TO_1900,
    DECIMAL_CONTEXT,
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


def prelogin_response(version: bytes = b"\x10\x00\x10\x5e\x00\x00") -> bytes:
    """PRELOGIN answer: version, encryption not supported, no instance, no MARS."""
    opts = [(0, version), (1, b"\x02"), (2, b"\x00"), (3, b""), (4, b"\x00")]
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
        v = self.data[self.pos]
        self.pos += 1
        return v

    def _unsigned(self, fmt: struct.Struct) -> int:
        (v,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
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

    def plp(self) -> bytes | None:
        total = self.u64()
        if total == 0xFFFFFFFFFFFFFFFF:
            return None
        out = bytearray()
        while True:
            n = self.u32()
            if n == 0:
                break
            out += self.take(n)
        return bytes(out)


def _collation_codec(coll: bytes) -> str:
    return "cp1252"


def _read_type_and_value(r: _Reader) -> tuple[SqlType, Any]:
    code = r.u8()
    # fixed-length types
    fixed = {
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
    if code in fixed:
        name, size = fixed[code]
        return _decode_fixed(name, r.take(size))
    if code == 0x1F:  # NULLTYPE
        return T.SqlType("int"), None
    if code in (0x26, 0x68, 0x6D, 0x6E, 0x6F):
        maxlen = r.u8()
        ln = r.u8()
        if code == 0x26:
            name = {1: "tinyint", 2: "smallint", 4: "int", 8: "bigint"}[maxlen]
        elif code == 0x68:
            name = "bit"
        elif code == 0x6D:
            name = "real" if maxlen == 4 else "float"
        elif code == 0x6E:
            name = "smallmoney" if maxlen == 4 else "money"
        else:
            name = "smalldatetime" if maxlen == 4 else "datetime"
        if ln == 0:
            return T.make_type(name), None
        return _decode_fixed(name, r.take(ln))
    if code in (0x6A, 0x6C, 0x37, 0x3F):
        r.u8()
        precision = r.u8()
        scale = r.u8()
        t = T.SqlType("decimal" if code in (0x6A, 0x37) else "numeric", precision=precision, scale=scale)
        ln = r.u8()
        if ln == 0:
            return t, None
        data = r.take(ln)
        mag = int.from_bytes(data[1:], "little")
        v = Decimal(mag if data[0] else -mag).scaleb(-scale, DECIMAL_CONTEXT)
        return t, v
    if code == 0x24:
        r.u8()
        ln = r.u8()
        return T.UNIQUEIDENTIFIER, (uuid.UUID(bytes_le=r.take(16)) if ln else None)
    if code == 0x28:
        ln = r.u8()
        return T.DATE, (int.from_bytes(r.take(3), "little") if ln else None)
    if code in (0x29, 0x2A, 0x2B):
        scale = r.u8()
        ln = r.u8()
        name = {0x29: "time", 0x2A: "datetime2", 0x2B: "datetimeoffset"}[code]
        t = T.SqlType(name, scale=scale)
        if ln == 0:
            return t, None
        data = r.take(ln)
        tsize = (3, 3, 3, 4, 4, 5, 5, 5)[scale]
        ticks = int.from_bytes(data[:tsize], "little") * 10 ** (7 - scale)
        if code == 0x29:
            return t, ticks
        days = int.from_bytes(data[tsize : tsize + 3], "little")
        if code == 0x2A:
            return t, days * TICKS_PER_DAY + ticks
        offset = struct.unpack_from("<h", data, tsize + 3)[0]
        return t, DateTimeOffset(days * TICKS_PER_DAY + ticks, offset)
    if code in (0xA7, 0xAF, 0xE7, 0xEF, 0xA5, 0xAD):
        maxlen = r.u16()
        if code in (0xA7, 0xAF, 0xE7, 0xEF):
            r.take(5)
        unicode_ = code in (0xE7, 0xEF)
        name = {
            0xA7: "varchar",
            0xAF: "char",
            0xE7: "nvarchar",
            0xEF: "nchar",
            0xA5: "varbinary",
            0xAD: "binary",
        }[code]
        if maxlen == 0xFFFF:
            t = T.SqlType(name if name.startswith(("var", "nvar")) else name, length=T.MAX)
            data = r.plp()
        else:
            t = T.SqlType(name, length=max(1, maxlen // 2 if unicode_ else maxlen))
            ln = r.u16()
            data = None if ln == 0xFFFF else r.take(ln)
        if data is None:
            return t, None
        if unicode_:
            return t, data.decode("utf-16-le", "surrogatepass")
        if code in (0xA7, 0xAF):
            return t, data.decode("cp1252", "replace")
        return t, data
    if code in (0x63, 0x23, 0x22):  # NTEXT, TEXT, IMAGE
        r.u32()
        if code != 0x22:
            r.take(5)
        ln = r.u32()
        t = {0x63: T.NVARCHAR_MAX, 0x23: T.SqlType("varchar", length=T.MAX), 0x22: T.VARBINARY_MAX}[code]
        if ln == 0xFFFFFFFF:
            return t, None
        data = r.take(ln)
        if code == 0x63:
            return t, data.decode("utf-16-le", "surrogatepass")
        if code == 0x23:
            return t, data.decode("cp1252", "replace")
        return t, data
    raise SqlError(
        8009,
        16,
        1,
        f"The incoming tabular data stream (TDS) remote procedure call (RPC) protocol stream is incorrect. Parameter type 0x{code:02X} is not supported by the simulator.",
    )


def _decode_fixed(name: str, data: bytes) -> tuple[SqlType, Any]:
    t = T.make_type(name)
    if name in ("tinyint",):
        return t, data[0]
    if name == "bit":
        return t, 1 if data[0] else 0
    if name == "smallint":
        return t, struct.unpack("<h", data)[0]
    if name == "int":
        return t, struct.unpack("<i", data)[0]
    if name == "bigint":
        return t, struct.unpack("<q", data)[0]
    if name == "real":
        return t, struct.unpack("<f", data)[0]
    if name == "float":
        return t, struct.unpack("<d", data)[0]
    if name == "money":
        hi, lo = struct.unpack("<iI", data)
        return t, Decimal((hi << 32) | lo).scaleb(-4)
    if name == "smallmoney":
        return t, Decimal(struct.unpack("<i", data)[0]).scaleb(-4)
    if name == "datetime":
        days, t300 = struct.unpack("<iI", data)
        return t, (days + DAYS_TO_1900) * TICKS_PER_DAY + (t300 * 100_000 + 1) // 3
    if name == "smalldatetime":
        days, mins = struct.unpack("<HH", data)
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
            t, v = _read_type_and_value(r)
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
    headers, pos = parse_all_headers(payload)
    r = _Reader(payload, pos)
    req_type = r.u16()
    if req_type == 5:
        iso = r.u8()
        name = r.b_varchar() if r.pos < len(payload) else ""
        return headers, TmRequest("begin", name, isolation=iso)
    if req_type in (7, 8):
        name = r.b_varchar() if r.pos < len(payload) else ""
        flags = r.u8() if r.pos < len(payload) else 0
        req = TmRequest("commit" if req_type == 7 else "rollback", name, begin_new=bool(flags & 0x01))
        if req.begin_new and r.pos < len(payload):
            req.isolation = r.u8()
        return headers, req
    if req_type == 9:
        return headers, TmRequest("save", r.b_varchar() if r.pos < len(payload) else "")
    return headers, TmRequest("other")
