"""Every data type round-trips exactly through pyodbc + FreeTDS and pymssql, NULL included.

Values go in as driver parameters (pyodbc: RPC sp_prepexec with typed parameters; pymssql:
client-side literals) and come back both as the driver's Python value and as the server's own
text form (CONVERT), which checks what is stored, not only what the driver shows.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest

# (column type, value to insert, expected Python value back, expected CONVERT(nvarchar(max), col) text or None)
CASES: list[tuple[str, Any, Any, str | None]] = [
    ("bit", True, True, "1"),
    ("tinyint", 255, 255, "255"),
    ("smallint", -32768, -32768, "-32768"),
    ("int", -2147483648, -2147483648, "-2147483648"),
    ("bigint", 9223372036854775807, 9223372036854775807, "9223372036854775807"),
    (
        "decimal(38,10)",
        Decimal("1234567890123456789012345678.0123456789"),
        Decimal("1234567890123456789012345678.0123456789"),
        "1234567890123456789012345678.0123456789",
    ),
    ("numeric(5,2)", Decimal("-123.45"), Decimal("-123.45"), "-123.45"),
    ("money", Decimal("922337203685477.5807"), Decimal("922337203685477.5807"), "922337203685477.58"),
    ("smallmoney", Decimal("-214748.3648"), Decimal("-214748.3648"), "-214748.36"),
    ("real", 3.5, 3.5, "3.5"),
    ("float", 1.0000000000000002, 1.0000000000000002, None),
    ("char(5)", "ab", "ab   ", "ab   "),
    ("varchar(10)", "héllo", "héllo", "héllo"),
    ("varchar(max)", "x" * 9000, "x" * 9000, None),
    ("nchar(3)", "é😀", "é😀", "é😀"),
    ("nvarchar(20)", "𝄞 music", "𝄞 music", "𝄞 music"),
    ("nvarchar(max)", "ü" * 5000 + "😀", "ü" * 5000 + "😀", None),
    ("binary(4)", b"\x01\x02", b"\x01\x02\x00\x00", None),
    ("varbinary(10)", b"\x00\xff", b"\x00\xff", None),
    ("varbinary(max)", bytes(range(256)) * 40, bytes(range(256)) * 40, None),
    ("date", dt.date(2024, 2, 29), dt.date(2024, 2, 29), "2024-02-29"),
    # pyodbc binds datetime.time without fractional seconds (SQL_TIME_STRUCT): send time as text
    ("time(7)", "23:59:59.9999999", dt.time(23, 59, 59, 999999), "23:59:59.9999999"),
    ("time(3)", "12:34:56.789", dt.time(12, 34, 56, 789000), "12:34:56.789"),
    ("datetime", dt.datetime(2024, 1, 2, 3, 4, 5, 997000), dt.datetime(2024, 1, 2, 3, 4, 5, 997000), None),
    ("smalldatetime", dt.datetime(2024, 1, 2, 3, 4), dt.datetime(2024, 1, 2, 3, 4), None),
    (
        "datetime2(7)",
        dt.datetime(2024, 1, 2, 3, 4, 5, 123000),
        dt.datetime(2024, 1, 2, 3, 4, 5, 123000),
        "2024-01-02 03:04:05.1230000",
    ),
    (
        "datetime2(3)",
        dt.datetime(2024, 1, 2, 3, 4, 5, 123000),
        dt.datetime(2024, 1, 2, 3, 4, 5, 123000),
        "2024-01-02 03:04:05.123",
    ),
    ("datetimeoffset(7)", "2024-01-02 03:04:05.1234567 +05:30", None, "2024-01-02 03:04:05.1234567 +05:30"),
    (
        "uniqueidentifier",
        "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "6F9619FF-8B86-D011-B42D-00C04FC964FF",
    ),
]


def _normalize(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value).upper()
    return value


def _param(driver: str, sql: str) -> str:
    return sql.replace("?", "%s") if driver == "pymssql" else sql


@pytest.mark.parametrize(("sql_type", "value", "expected", "text"), CASES, ids=[c[0] for c in CASES])
def test_type_round_trips_as_parameter_and_null(
    connect: Any, driver: str, sql_type: str, value: Any, expected: Any, text: str | None
) -> None:
    conn = connect()
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, v {sql_type} NULL)")
    cur.execute(_param(driver, "INSERT INTO dbo.t (id, v) VALUES (1, ?)"), (value,))
    cur.execute("INSERT INTO dbo.t (id, v) VALUES (2, NULL)")
    cur.execute("SELECT v, CONVERT(nvarchar(max), v) FROM dbo.t ORDER BY id")
    rows = cur.fetchall()
    assert rows[1][0] is None and rows[1][1] is None
    got, got_text = rows[0]
    if expected is not None:
        assert _normalize(got) == expected
    if text is not None:
        assert got_text == text
    conn.close()


@pytest.mark.parametrize(
    ("sql_type", "literal", "text"),
    [
        ("datetime2(7)", "2024-01-02 03:04:05.1234567", "2024-01-02 03:04:05.1234567"),
        ("time(7)", "03:04:05.9999999", "03:04:05.9999999"),
        ("datetimeoffset(7)", "2024-01-02 03:04:05.0000001 -08:00", "2024-01-02 03:04:05.0000001 -08:00"),
        ("datetime2(4)", "2024-01-02 03:04:05.12345", "2024-01-02 03:04:05.1235"),
        ("datetime", "2024-01-02 03:04:05.001", "2024-01-02 03:04:05.000"),
        ("datetime", "2024-01-02 03:04:05.002", "2024-01-02 03:04:05.003"),
    ],
)
def test_temporal_values_keep_100ns_and_round_like_sql_server(
    cursor_after: Any, sql_type: str, literal: str, text: str
) -> None:
    cur = cursor_after(f"CREATE TABLE dbo.t (v {sql_type})")
    cur.execute(f"INSERT INTO dbo.t VALUES ('{literal}')")
    cur.execute("SELECT CONVERT(nvarchar(40), v, 121) FROM dbo.t")
    assert cur.fetchone()[0] == text


def test_datetime2_parameter_keeps_microseconds_through_pyodbc(sql_backend: Any) -> None:
    conn = sql_backend.pyodbc()
    cur = conn.cursor()
    cur.execute("CREATE TABLE dbo.t (v datetime2(7))")
    cur.execute("INSERT INTO dbo.t VALUES (?)", dt.datetime(2024, 5, 6, 7, 8, 9, 123456))
    cur.execute("SELECT v, CONVERT(nvarchar(40), v, 121) FROM dbo.t")
    value, text = cur.fetchone()
    assert value == dt.datetime(2024, 5, 6, 7, 8, 9, 123456)
    assert text == "2024-05-06 07:08:09.1234560"


def test_datetimeoffset_reaches_pyodbc_through_an_output_converter(sql_backend: Any) -> None:
    conn = sql_backend.pyodbc()
    value = (
        conn.cursor()
        .execute("SELECT CAST('2024-01-02 03:04:05.1234567 +05:30' AS datetimeoffset(7))")
        .fetchone()[0]
    )
    assert value == "2024-01-02 03:04:05.1234567 +05:30"


def test_rowversion_is_generated_and_grows_on_update(cursor_after: Any) -> None:
    cur = cursor_after(
        "CREATE TABLE dbo.t (id int PRIMARY KEY, v int, rv rowversion)",
        "INSERT INTO dbo.t (id, v) VALUES (1, 1), (2, 2)",
    )
    cur.execute("SELECT rv FROM dbo.t ORDER BY id")
    before = [r[0] for r in cur.fetchall()]
    assert all(isinstance(b, bytes) and len(b) == 8 for b in before)
    assert before[0] < before[1]
    cur.execute("UPDATE dbo.t SET v = 10 WHERE id = 1")
    cur.execute("SELECT rv FROM dbo.t WHERE id = 1")
    assert cur.fetchone()[0] > before[1]


def test_string_comparison_follows_the_case_insensitive_default_collation(cursor_after: Any) -> None:
    cur = cursor_after("CREATE TABLE dbo.t (k nvarchar(10) PRIMARY KEY)", "INSERT INTO dbo.t VALUES (N'Abc')")
    cur.execute("SELECT COUNT(*) FROM dbo.t WHERE k = N'aBC  '")
    assert cur.fetchone()[0] == 1
    with pytest.raises(Exception) as err:
        cur.execute("INSERT INTO dbo.t VALUES (N'ABC')")
    assert "2627" in str(err.value) or getattr(err.value, "args", [None])[0] == 2627
