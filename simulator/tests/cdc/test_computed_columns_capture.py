"""CDC of a table with computed columns (issue 36, item 3), against the Microsoft pages it follows.

relational-databases/track-changes/track-data-changes-sql-server.md, "Data Type Considerations for
Change Data Capture": "Computed Columns | No | Changes to computed columns are not tracked. The column
will appear in the change table with the appropriate type, but will have a value of NULL."
relational-databases/system-tables/cdc-captured-columns-transact-sql.md: ``is_computed`` "Indicates
that the captured column is a computed column in the source table."
Through pyodbc + FreeTDS (and a SQL Server when ``SQLSERVER_CDC_TEST_ODBC`` is set).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

TABLE = (
    "CREATE TABLE dbo.lines (id int NOT NULL PRIMARY KEY, qty smallint NULL, price money NULL, "
    "total AS (qty * price), total_kept AS (qty * price) PERSISTED)"
)


@pytest.fixture
def lines(cdc_db):
    cdc_db.track(TABLE, "lines")
    return cdc_db


def test_computed_columns_are_captured_as_null_with_their_type(lines):
    """The change table has both computed columns, typed, and NULL in every change row (persisted or not);
    a plain SELECT of the source table sees their values."""
    lines.run(
        "INSERT INTO dbo.lines (id, qty, price) VALUES (1, 2, 3.50), (2, 1, 10)",
        "UPDATE dbo.lines SET qty = 4 WHERE id = 1",
        "DELETE FROM dbo.lines WHERE id = 2",
    )
    lines.capture()
    rows = lines.rows(
        "SELECT __$operation, id, qty, price, total, total_kept FROM cdc.dbo_lines_CT ORDER BY __$start_lsn, __$seqval, __$operation"
    )
    assert rows == [
        (2, 1, 2, Decimal("3.5000"), None, None),
        (2, 2, 1, Decimal("10.0000"), None, None),
        (3, 1, 2, Decimal("3.5000"), None, None),
        (4, 1, 4, Decimal("3.5000"), None, None),
        (1, 2, 1, Decimal("10.0000"), None, None),
    ]
    assert lines.rows(
        "SELECT name, TYPE_NAME(system_type_id) FROM sys.columns WHERE object_id = OBJECT_ID('cdc.dbo_lines_CT') "
        "AND name IN ('total', 'total_kept') ORDER BY name"
    ) == [("total", "money"), ("total_kept", "money")]
    assert lines.rows("SELECT id, total, total_kept FROM dbo.lines") == [
        (1, Decimal("14.0000"), Decimal("14.0000"))
    ]


def test_captured_columns_mark_the_computed_ones(lines):
    """cdc.captured_columns lists the computed columns with is_computed = 1."""
    assert lines.rows(
        "SELECT column_name, column_ordinal, is_computed FROM cdc.captured_columns ORDER BY column_ordinal"
    ) == [("id", 1, 0), ("qty", 2, 0), ("price", 3, 0), ("total", 4, 1), ("total_kept", 5, 1)]


def test_all_changes_function_returns_null_for_computed_columns(lines):
    """cdc.fn_cdc_get_all_changes_<capture_instance> reads the change table: the computed values are NULL."""
    lines.run("INSERT INTO dbo.lines (id, qty, price) VALUES (7, 3, 2)")
    lines.capture()
    rows = lines.rows(
        "DECLARE @from binary(10) = sys.fn_cdc_get_min_lsn('dbo_lines'), @to binary(10) = sys.fn_cdc_get_max_lsn(); "
        "SELECT id, qty, total, total_kept FROM cdc.fn_cdc_get_all_changes_dbo_lines(@from, @to, N'all')"
    )
    assert rows == [(7, 3, None, None)]
