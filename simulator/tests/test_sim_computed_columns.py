"""Computed columns (issue 36, item 3), each checked against the Microsoft page it follows.

Through pyodbc and pymssql (and a real SQL Server when ``SQLSERVER_CDC_TEST_ODBC`` is set). The
pages are in the repository MicrosoftDocs/sql-docs; each test names its page by path under ``docs/``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pymssql
import pyodbc
import pytest

DRIVER_ERRORS = (pyodbc.Error, pymssql.Error)

PRODUCTS = (
    "CREATE TABLE dbo.Products (ProductID int IDENTITY (1,1) NOT NULL, QtyAvailable smallint, "
    "UnitPrice money, InventoryValue AS QtyAvailable * UnitPrice)"
)


def _rows(cur: Any, sql: str) -> list[tuple[Any, ...]]:
    cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


def _refused(cur: Any, sql: str, error_number: Any) -> tuple[int | None, str]:
    with pytest.raises(DRIVER_ERRORS) as err:
        cur.execute(sql)
    return error_number(err.value), str(err.value)


def test_the_documented_example_computes_on_insert_and_update(cursor_after: Any) -> None:
    """Follows relational-databases/tables/specify-computed-columns-in-a-table.md, "Use Transact-SQL".

    The example table: ``InventoryValue AS QtyAvailable * UnitPrice`` holds the product after the
    INSERT and the new product after the UPDATE; its type is money ("the data type with the higher
    precedence").
    """
    cur = cursor_after(
        PRODUCTS, "INSERT INTO dbo.Products (QtyAvailable, UnitPrice) VALUES (25, 2.00), (10, 1.5)"
    )
    assert _rows(cur, "SELECT ProductID, QtyAvailable, UnitPrice, InventoryValue FROM dbo.Products") == [
        (1, 25, Decimal("2.0000"), Decimal("50.0000")),
        (2, 10, Decimal("1.5000"), Decimal("15.0000")),
    ]
    cur.execute("UPDATE dbo.Products SET UnitPrice = 2.5 WHERE ProductID = 1")
    assert _rows(cur, "SELECT ProductID, InventoryValue FROM dbo.Products ORDER BY ProductID") == [
        (1, Decimal("62.5000")),
        (2, Decimal("15.0000")),
    ]
    assert _rows(
        cur,
        "SELECT TYPE_NAME(system_type_id) FROM sys.columns "
        "WHERE object_id = OBJECT_ID('dbo.Products') AND name = 'InventoryValue'",
    ) == [("money",)]


def test_alter_table_add_computes_existing_rows_persisted_or_not(cursor_after: Any) -> None:
    """Follows relational-databases/tables/specify-computed-columns-in-a-table.md, "To add a new computed
    column to an existing table", and t-sql/statements/alter-table-computed-column-definition-transact-sql.md
    (PERSISTED: "physically store the computed values ... and update the values when any other columns
    on which the computed column depends are updated").
    """
    cur = cursor_after(
        PRODUCTS,
        "INSERT INTO dbo.Products (QtyAvailable, UnitPrice) VALUES (25, 2.00), (10, 1.5)",
        "ALTER TABLE dbo.Products ADD RetailValue AS (QtyAvailable * UnitPrice * 1.5) PERSISTED",
        "ALTER TABLE dbo.Products ADD Doubled AS (QtyAvailable * 2)",
    )
    assert _rows(cur, "SELECT RetailValue, Doubled FROM dbo.Products ORDER BY ProductID") == [
        (Decimal("75.000000"), 50),
        (Decimal("22.500000"), 20),
    ]
    cur.execute("UPDATE dbo.Products SET QtyAvailable = 1 WHERE ProductID = 2")
    assert _rows(cur, "SELECT RetailValue, Doubled FROM dbo.Products WHERE ProductID = 2") == [
        (Decimal("2.250000"), 2)
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO dbo.Products (QtyAvailable, UnitPrice, InventoryValue) VALUES (1, 1, 1)",
        "UPDATE dbo.Products SET InventoryValue = 0",
    ],
)
def test_a_computed_column_is_not_an_insert_or_update_target(
    cursor_after: Any, error_number: Any, sql: str
) -> None:
    """Follows relational-databases/tables/specify-computed-columns-in-a-table.md, "Limitations and
    Restrictions": "A computed column cannot be the target of an INSERT or UPDATE statement" (Msg 271).
    """
    cur = cursor_after(PRODUCTS, "INSERT INTO dbo.Products (QtyAvailable, UnitPrice) VALUES (1, 1)")
    number, text = _refused(cur, sql, error_number)
    assert number == 271
    assert "InventoryValue" in text and "computed column" in text


def test_insert_without_a_column_list_skips_the_computed_column(cursor_after: Any) -> None:
    """The VALUES list gives the columns that are neither identity nor computed."""
    cur = cursor_after(PRODUCTS, "INSERT INTO dbo.Products VALUES (3, 4)")
    assert _rows(cur, "SELECT QtyAvailable, UnitPrice, InventoryValue FROM dbo.Products") == [
        (3, Decimal("4.0000"), Decimal("12.0000"))
    ]


def test_catalog_shows_computed_columns(cursor_after: Any) -> None:
    """Follows relational-databases/system-catalog-views/sys-computed-columns-transact-sql.md: a row for
    each computed column of sys.columns, is_computed always 1, with ``definition`` and ``is_persisted``;
    and COLUMNPROPERTY(..., 'IsComputed') (t-sql/functions/columnproperty-transact-sql.md).
    """
    cur = cursor_after(
        PRODUCTS, "ALTER TABLE dbo.Products ADD RetailValue AS (QtyAvailable * UnitPrice * 1.5) PERSISTED"
    )
    assert _rows(
        cur,
        "SELECT name, is_computed FROM sys.columns WHERE object_id = OBJECT_ID('dbo.Products') ORDER BY column_id",
    ) == [("ProductID", 0), ("QtyAvailable", 0), ("UnitPrice", 0), ("InventoryValue", 1), ("RetailValue", 1)]
    rows = _rows(
        cur,
        "SELECT name, is_computed, is_persisted, definition FROM sys.computed_columns "
        "WHERE object_id = OBJECT_ID('dbo.Products') ORDER BY column_id",
    )
    assert [r[:3] for r in rows] == [("InventoryValue", 1, 0), ("RetailValue", 1, 1)]
    assert all(r[3].startswith("(") and "QtyAvailable" in r[3] and "UnitPrice" in r[3] for r in rows)
    assert _rows(
        cur,
        "SELECT COLUMNPROPERTY(OBJECT_ID('dbo.Products'), 'InventoryValue', 'IsComputed'), "
        "COLUMNPROPERTY(OBJECT_ID('dbo.Products'), 'UnitPrice', 'IsComputed')",
    ) == [(1, 0)]


@pytest.mark.parametrize(
    ("sql", "number"),
    [
        # "computed column a + DATEPART(dd, GETDATE()) ... the value might change": not deterministic
        ("CREATE TABLE dbo.t (a int, b AS (a + DATEPART(dd, GETDATE())) PERSISTED)", 4936),
        # "NOT NULL can be specified for computed columns only if PERSISTED is also specified"
        ("CREATE TABLE dbo.t (a int, b AS (a + 1) NOT NULL)", 8183),
        # "a noncomputed column name, constant, function, variable": another computed column is not one
        ("CREATE TABLE dbo.t (a int, b AS (a + 1), c AS (b + 1))", 1759),
        # "The expression cannot be a search condition, subquery"
        ("CREATE TABLE dbo.t (a int, b AS ((SELECT 1)))", 1046),
        # a primary key needs a persisted, non-nullable computed column
        ("CREATE TABLE dbo.t (a int NOT NULL, b AS (a * 2) PRIMARY KEY)", 1711),
    ],
)
def test_definitions_the_documentation_refuses(
    cursor_after: Any, error_number: Any, sql: str, number: int
) -> None:
    """Follows t-sql/statements/alter-table-computed-column-definition-transact-sql.md, "Arguments"."""
    cur = cursor_after()
    assert _refused(cur, sql, error_number)[0] == number


def test_a_persisted_not_null_computed_column_can_be_the_primary_key(cursor_after: Any) -> None:
    """Follows t-sql/statements/alter-table-computed-column-definition-transact-sql.md: a deterministic
    computed column "can be used as a key column in an index or as part of any PRIMARY KEY"; PERSISTED
    NOT NULL makes it non-nullable. A duplicate computed key is a duplicate key (2627).
    """
    cur = cursor_after(
        "CREATE TABLE dbo.t (a int NOT NULL, b AS (a * 2) PERSISTED NOT NULL PRIMARY KEY)",
        "INSERT INTO dbo.t (a) VALUES (1), (2)",
    )
    assert _rows(cur, "SELECT a, b FROM dbo.t ORDER BY b") == [(1, 2), (2, 4)]
    with pytest.raises(DRIVER_ERRORS) as err:
        cur.execute("INSERT INTO dbo.t (a) VALUES (1)")
    assert "2627" in str(err.value) or (isinstance(err.value, pymssql.Error) and err.value.args[0] == 2627)


@pytest.mark.parametrize(
    "sql",
    ["ALTER TABLE dbo.Products DROP COLUMN UnitPrice", "ALTER TABLE dbo.Products ALTER COLUMN UnitPrice int"],
)
def test_a_column_a_computed_column_reads_cannot_be_dropped_or_altered(
    cursor_after: Any, error_number: Any, sql: str
) -> None:
    """Dropping or altering a column that a computed column reads fails with Msg 5074 naming the computed one."""
    cur = cursor_after(PRODUCTS)
    number, text = _refused(cur, sql, error_number)
    assert number == 5074 and "InventoryValue" in text


def test_nullability_follows_the_expression(cursor_after: Any) -> None:
    """Follows t-sql/statements/create-table-transact-sql.md, computed_column_expression: "The result of
    most expressions is considered nullable even if only nonnullable columns are present"; "ISNULL with
    the check_expression constant" makes it nonnullable (COLUMNPROPERTY AllowsNull shows it).
    """
    cur = cursor_after(
        "CREATE TABLE dbo.t (a int NOT NULL, sum_ AS (a + 1), kept AS ISNULL(a + 1, 0), "
        "sure AS (a * 2) PERSISTED NOT NULL)"
    )
    assert _rows(
        cur,
        "SELECT name, is_nullable, COLUMNPROPERTY(object_id, name, 'AllowsNull') FROM sys.columns "
        "WHERE object_id = OBJECT_ID('dbo.t') ORDER BY column_id",
    ) == [("a", 0, 0), ("sum_", 1, 1), ("kept", 0, 0), ("sure", 0, 0)]
