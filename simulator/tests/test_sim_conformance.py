"""T-SQL expressions against the answers Microsoft Learn documents for them (table-driven).

Each row is ``(expression, expected value, page)``: the page (a path in MicrosoftDocs/sql-docs)
whose documented example or rule gives the expected answer. Temporal results are converted to
text in the SQL (style 121), so the comparison does not depend on how a driver maps types. The
rows run through pyodbc + FreeTDS against one simulator for the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyodbc
import pytest

LIKE = "docs/t-sql/language-elements/like-transact-sql.md"
NEGATIVE = "docs/t-sql/language-elements/unary-operators-negative.md"
DECIMAL = "docs/t-sql/data-types/decimal-and-numeric-transact-sql.md"
PRECISION = "docs/t-sql/data-types/precision-scale-and-length-transact-sql.md"
DATEADD = "docs/t-sql/functions/dateadd-transact-sql.md"
DATEDIFF = "docs/t-sql/functions/datediff-transact-sql.md"
DATEDIFF_BIG = "docs/t-sql/functions/datediff-big-transact-sql.md"
CONVERT = "docs/t-sql/functions/cast-and-convert-transact-sql.md"
LEN = "docs/t-sql/functions/len-transact-sql.md"
DATALENGTH = "docs/t-sql/functions/datalength-transact-sql.md"
NCHAR = "docs/t-sql/data-types/nchar-and-nvarchar-transact-sql.md"
NULLS = "docs/t-sql/language-elements/null-and-unknown-transact-sql.md"
CONCAT = "docs/t-sql/functions/concat-transact-sql.md"
ISNULL = "docs/t-sql/functions/isnull-transact-sql.md"
BINARY = "docs/t-sql/data-types/binary-and-varbinary-transact-sql.md"
CONSTANTS = "docs/t-sql/data-types/constants-transact-sql.md"

ADJACENT = "'2005-12-31 23:59:59.9999999', '2006-01-01 00:00:00.0000000'"
D7 = "CAST('2007-01-01 13:10:10.1111111' AS datetime2)"


def _bool(predicate: str) -> str:
    return f"CASE WHEN {predicate} THEN 1 WHEN NOT ({predicate}) THEN 0 END"


CASES: list[tuple[str, Any, str]] = [
    # LIKE / NOT LIKE / ESCAPE
    (_bool("'abc' LIKE 'a%'"), 1, LIKE),
    (_bool("'abc' NOT LIKE 'x%'"), 1, LIKE),
    (_bool("'abc' NOT LIKE 'a%'"), 0, LIKE),
    (_bool("'__$start_lsn' NOT LIKE '[_][_]$%'"), 0, LIKE),
    (_bool("'amount' NOT LIKE '[_][_]$%'"), 1, LIKE),
    (_bool("'Discount is 10-15% off' LIKE '%10-15!% off%' ESCAPE '!'"), 1, LIKE),
    (_bool("'Discount is .10-.15 off' LIKE '%10-15!% off%' ESCAPE '!'"), 0, LIKE),
    (_bool("'Discount is .10-.15 off' NOT LIKE '%10-15!% off%' ESCAPE '!'"), 1, LIKE),
    (_bool("'30!' LIKE '%30!%' ESCAPE '!'"), 0, LIKE),
    (_bool("'abc' LIKE 'abc!' ESCAPE '!'"), 0, LIKE),  # escape at the end: the pattern is invalid
    (_bool("'Sheryl' LIKE '[CS]heryl'"), 1, LIKE),
    (_bool("'Zheng' LIKE 'Zh[ae]ng'"), 1, LIKE),
    (_bool("'del' LIKE 'de[^l]%'"), 0, LIKE),
    (_bool("'5%' LIKE '5[%]'"), 1, LIKE),
    (_bool("'abc   ' LIKE 'abc'"), 1, LIKE),  # ASCII LIKE: trailing blanks of the value ignored
    (_bool("'abc' LIKE 'abc '"), 0, LIKE),  # ... but those of the pattern count
    (_bool("N'abc ' LIKE N'abc'"), 0, LIKE),  # Unicode LIKE: trailing blanks count
    ("CASE WHEN NULL NOT LIKE 'a' THEN 1 WHEN NOT (NULL NOT LIKE 'a') THEN 0 END", None, NULLS),
    # decimal(38) at its limits; unary minus keeps every digit
    ("-99999999999999999999999999999999999999", Decimal("-99999999999999999999999999999999999999"), NEGATIVE),
    ("-12345678901234567890123456789", Decimal("-12345678901234567890123456789"), NEGATIVE),
    (
        "- -12345678901234567890123456789012345678",
        Decimal("12345678901234567890123456789012345678"),
        NEGATIVE,
    ),
    (
        "CAST(99999999999999999999999999999999999999 AS decimal(38,0)) - 1",
        Decimal("99999999999999999999999999999999999998"),
        PRECISION,
    ),
    (
        "CAST(-9999999999999999999999999999.9999999999 AS decimal(38,10))",
        Decimal("-9999999999999999999999999999.9999999999"),
        DECIMAL,
    ),
    (
        "CAST(0.0000009000 AS decimal(30,20)) * CAST(1.0000000000 AS decimal(30,20))",
        Decimal("0.00000090000000000"),
        PRECISION,
    ),
    (
        "CAST(0.0000009000 AS decimal(30,10)) * CAST(1.0000000000 AS decimal(30,10))",
        Decimal("0.000001"),
        PRECISION,
    ),
    ("CAST(1 AS decimal(38,0)) / CAST(3 AS decimal(38,0))", Decimal("0.333333"), PRECISION),
    # DATEADD: every datepart; nanoseconds round to the 100 ns tick
    (f"CONVERT(varchar(27), DATEADD(year, 1, {D7}), 121)", "2008-01-01 13:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(quarter, 1, {D7}), 121)", "2007-04-01 13:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(month, 1, {D7}), 121)", "2007-02-01 13:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(dayofyear, 1, {D7}), 121)", "2007-01-02 13:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(day, 1, {D7}), 121)", "2007-01-02 13:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(week, 1, {D7}), 121)", "2007-01-08 13:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(weekday, 1, {D7}), 121)", "2007-01-02 13:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(hour, 1, {D7}), 121)", "2007-01-01 14:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(minute, 1, {D7}), 121)", "2007-01-01 13:11:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(second, 1, {D7}), 121)", "2007-01-01 13:10:11.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(millisecond, 1, {D7}), 121)", "2007-01-01 13:10:10.1121111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(millisecond, 2, {D7}), 121)", "2007-01-01 13:10:10.1131111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(microsecond, 1, {D7}), 121)", "2007-01-01 13:10:10.1111121", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(microsecond, 2, {D7}), 121)", "2007-01-01 13:10:10.1111131", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(nanosecond, 49, {D7}), 121)", "2007-01-01 13:10:10.1111111", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(nanosecond, 50, {D7}), 121)", "2007-01-01 13:10:10.1111112", DATEADD),
    (f"CONVERT(varchar(27), DATEADD(nanosecond, 150, {D7}), 121)", "2007-01-01 13:10:10.1111113", DATEADD),
    ("CONVERT(varchar(10), DATEADD(month, 1, CAST('2006-08-31' AS date)), 121)", "2006-09-30", DATEADD),
    # DATEDIFF counts boundaries crossed: 100 ns apart, each datepart gives 1
    *[
        (f"DATEDIFF({part}, {ADJACENT})", 1, DATEDIFF)
        for part in (
            "year",
            "quarter",
            "month",
            "dayofyear",
            "day",
            "week",
            "hour",
            "minute",
            "second",
            "millisecond",
            "microsecond",
        )
    ],
    (f"DATEDIFF(nanosecond, {ADJACENT})", 100, DATEDIFF),
    (f"DATEDIFF_BIG(year, {ADJACENT})", 1, DATEDIFF_BIG),
    ("DATEDIFF_BIG(millisecond, '2000-01-01', '2020-01-01')", 631152000000, DATEDIFF_BIG),
    ("DATEDIFF(day, '2007-05-07 09:53:01.0376635', '2007-05-08 09:53:01.0376635')", 1, DATEDIFF),
    # CONVERT styles the provider and common tools use
    (
        "CONVERT(varchar(30), CAST('2006-12-30 00:38:54.840' AS datetime), 121)",
        "2006-12-30 00:38:54.840",
        CONVERT,
    ),
    (
        "CONVERT(varchar(30), CAST('2006-12-30 00:38:54.840' AS datetime), 126)",
        "2006-12-30T00:38:54.840",
        CONVERT,
    ),
    (
        "CONVERT(varchar(30), CAST('2006-12-30 00:38:54.840' AS datetime), 120)",
        "2006-12-30 00:38:54",
        CONVERT,
    ),
    ("CONVERT(varchar(30), CAST('2006-12-30' AS date), 112)", "20061230", CONVERT),
    ("CONVERT(varchar(30), CAST('2006-12-30' AS date), 101)", "12/30/2006", CONVERT),
    ("CONVERT(varchar(30), CAST('2006-12-30' AS date), 103)", "30/12/2006", CONVERT),
    ("CONVERT(varchar(30), CAST('2006-12-30' AS date), 23)", "2006-12-30", CONVERT),
    ("CONVERT(varchar(20), 0x4E616D65, 1)", "0x4E616D65", CONVERT),
    ("CONVERT(varchar(20), 0x4E616D65, 2)", "4E616D65", CONVERT),
    ("CONVERT(varbinary(4), '0x4E616D65', 1)", b"Name", CONVERT),
    ("CONVERT(varchar(4), 0x4E616D65, 0)", "Name", CONVERT),
    # the empty binary constant
    ("DATALENGTH(0x)", 0, CONSTANTS),
    ("0x", b"", CONSTANTS),
    # strings with characters beyond the BMP (a non-SC collation counts UTF-16 code units)
    ("LEN(N'a\U0001f600b')", 4, LEN),
    ("DATALENGTH(N'a\U0001f600b')", 8, DATALENGTH),
    ("LEN('abc   ')", 3, LEN),
    ("DATALENGTH('abc   ')", 6, DATALENGTH),
    ("CAST(N'x\U0001f600' AS nvarchar(3))", "x\U0001f600", NCHAR),
    ("UPPER(N'stra\u00dfe \U0001f600')", "STRA\u00dfE \U0001f600", NCHAR),
    ("LEFT(N'\U0001f600x', 2)", "\U0001f600", LEN),
    ("SUBSTRING(N'a\U0001f600b', 4, 1)", "b", LEN),
    ("RIGHT(N'a\U0001f600', 2)", "\U0001f600", LEN),
    # NULL semantics
    (_bool("NULL = NULL"), None, NULLS),
    (_bool("1 IN (2, NULL)"), None, NULLS),
    (_bool("1 NOT IN (2, NULL)"), None, NULLS),
    (_bool("NULL IS NULL"), 1, NULLS),
    ("CONCAT('a', NULL, 'b')", "ab", CONCAT),
    ("'a' + NULL", None, NULLS),
    ("ISNULL(NULL, 'x')", "x", ISNULL),
]


@pytest.fixture(scope="module")
def cursor(sqlserver_simulator_session: Any) -> Iterator[Any]:
    if "FreeTDS" not in pyodbc.drivers():
        pytest.skip("the FreeTDS ODBC driver is not installed (Debian package tdsodbc)")
    conn = pyodbc.connect(sqlserver_simulator_session.odbc_connection_string(), autocommit=True, timeout=10)
    yield conn.cursor()
    conn.close()


@pytest.mark.parametrize(("expression", "expected", "page"), CASES, ids=[c[0][:70] for c in CASES])
def test_expression_matches_documented_answer(cursor: Any, expression: str, expected: Any, page: str) -> None:
    cursor.execute(f"SELECT {expression}")
    value = cursor.fetchone()[0]
    assert value == expected, f"{expression} -> {value!r}, {page} documents {expected!r}"
    if isinstance(expected, Decimal):
        assert str(value) == str(expected), f"{expression}: scale differs from {page}"
