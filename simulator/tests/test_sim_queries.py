"""Query forms and catalog views, checked against what SQL Server returns (runs on a real server too)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest


@pytest.fixture
def cur(cursor_after: Any) -> Any:
    return cursor_after(
        "CREATE TABLE dbo.a (id int PRIMARY KEY, g varchar(5))",
        "CREATE TABLE dbo.b (id int PRIMARY KEY, a_id int, v int)",
        "INSERT INTO dbo.a VALUES (1, 'x'), (2, 'y'), (3, 'x')",
        "INSERT INTO dbo.b VALUES (10, 1, 5), (11, 1, 6), (12, 4, 7)",
    )


def _rows(cur: Any, sql: str) -> list[tuple[Any, ...]]:
    cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT a.id, b.id FROM dbo.a RIGHT JOIN dbo.b ON b.a_id = a.id ORDER BY b.id",
            [(1, 10), (1, 11), (None, 12)],
        ),
        (
            "SELECT a.id, b.id FROM dbo.a FULL JOIN dbo.b ON b.a_id = a.id ORDER BY a.id, b.id",
            [(None, 12), (1, 10), (1, 11), (2, None), (3, None)],
        ),
        ("SELECT COUNT(*) FROM dbo.a CROSS JOIN dbo.b", [(9,)]),
        ("SELECT id FROM dbo.a ORDER BY id OFFSET 1 ROWS FETCH NEXT 1 ROWS ONLY", [(2,)]),
        ("SELECT id FROM dbo.a UNION SELECT a_id FROM dbo.b ORDER BY id", [(1,), (2,), (3,), (4,)]),
        ("SELECT g FROM dbo.a UNION ALL SELECT g FROM dbo.a ORDER BY g", [("x",)] * 4 + [("y",)] * 2),
        ("SELECT id FROM dbo.a EXCEPT SELECT a_id FROM dbo.b ORDER BY id", [(2,), (3,)]),
        ("SELECT id FROM dbo.a INTERSECT SELECT a_id FROM dbo.b", [(1,)]),
        (
            "SELECT id, (SELECT COUNT(*) FROM dbo.b WHERE b.a_id = a.id) AS n FROM dbo.a ORDER BY id",
            [(1, 2), (2, 0), (3, 0)],
        ),
        ("SELECT id FROM dbo.a WHERE EXISTS (SELECT 1 FROM dbo.b WHERE b.a_id = a.id)", [(1,)]),
        ("SELECT id FROM dbo.a WHERE id NOT IN (SELECT a_id FROM dbo.b) ORDER BY id", [(2,), (3,)]),
        ("SELECT g, COUNT(*) FROM dbo.a GROUP BY g HAVING COUNT(*) > 1", [("x", 2)]),
        ("SELECT DISTINCT g FROM dbo.a ORDER BY g", [("x",), ("y",)]),
        ("SELECT TOP 50 PERCENT id FROM dbo.a ORDER BY id", [(1,), (2,)]),
        (
            "WITH big (n) AS (SELECT id FROM dbo.a WHERE id > 1) SELECT n * 10 FROM big ORDER BY n",
            [(20,), (30,)],
        ),
        ("SELECT x.id FROM (SELECT id, g FROM dbo.a WHERE g = 'x') AS x ORDER BY x.id DESC", [(3,), (1,)]),
        ("SELECT MAX(id), MIN(g), AVG(id), SUM(id) FROM dbo.a WHERE 1 = 0", [(None, None, None, None)]),
        ("SELECT AVG(v), AVG(CAST(v AS decimal(5,2))) FROM dbo.b", [(6, Decimal("6.000000"))]),
        (
            "SELECT id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY id DESC) AS rn, RANK() OVER (ORDER BY g), "
            "DENSE_RANK() OVER (ORDER BY g) FROM dbo.a ORDER BY id",
            [(1, 2, 1, 1), (2, 1, 3, 2), (3, 1, 1, 1)],
        ),
        (
            "SELECT id, SUM(v) OVER (PARTITION BY a_id), COUNT(*) OVER (), SUM(v) OVER (ORDER BY id) FROM dbo.b ORDER BY id",
            [(10, 11, 3, 5), (11, 11, 3, 11), (12, 7, 3, 18)],
        ),
    ],
)
def test_query_forms(cur: Any, sql: str, expected: list[tuple[Any, ...]]) -> None:
    assert _rows(cur, sql) == expected


@pytest.fixture
def sort_cur(cur: Any) -> Any:
    cur.execute("CREATE TABLE dbo.s (id int PRIMARY KEY, name varchar(10) NULL, n int NULL)")
    cur.execute(
        "INSERT INTO dbo.s VALUES (1, 'b', 2), (2, 'B  ', NULL), (3, 'a', 1), (4, NULL, 2), (5, 'A', NULL), "
        "(6, 'c', 1)"
    )
    return cur


@pytest.mark.parametrize(
    ("sql", "expected_ids"),
    [
        # NULL first ascending; 'a' = 'A' and 'b' = 'B  ' (case- and trailing-space-insensitive)
        ("SELECT id FROM dbo.s ORDER BY name, id DESC", [4, 5, 3, 2, 1, 6]),
        # NULL last descending; DESC and ASC keys mixed
        ("SELECT id FROM dbo.s ORDER BY name DESC, id", [6, 1, 2, 3, 5, 4]),
        ("SELECT id FROM dbo.s ORDER BY n DESC, name, id DESC", [4, 1, 3, 6, 5, 2]),
        ("SELECT id, n FROM dbo.s ORDER BY 2, 1 DESC", [5, 2, 6, 3, 4, 1]),
        # a computed result column as key (the engine sorts result rows, not source rows)
        ("SELECT id, UPPER(name) AS u FROM dbo.s ORDER BY u DESC, id", [6, 1, 2, 3, 5, 4]),
        # keys outside the select list, and an expression key
        ("SELECT id FROM dbo.s ORDER BY UPPER(name) DESC, n, id", [6, 2, 1, 5, 3, 4]),
        ("SELECT id FROM dbo.s ORDER BY ISNULL(n, 0) + id DESC", [6, 4, 5, 3, 1, 2]),
        ("SELECT id FROM dbo.s ORDER BY name, id DESC OFFSET 2 ROWS FETCH NEXT 3 ROWS ONLY", [3, 2, 1]),
        ("SELECT TOP 2 id FROM dbo.s ORDER BY n, id DESC", [5, 2]),
        ("SELECT id FROM dbo.s UNION ALL SELECT id FROM dbo.a ORDER BY id DESC", [6, 5, 4, 3, 3, 2, 2, 1, 1]),
        (
            "SELECT id FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY n DESC, name, id DESC) AS rn FROM dbo.s) AS x "
            "ORDER BY rn",
            [4, 1, 3, 6, 5, 2],
        ),
    ],
)
def test_order_by_semantics(sort_cur: Any, sql: str, expected_ids: list[int]) -> None:
    assert [r[0] for r in _rows(sort_cur, sql)] == expected_ids


def test_order_by_distinct_strings_keeps_one_per_collation_group(sort_cur: Any) -> None:
    rows = _rows(sort_cur, "SELECT DISTINCT UPPER(RTRIM(name)) FROM dbo.s ORDER BY 1 DESC")
    assert rows == [("C",), ("B",), ("A",), (None,)]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("5 / 2", 2),
        ("-7 / 2", -3),
        ("7 % 3", 1),
        ("5.0 / 2", Decimal("2.500000")),
        ("1.5 * 2", Decimal("3.0")),
        ("CAST(10 AS money) / 3", Decimal("3.3333")),
        ("'a' + NULL", None),
        ("CONCAT('a', NULL, 1)", "a1"),
        ("N'x' + 'y'", "xy"),
        ("LEFT('abc', 2) + RIGHT(N'abc', 2)", "abbc"),
        ("REPLACE('aXa', 'x', 'y')", "aya"),
        ("LEN('ab  ')", 2),
        ("DATALENGTH(N'ab')", 4),
        ("SUBSTRING('abcdef', 2, 3)", "bcd"),
        ("CHARINDEX('c', 'abcabc')", 3),
        ("UPPER(LTRIM(RTRIM('  ab  ')))", "AB"),
        ("ISNULL(NULL, 'z')", "z"),
        ("COALESCE(NULL, NULL, 3)", 3),
        ("NULLIF(1, 1)", None),
        ("IIF(2 > 1, 'yes', 'no')", "yes"),
        ("CASE WHEN 1 = 0 THEN 'a' END", None),
        ("CAST(2.5 AS int)", 2),
        ("CAST(-2.5 AS int)", -2),
        ("CAST(3.14159 AS decimal(5,2))", Decimal("3.14")),
        ("ROUND(2.567, 2)", Decimal("2.570")),
        ("CAST('12' AS int) + 1", 13),
        ("TRY_CAST('x' AS int)", None),
        ("TRY_CONVERT(int, '12')", 12),
        ("DATEDIFF(day, '2024-01-01', '2024-03-01')", 60),
        ("DATEPART(weekday, CAST('2024-01-07' AS date))", 1),
        ("CONVERT(varchar(10), DATEADD(month, 1, CAST('2024-01-31' AS date)), 23)", "2024-02-29"),
        ("CONVERT(varchar(10), EOMONTH(CAST('2024-02-10' AS date)), 112)", "20240229"),
        ("CONVERT(varchar(30), CAST('2024-01-02 13:04:05.123' AS datetime), 0)", "Jan  2 2024  1:04PM"),
        ("CONVERT(varchar(30), CAST('2024-01-02 13:04:05.123' AS datetime), 126)", "2024-01-02T13:04:05.123"),
        ("CONVERT(varchar(23), CAST('2024-01-02 03:04:05.997' AS datetime), 121)", "2024-01-02 03:04:05.997"),
        (
            "CONVERT(varchar(40), CAST('2024-01-01 10:00:00' AS datetime2(0)) AT TIME ZONE 'Central European Standard Time', 121)",
            None,
        ),
        # default text forms of the date / time types (a target that exactly fits, and max)
        (
            "CAST(CAST('2024-01-02 03:04:05.1234567' AS datetime2) AS varchar(40))",
            "2024-01-02 03:04:05.1234567",
        ),
        ("CAST(CAST('2024-01-02 03:04:05.125' AS datetime2(3)) AS varchar(23))", "2024-01-02 03:04:05.125"),
        ("CAST(CAST('0001-01-01 00:00:00' AS datetime2(0)) AS nvarchar(19))", "0001-01-01 00:00:00"),
        ("CAST(CAST('9999-12-31' AS date) AS nvarchar(max))", "9999-12-31"),
        ("CAST(CAST('23:59:58.12' AS time(2)) AS varchar(11))", "23:59:58.12"),
        ("CAST(CAST('07:08:09' AS time(0)) AS varchar(8))", "07:08:09"),
        (
            "CAST(CAST('2024-01-02 03:04:05.125 -05:30' AS datetimeoffset(4)) AS varchar(40))",
            "2024-01-02 03:04:05.1250 -05:30",
        ),
        ("CAST(CAST(NULL AS datetime2) AS varchar(40))", None),
        ("CONVERT(varchar(20), CAST(0x0A0B AS varbinary(2)), 1)", "0x0A0B"),
        (
            "CAST(CAST('6F9619FF-8B86-D011-B42D-00C04FC964FF' AS uniqueidentifier) AS char(36))",
            "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        ),
        ("QUOTENAME('a]b')", "[a]]b]"),
        ("CAST(1 AS bit) + 1", 2),
    ],
)
def test_expressions(cur: Any, sql_backend: Any, expression: str, expected: Any) -> None:
    if "AT TIME ZONE" in expression:
        if sql_backend.is_simulator:
            pytest.skip("Windows time zone names are not supported by the simulator (IANA names are)")
        return
    assert _rows(cur, f"SELECT {expression}") == [(expected,)]


def test_at_time_zone_with_iana_names_on_the_simulator(sqlserver_simulator: Any) -> None:
    conn = sqlserver_simulator.connect()
    row = conn.execute(
        "SELECT CONVERT(varchar(40), CAST('2024-01-01 10:00:00' AS datetime2(0)) AT TIME ZONE 'Europe/Berlin', 121), "
        "CONVERT(varchar(40), CAST('2024-07-01 10:00:00 +00:00' AS datetimeoffset(0)) AT TIME ZONE 'Europe/Berlin', 121)"
    ).fetchone()
    assert tuple(row) == ("2024-01-01 10:00:00 +01:00", "2024-07-01 12:00:00 +02:00")


def test_catalog_views_reflect_declared_types_and_keys(connect: Any, sql_backend: Any) -> None:
    conn = connect()
    cur = conn.cursor()
    cur.execute(
        "CREATE TABLE dbo.orders (order_id int NOT NULL, line smallint NOT NULL, name nvarchar(40) NULL, "
        "price decimal(12,3) NOT NULL, at datetime2(3) NULL, code char(4) NULL, blob varbinary(max) NULL, "
        "CONSTRAINT pk_orders PRIMARY KEY (order_id, line), CONSTRAINT uq_code UNIQUE (code))"
    )
    cols = _rows(
        cur,
        "SELECT c.name, t.name, c.max_length, c.precision, c.scale, c.is_nullable FROM sys.columns c "
        "JOIN sys.types t ON t.user_type_id = c.user_type_id WHERE c.object_id = OBJECT_ID('dbo.orders') ORDER BY c.column_id",
    )
    assert cols == [
        ("order_id", "int", 4, 10, 0, False),
        ("line", "smallint", 2, 5, 0, False),
        ("name", "nvarchar", 80, 0, 0, True),
        ("price", "decimal", 9, 12, 3, False),
        ("at", "datetime2", 7, 23, 3, True),
        ("code", "char", 4, 0, 0, True),
        ("blob", "varbinary", -1, 0, 0, True),
    ]
    pk = _rows(
        cur,
        "SELECT i.name, c.name, ic.key_ordinal FROM sys.indexes i "
        "JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id "
        "JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id "
        "JOIN sys.tables t ON t.object_id = i.object_id JOIN sys.schemas s ON s.schema_id = t.schema_id "
        "WHERE i.is_primary_key = 1 AND s.name = 'dbo' AND t.name = 'orders' ORDER BY ic.key_ordinal",
    )
    assert pk == [("pk_orders", "order_id", 1), ("pk_orders", "line", 2)]
    info = _rows(
        cur,
        "SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, IS_NULLABLE "
        "FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'orders' ORDER BY ORDINAL_POSITION",
    )
    assert info[2] == ("name", "nvarchar", 40, None, None, None, "YES")
    assert info[3] == ("price", "decimal", None, 12, 3, None, "NO")
    assert info[4] == ("at", "datetime2", None, None, None, 3, "YES")
    assert info[6] == ("blob", "varbinary", -1, None, None, None, "YES")
    constraints = _rows(
        cur,
        "SELECT tc.CONSTRAINT_NAME, tc.CONSTRAINT_TYPE, k.COLUMN_NAME, k.ORDINAL_POSITION "
        "FROM INFORMATION_SCHEMA.TABLE_CONSTRAINTS tc JOIN INFORMATION_SCHEMA.KEY_COLUMN_USAGE k "
        "ON k.CONSTRAINT_NAME = tc.CONSTRAINT_NAME WHERE tc.TABLE_NAME = 'orders' ORDER BY tc.CONSTRAINT_NAME, k.ORDINAL_POSITION",
    )
    assert constraints == [
        ("pk_orders", "PRIMARY KEY", "order_id", 1),
        ("pk_orders", "PRIMARY KEY", "line", 2),
        ("uq_code", "UNIQUE", "code", 1),
    ]
    db = _rows(
        cur,
        f"SELECT name, snapshot_isolation_state, is_cdc_enabled FROM sys.databases WHERE name = '{sql_backend.database}'",
    )
    assert db == [(sql_backend.database, 1, False)]
    tables = _rows(
        cur,
        "SELECT s.name, t.name, t.is_tracked_by_cdc FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id",
    )
    assert tables == [("dbo", "orders", False)]
