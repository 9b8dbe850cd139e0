"""Every TDS parameter type round-trips its documented minimum and maximum; what SQL Server rejects is rejected.

Three layers:

* the wire: hand-built RPC parameters (MS-TDS 2.2.6.6 TYPE_INFO + value) for each type's minimum and
  maximum decode to the right value, and encodings SQL Server refuses (a date past 9999-12-31, a
  time of 24:00, a decimal wider than its precision, NaN, ...) answer SQL Server's protocol errors;
* the drivers: ``INSERT ... VALUES (?)`` with the minimum and maximum as a parameter and a SELECT
  back, through pyodbc + FreeTDS (typed RPC parameters) and pymssql (client-side literals);
* the target column: values outside its range get SQL Server's error (242, 220, 8115, 2628) and no row.

Ranges: Microsoft's data type pages (docs/t-sql/data-types/*.md in MicrosoftDocs/sql-docs).
FreeTDS 1.3 computes the day number of dates before 1600-03-01 wrongly (0001-01-01 goes out as
day -1, which SQL Server and the simulator reject with 8023): those minimums are sent as text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
import uuid
from decimal import Decimal
from typing import Any

import pytest

from sqlserver_cdc_simulator.errors import SqlError
from sqlserver_cdc_simulator.tds import requests as R
from sqlserver_cdc_simulator.types import SqlType
from sqlserver_cdc_simulator.values import to_text

_EXACT = decimal.Context(prec=40)  # the default context would round 38-digit decimals to 28
_COLLATION = b"\x09\x04\xd0\x00\x34"


def _rpc(*params: bytes) -> bytes:
    headers = struct.pack("<IIHQI", 22, 18, 2, 0, 1)
    return headers + struct.pack("<HHH", 0xFFFF, 10, 0) + b"".join(params)


def _param(type_info_and_value: bytes, name: str = "@p") -> bytes:
    return bytes([len(name)]) + name.encode("utf-16-le") + b"\x00" + type_info_and_value


def _decode(type_info_and_value: bytes) -> tuple[str, Any]:
    _headers, calls = R.parse_rpc(_rpc(_param(type_info_and_value)))
    p = calls[0].params[0]
    return str(p.type), p.value


def _plp(data: bytes, chunk: int = 8000) -> bytes:
    chunks = b"".join(
        struct.pack("<I", len(data[i : i + chunk])) + data[i : i + chunk] for i in range(0, len(data), chunk)
    )
    return struct.pack("<Q", len(data)) + chunks + b"\x00\x00\x00\x00"


def _decimal(code: int, precision: int, scale: int, value: int) -> bytes:
    mag = abs(value).to_bytes(16, "little")
    return bytes([code, 17, precision, scale, 17, 1 if value >= 0 else 0]) + mag


_TIME_BYTES = (3, 3, 3, 4, 4, 5, 5, 5)
_DAY_0 = 0  # 0001-01-01
_DAY_MAX = dt.date(9999, 12, 31).toordinal() - 1
_TICKS_DAY = 864_000_000_000


def _time_part(scale: int, units: int) -> bytes:
    return units.to_bytes(_TIME_BYTES[scale], "little")


def _max_units(scale: int) -> int:
    return 86_400 * 10**scale - 1


def _wire_cases() -> list[Any]:
    cases: list[Any] = [
        ("bit-min", b"\x68\x01\x01\x00", "bit", 0),
        ("bit-max", b"\x68\x01\x01\x01", "bit", 1),
        ("tinyint-min", b"\x26\x01\x01\x00", "tinyint", 0),
        ("tinyint-max", b"\x26\x01\x01\xff", "tinyint", 255),
        ("smallint-min", b"\x26\x02\x02" + struct.pack("<h", -32768), "smallint", -32768),
        ("smallint-max", b"\x26\x02\x02" + struct.pack("<h", 32767), "smallint", 32767),
        ("int-min", b"\x26\x04\x04" + struct.pack("<i", -(2**31)), "int", -(2**31)),
        ("int-max", b"\x38" + struct.pack("<i", 2**31 - 1), "int", 2**31 - 1),
        ("bigint-min", b"\x26\x08\x08" + struct.pack("<q", -(2**63)), "bigint", -(2**63)),
        ("bigint-max", b"\x7f" + struct.pack("<q", 2**63 - 1), "bigint", 2**63 - 1),
        (
            "money-min",
            b"\x6e\x08\x08" + struct.pack("<iI", -(2**31), 0),
            "money",
            Decimal("-922337203685477.5808"),
        ),
        (
            "money-max",
            b"\x3c" + struct.pack("<iI", 2**31 - 1, 2**32 - 1),
            "money",
            Decimal("922337203685477.5807"),
        ),
        (
            "smallmoney-min",
            b"\x6e\x04\x04" + struct.pack("<i", -(2**31)),
            "smallmoney",
            Decimal("-214748.3648"),
        ),
        ("smallmoney-max", b"\x7a" + struct.pack("<i", 2**31 - 1), "smallmoney", Decimal("214748.3647")),
        (
            "real-min",
            b"\x6d\x04\x04" + struct.pack("<f", -3.4028234663852886e38),
            "real",
            -3.4028234663852886e38,
        ),
        ("real-max", b"\x3b" + struct.pack("<f", 3.4028234663852886e38), "real", 3.4028234663852886e38),
        ("real-tiny", b"\x3b" + struct.pack("<f", 1.1754943508222875e-38), "real", 1.1754943508222875e-38),
        (
            "float-min",
            b"\x6d\x08\x08" + struct.pack("<d", -1.7976931348623157e308),
            "float",
            -1.7976931348623157e308,
        ),
        ("float-max", b"\x3e" + struct.pack("<d", 1.7976931348623157e308), "float", 1.7976931348623157e308),
        (
            "float-tiny",
            b"\x3e" + struct.pack("<d", 2.2250738585072014e-308),
            "float",
            2.2250738585072014e-308,
        ),
        ("date-min", b"\x28\x03" + _DAY_0.to_bytes(3, "little"), "date", 0),
        ("date-max", b"\x28\x03" + _DAY_MAX.to_bytes(3, "little"), "date", _DAY_MAX),
        (
            "datetime-min",
            b"\x6f\x08\x08" + struct.pack("<iI", -53690, 0),
            "datetime",
            (dt.date(1753, 1, 1).toordinal() - 1) * _TICKS_DAY,
        ),
        ("datetime-max", b"\x3d" + struct.pack("<iI", 2958463, 25919999), "datetime", None),
        ("smalldatetime-min", b"\x6f\x04\x04" + struct.pack("<HH", 0, 0), "smalldatetime", None),
        ("smalldatetime-max", b"\x3a" + struct.pack("<HH", 65535, 1439), "smalldatetime", None),
        ("uniqueidentifier-min", b"\x24\x10\x10" + bytes(16), "uniqueidentifier", uuid.UUID(int=0)),
        (
            "uniqueidentifier-max",
            b"\x24\x10\x10" + b"\xff" * 16,
            "uniqueidentifier",
            uuid.UUID(int=2**128 - 1),
        ),
        ("varchar-empty", b"\xa7\x40\x1f" + _COLLATION + b"\x00\x00", "varchar(8000)", ""),
        (
            "varchar-8000",
            b"\xa7\x40\x1f" + _COLLATION + b"\x40\x1f" + b"x" * 8000,
            "varchar(8000)",
            "x" * 8000,
        ),
        ("char-8000", b"\xaf\x40\x1f" + _COLLATION + b"\x40\x1f" + b"y" * 8000, "char(8000)", "y" * 8000),
        (
            "nvarchar-4000",
            b"\xe7\x40\x1f" + _COLLATION + b"\x40\x1f" + "é".encode("utf-16-le") * 4000,
            "nvarchar(4000)",
            "é" * 4000,
        ),
        (
            "nchar-4000",
            b"\xef\x40\x1f" + _COLLATION + b"\x40\x1f" + "z".encode("utf-16-le") * 4000,
            "nchar(4000)",
            "z" * 4000,
        ),
        ("varbinary-empty", b"\xa5\x40\x1f\x00\x00", "varbinary(8000)", b""),
        ("binary-8000", b"\xad\x40\x1f\x40\x1f" + b"\xff" * 8000, "binary(8000)", b"\xff" * 8000),
        ("varchar-max", b"\xa7\xff\xff" + _COLLATION + _plp(b"v" * 70000), "varchar(max)", "v" * 70000),
        (
            "nvarchar-max",
            b"\xe7\xff\xff" + _COLLATION + _plp("ü".encode("utf-16-le") * 70000),
            "nvarchar(max)",
            "ü" * 70000,
        ),
        (
            "varbinary-max",
            b"\xa5\xff\xff" + _plp(bytes(range(256)) * 300),
            "varbinary(max)",
            bytes(range(256)) * 300,
        ),
        ("varbinary-max-empty", b"\xa5\xff\xff" + _plp(b""), "varbinary(max)", b""),
    ]
    for p in range(1, 39):
        for s in sorted({0, p}):
            top = 10**p - 1
            for sign, label in ((-1, "min"), (1, "max")):
                cases.append(
                    (
                        f"decimal({p},{s})-{label}",
                        _decimal(0x6C, p, s, sign * top),
                        f"numeric({p},{s})",
                        Decimal(sign * top).scaleb(-s, _EXACT),
                    )
                )
    for scale in range(8):
        unit = 10 ** (7 - scale)
        tmax = _max_units(scale)
        cases += [
            (
                f"time({scale})-min",
                bytes([0x29, scale, _TIME_BYTES[scale]]) + _time_part(scale, 0),
                f"time({scale})",
                0,
            ),
            (
                f"time({scale})-max",
                bytes([0x29, scale, _TIME_BYTES[scale]]) + _time_part(scale, tmax),
                f"time({scale})",
                tmax * unit,
            ),
            (
                f"datetime2({scale})-min",
                bytes([0x2A, scale, _TIME_BYTES[scale] + 3])
                + _time_part(scale, 0)
                + _DAY_0.to_bytes(3, "little"),
                f"datetime2({scale})",
                0,
            ),
            (
                f"datetime2({scale})-max",
                bytes([0x2A, scale, _TIME_BYTES[scale] + 3])
                + _time_part(scale, tmax)
                + _DAY_MAX.to_bytes(3, "little"),
                f"datetime2({scale})",
                _DAY_MAX * _TICKS_DAY + tmax * unit,
            ),
            (
                # 0001-01-01 00:00:00 -14:00 is 0001-01-01 14:00 UTC on the wire
                f"datetimeoffset({scale})-min",
                bytes([0x2B, scale, _TIME_BYTES[scale] + 5])
                + _time_part(scale, 14 * 3600 * 10**scale)
                + _DAY_0.to_bytes(3, "little")
                + struct.pack("<h", -840),
                f"datetimeoffset({scale})",
                (14 * 3600 * 10**7, -840),
            ),
            (
                # 9999-12-31 23:59:59.9999999 +14:00 is 9999-12-31 09:59:59.9999999 UTC
                f"datetimeoffset({scale})-max",
                bytes([0x2B, scale, _TIME_BYTES[scale] + 5])
                + _time_part(scale, tmax - 14 * 3600 * 10**scale)
                + _DAY_MAX.to_bytes(3, "little")
                + struct.pack("<h", 840),
                f"datetimeoffset({scale})",
                (_DAY_MAX * _TICKS_DAY + (tmax - 14 * 3600 * 10**scale) * unit, 840),
            ),
        ]
    return cases


_WIRE_CASES = _wire_cases()


@pytest.mark.parametrize(
    ("wire", "type_text", "expected"), [c[1:] for c in _WIRE_CASES], ids=[c[0] for c in _WIRE_CASES]
)
def test_wire_parameter_decodes_its_minimum_and_maximum(wire: bytes, type_text: str, expected: Any) -> None:
    got_type, got = _decode(wire)
    assert got_type == type_text
    if isinstance(expected, tuple):
        assert (got.utc_ticks, got.offset) == expected
    elif isinstance(expected, float):
        assert got == expected and math.isfinite(got)
    elif expected is not None:
        assert got == expected


def test_wire_datetime_and_smalldatetime_extremes_are_the_documented_instants() -> None:
    def text(wire: bytes) -> str:
        sql_type, value = _decode(wire)
        return to_text(value, SqlType(sql_type), 121)

    assert text(b"\x3d" + struct.pack("<iI", 2958463, 25919999)) == "9999-12-31 23:59:59.997"
    assert text(b"\x3d" + struct.pack("<iI", -53690, 0)) == "1753-01-01 00:00:00.000"
    assert text(b"\x3a" + struct.pack("<HH", 65535, 1439)) == "2079-06-06 23:59:00.000"
    assert text(b"\x3a" + struct.pack("<HH", 0, 0)) == "1900-01-01 00:00:00.000"


# (id, TYPE_INFO + value SQL Server refuses, error number, text in the message)
_WIRE_REJECTED: list[tuple[str, bytes, int, str]] = [
    ("date-after-9999", b"\x28\x03" + (_DAY_MAX + 1).to_bytes(3, "little"), 8023, "data type date"),
    ("date-day-minus-1", b"\x28\x03\xff\xff\xff", 8023, "data type date"),
    ("date-bad-length", b"\x28\x02\x00\x00", 8016, "0x28 has an invalid data length"),
    ("time-24h", bytes([0x29, 7, 5]) + _time_part(7, _max_units(7) + 1), 8023, "data type time"),
    ("time-scale-8", bytes([0x29, 8, 5]) + bytes(5), 8017, "invalid precision or scale"),
    ("time-bad-length", bytes([0x29, 7, 3]) + bytes(3), 8016, "invalid data length"),
    (
        "datetime2-after-9999",
        bytes([0x2A, 0, 6]) + _time_part(0, 0) + (_DAY_MAX + 1).to_bytes(3, "little"),
        8023,
        "data type datetime2",
    ),
    (
        "datetimeoffset-offset-15h",
        bytes([0x2B, 0, 8]) + _time_part(0, 0) + (1000).to_bytes(3, "little") + struct.pack("<h", 900),
        8023,
        "data type datetimeoffset",
    ),
    (
        "datetimeoffset-local-after-9999",
        bytes([0x2B, 0, 8])
        + _time_part(0, _max_units(0))
        + _DAY_MAX.to_bytes(3, "little")
        + struct.pack("<h", 60),
        8023,
        "data type datetimeoffset",
    ),
    ("datetime-before-1753", b"\x3d" + struct.pack("<iI", -53691, 0), 8023, "data type datetime"),
    ("datetime-after-9999", b"\x3d" + struct.pack("<iI", 2958464, 0), 8023, "data type datetime"),
    ("datetime-time-past-midnight", b"\x3d" + struct.pack("<iI", 0, 25920000), 8023, "data type datetime"),
    ("smalldatetime-minute-1440", b"\x3a" + struct.pack("<HH", 0, 1440), 8023, "data type smalldatetime"),
    ("float-nan", b"\x3e" + struct.pack("<d", math.nan), 8023, "data type float"),
    ("float-inf", b"\x6d\x08\x08" + struct.pack("<d", math.inf), 8023, "data type float"),
    ("real-inf", b"\x3b" + struct.pack("<f", -math.inf), 8023, "data type real"),
    ("decimal-wider-than-precision", _decimal(0x6A, 5, 2, 100000), 8023, "data type decimal"),
    ("numeric-precision-39", _decimal(0x6C, 39, 0, 1), 8017, "0x6C has an invalid precision or scale"),
    ("numeric-scale-over-precision", _decimal(0x6C, 5, 6, 1), 8017, "invalid precision or scale"),
    ("intn-length-3", b"\x26\x03\x03\x00\x00\x00", 8016, "0x26 has an invalid data length"),
    ("intn-length-mismatch", b"\x26\x04\x02\x00\x00", 8016, "invalid data length"),
    ("guid-length-8", b"\x24\x08\x08" + bytes(8), 8016, "invalid data length"),
    ("nvarchar-odd-bytes", b"\xe7\x10\x00" + _COLLATION + b"\x03\x00abc", 8028, "data type nvarchar"),
    (
        "varchar-longer-than-declared",
        b"\xa7\x02\x00" + _COLLATION + b"\x03\x00abc",
        8016,
        "invalid data length",
    ),
    ("varchar-8001", b"\xa7\x41\x1f" + _COLLATION + b"\x00\x00", 8016, "invalid data length"),
    ("char-max", b"\xaf\xff\xff" + _COLLATION + _plp(b"a"), 8016, "invalid data length"),
    (
        "plp-chunks-short",
        b"\xa5\xff\xff" + struct.pack("<QI", 10, 2) + b"ab" + b"\x00" * 4,
        8007,
        "chunking format",
    ),
    ("unknown-type", b"\x01\x00", 8009, "Data type 0x01 is unknown"),
    ("sql_variant", b"\x62\x10\x00\x00\x00\x00\x00\x00\x00", 40517, "sql_variant"),
    ("xml", b"\xf1\x00" + _plp(b"<a/>"), 40517, "xml"),
    ("table-valued", b"\xf3\x00", 40517, "table-valued"),
    ("truncated-value", b"\x26\x08\x08\x00\x00", 4002, "The stream ended unexpectedly"),
    ("truncated-type-info", b"\xe7\x40", 4002, "The stream ended unexpectedly"),
]


@pytest.mark.parametrize(
    ("wire", "number", "text"), [c[1:] for c in _WIRE_REJECTED], ids=[c[0] for c in _WIRE_REJECTED]
)
def test_wire_parameter_sql_server_refuses_gets_its_protocol_error(
    wire: bytes, number: int, text: str
) -> None:
    with pytest.raises(SqlError) as info:
        R.parse_rpc(_rpc(_param(b"\x26\x04\x04" + struct.pack("<i", 1), "@a"), _param(wire, "@b")))
    assert info.value.number == number
    assert text in info.value.message
    if number not in (40517, 4002):
        assert info.value.message.startswith(
            'The incoming tabular data stream (TDS) remote procedure call (RPC) protocol stream is incorrect. Parameter 2 ("@b"): '
        )


# ---------------------------------------------------------------- through the drivers


# (column type, minimum, maximum, expected CONVERT(nvarchar(max), v, 121) of minimum and maximum or None)
# Values are Python objects the drivers bind as typed parameters; str values go as nvarchar text (pyodbc
# cannot bind time fractions, datetimeoffset or pre-1601 dates correctly: see the module docstring).
_DRIVER_CASES: list[tuple[str, Any, Any, str | None, str | None]] = [
    ("bit", False, True, "0", "1"),
    ("tinyint", 0, 255, "0", "255"),
    ("smallint", -32768, 32767, "-32768", "32767"),
    ("int", -(2**31), 2**31 - 1, str(-(2**31)), str(2**31 - 1)),
    ("bigint", -(2**63), 2**63 - 1, str(-(2**63)), str(2**63 - 1)),
    (
        "money",
        Decimal("-922337203685477.5808"),
        Decimal("922337203685477.5807"),
        None,
        None,
    ),
    ("smallmoney", Decimal("-214748.3648"), Decimal("214748.3647"), None, None),
    ("real", -3.4028234663852886e38, 3.4028234663852886e38, None, None),
    ("float", -1.7976931348623157e308, 1.7976931348623157e308, None, None),
    ("date", "0001-01-01", dt.date(9999, 12, 31), "0001-01-01", "9999-12-31"),
    (
        "datetime",
        dt.datetime(1753, 1, 1),
        dt.datetime(9999, 12, 31, 23, 59, 59, 997000),
        "1753-01-01 00:00:00.000",
        "9999-12-31 23:59:59.997",
    ),
    (
        "smalldatetime",
        dt.datetime(1900, 1, 1),
        dt.datetime(2079, 6, 6, 23, 59),
        "1900-01-01 00:00:00.000",
        "2079-06-06 23:59:00.000",
    ),
    (
        "uniqueidentifier",
        uuid.UUID(int=0),
        uuid.UUID(int=2**128 - 1),
        "00000000-0000-0000-0000-000000000000",
        "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
    ),
    ("char(8000)", "", "c" * 8000, " " * 8000, "c" * 8000),
    ("varchar(8000)", "", "v" * 8000, "", "v" * 8000),
    ("varchar(max)", "", "w" * 70000, "", "w" * 70000),
    ("nchar(4000)", "", "é" * 4000, " " * 4000, "é" * 4000),
    ("nvarchar(4000)", "", "ü" * 4000, "", "ü" * 4000),
    ("nvarchar(max)", "", "😀" * 40000, "", "😀" * 40000),
    ("binary(8000)", b"", b"\xff" * 8000, None, None),
    ("varbinary(8000)", b"", b"\xff" * 8000, None, None),
    ("varbinary(max)", b"", bytes(range(256)) * 400, None, None),
]
for _p in range(1, 39):
    for _s in sorted({0, _p}):
        _top = Decimal(10**_p - 1).scaleb(-_s, _EXACT)
        _DRIVER_CASES.append(
            (f"decimal({_p},{_s})", _top.copy_negate(), _top, str(_top.copy_negate()), str(_top))
        )
for _scale in range(8):
    _frac = ("." + "9" * _scale) if _scale else ""
    _DRIVER_CASES += [
        (
            f"time({_scale})",
            "00:00:00",
            f"23:59:59{_frac}",
            "00:00:00" + ("." + "0" * _scale if _scale else ""),
            f"23:59:59{_frac}",
        ),
        (
            f"datetime2({_scale})",
            "0001-01-01 00:00:00",
            f"9999-12-31 23:59:59{_frac}",
            "0001-01-01 00:00:00" + ("." + "0" * _scale if _scale else ""),
            f"9999-12-31 23:59:59{_frac}",
        ),
        (
            f"datetimeoffset({_scale})",
            "0001-01-01 00:00:00 -14:00",
            f"9999-12-31 23:59:59{_frac} +14:00",
            "0001-01-01 00:00:00" + ("." + "0" * _scale if _scale else "") + " -14:00",
            f"9999-12-31 23:59:59{_frac} +14:00",
        ),
    ]
# time as a typed parameter (pyodbc: TIMEN(7) without fractions, SQL_TIME_STRUCT has none)
_DRIVER_CASES.append(("time(0)", dt.time(0, 0, 0), dt.time(23, 59, 59), "00:00:00", "23:59:59"))
# datetime2 maximum as a typed parameter (pyodbc: DATETIME2N(7) with microseconds)
_DRIVER_CASES.append(
    (
        "datetime2(6)",
        dt.datetime(1601, 1, 1),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        "1601-01-01 00:00:00.000000",
        "9999-12-31 23:59:59.999999",
    )
)


def _sql(driver: str, sql: str) -> str:
    return sql.replace("?", "%s") if driver == "pymssql" else sql


@pytest.mark.parametrize(
    ("sql_type", "low", "high", "low_text", "high_text"),
    _DRIVER_CASES,
    ids=[f"{c[0]}-{type(c[2]).__name__}" for c in _DRIVER_CASES],
)
def test_minimum_and_maximum_round_trip_as_parameters(
    connect: Any, driver: str, sql_type: str, low: Any, high: Any, low_text: str | None, high_text: str | None
) -> None:
    if driver == "pymssql" and isinstance(high, dt.datetime) and high.microsecond % 1000:
        pytest.skip("pymssql writes datetime parameters with milliseconds only")
    conn = connect()
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v {sql_type} NULL)")
    cur.execute(_sql(driver, "INSERT INTO dbo.t (id, v) VALUES (1, ?)"), (low,))
    cur.execute(_sql(driver, "INSERT INTO dbo.t (id, v) VALUES (2, ?)"), (high,))
    cur.execute("SELECT v, CONVERT(nvarchar(max), v, 121), DATALENGTH(v) FROM dbo.t ORDER BY id")
    (low_got, low_got_text, _), (high_got, high_got_text, high_len) = cur.fetchall()
    if low_text is not None:
        assert low_got_text == low_text
        assert high_got_text == high_text
    if isinstance(high, (bytes, float, Decimal, int)) and not isinstance(high, bool):
        assert high_got == high
        if sql_type != "binary(8000)":
            assert low_got == low
    if isinstance(high, bytes):
        assert high_len == len(high)
    conn.close()


def test_pyodbc_date_0001_01_01_is_refused_like_sql_server_and_stores_nothing(
    sql_backend: Any, error_number: Any
) -> None:
    """FreeTDS sends 0001-01-01 as day -1 (0xFFFFFF): a date SQL Server refuses with 8023, not a stored value."""
    conn = sql_backend.pyodbc()
    cur = conn.cursor()
    cur.execute("CREATE TABLE dbo.t (v date)")
    with pytest.raises(Exception) as info:
        cur.execute("INSERT INTO dbo.t VALUES (?)", dt.date(1, 1, 1))
    assert error_number(info.value) == 8023
    assert "not a valid instance of data type date" in str(info.value)
    assert cur.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 0
    conn.close()


# (column type, value, error number, message) -- values SQL Server refuses for the target column
_OUT_OF_RANGE: list[tuple[str, Any, int, str]] = [
    ("datetime", dt.date(1700, 1, 1), 242, "to a datetime data type resulted in an out-of-range value."),
    (
        "datetime",
        dt.datetime(1752, 12, 31, 23, 59, 59),
        242,
        "to a datetime data type resulted in an out-of-range value.",
    ),
    ("datetime", "0001-01-01", 242, "to a datetime data type resulted in an out-of-range value."),
    (
        "smalldatetime",
        dt.datetime(1899, 12, 31),
        242,
        "to a smalldatetime data type resulted in an out-of-range value.",
    ),
    (
        "smalldatetime",
        dt.datetime(2079, 6, 7),
        242,
        "to a smalldatetime data type resulted in an out-of-range value.",
    ),
    (
        "datetimeoffset(0)",
        "0001-01-01 00:00:00 +14:00",
        242,
        "to a datetimeoffset data type resulted in an out-of-range value.",
    ),
    ("tinyint", 256, 220, "Arithmetic overflow error for data type tinyint, value = 256."),
    ("tinyint", -1, 220, "Arithmetic overflow error for data type tinyint, value = -1."),
    ("smallint", 32768, 220, "Arithmetic overflow error for data type smallint, value = 32768."),
    ("int", 2**31, 8115, "Arithmetic overflow error converting expression to data type int."),
    (
        "numeric(3,0)",
        Decimal("1000"),
        8115,
        "Arithmetic overflow error converting numeric to data type numeric.",
    ),
    (
        "decimal(5,5)",
        Decimal("1"),
        8115,
        "Arithmetic overflow error converting numeric to data type numeric.",
    ),
    ("money", Decimal("922337203685477.5808"), 8115, "Arithmetic overflow error converting"),
    ("smallmoney", Decimal("-214748.3649"), 8115, "Arithmetic overflow error converting"),
    ("real", 1e39, 8115, "Arithmetic overflow error converting"),
    ("varchar(3)", "abcd", 2628, "String or binary data would be truncated in table"),
    ("nchar(2)", "abc", 2628, "String or binary data would be truncated in table"),
    ("varbinary(2)", b"abc", 2628, "String or binary data would be truncated in table"),
]


@pytest.mark.parametrize(
    ("sql_type", "value", "number", "message"),
    _OUT_OF_RANGE,
    ids=[f"{c[0]}-{c[1]!r}"[:60] for c in _OUT_OF_RANGE],
)
def test_value_out_of_the_column_range_gets_sql_server_error_and_stores_nothing(
    cursor_after: Any, driver: str, sql_type: str, value: Any, number: int, message: str, error_number: Any
) -> None:
    cur = cursor_after(f"CREATE TABLE dbo.t (v {sql_type})")
    with pytest.raises(Exception) as info:
        cur.execute(_sql(driver, "INSERT INTO dbo.t VALUES (?)"), (value,))
    assert error_number(info.value) == number
    assert message in str(info.value)
    cur.execute("SELECT COUNT(*) FROM dbo.t")
    assert cur.fetchone()[0] == 0


@pytest.mark.parametrize(
    ("expression", "type_name"),
    [
        ("DATEADD(day, 1, CAST('9999-12-31' AS date))", "date"),
        ("DATEADD(year, 9000, CAST('2000-01-01' AS date))", "date"),
        ("DATEADD(day, -1, CAST('0001-01-01' AS datetime2))", "datetime2"),
        ("DATEADD(day, -1, CAST('1753-01-01' AS datetime))", "datetime"),
        ("DATEADD(minute, 1, CAST('2079-06-06 23:59' AS smalldatetime))", "smalldatetime"),
        ("DATEADD(hour, 1, CAST('9999-12-31 23:00 +00:00' AS datetimeoffset))", "datetimeoffset"),
    ],
)
def test_dateadd_past_the_type_range_is_error_517_not_a_stored_value(
    cursor_after: Any, expression: str, type_name: str, error_number: Any
) -> None:
    cur = cursor_after(f"CREATE TABLE dbo.t (v {type_name})")
    with pytest.raises(Exception) as info:
        cur.execute(f"INSERT INTO dbo.t (v) SELECT {expression}")
    assert error_number(info.value) == 517
    assert f"Adding a value to a '{type_name}' column caused an overflow." in str(info.value)
    cur.execute("SELECT COUNT(*) FROM dbo.t")
    assert cur.fetchone()[0] == 0
