"""
Change Tracking as the examples and tables of Microsoft's documentation use it.

- docs/relational-databases/track-changes/work-with-change-tracking-sql-server.md: the initial
  synchronization with CROSS APPLY CHANGETABLE(VERSION ...) and correlated references, the conflict
  detection UPDATE ... FROM ... AS P with a CHANGETABLE(VERSION ...) subquery, WITH CHANGE_TRACKING_CONTEXT
  and SYS_CHANGE_CONTEXT.
- docs/relational-databases/system-functions/with-change-tracking-context-transact-sql.md.
- docs/relational-databases/track-changes/manage-change-tracking-sql-server.md: ALTER TABLE DROP CONSTRAINT of
  the primary key fails while change tracking is enabled (error 3735 of the database engine's error list).
"""

from __future__ import annotations

import re
from typing import Any

import pyodbc
import pytest


@pytest.fixture
def cur(sqlserver_simulator: Any) -> Any:
    sqlserver_simulator.execute("CREATE DATABASE ctdocs")
    sqlserver_simulator.execute("ALTER DATABASE ctdocs SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS)")
    cursor = sqlserver_simulator.connect("ctdocs").cursor()
    cursor.execute(
        "CREATE TABLE dbo.Product (ProductID int NOT NULL CONSTRAINT PK_Product PRIMARY KEY, "
        "Name nvarchar(50) NULL, ListPrice money NULL)"
    )
    cursor.execute("INSERT INTO dbo.Product VALUES (1, N'bolt', 1.00), (2, N'nut', 2.00)")
    cursor.execute("ALTER TABLE dbo.Product ENABLE CHANGE_TRACKING")
    cursor.execute("INSERT INTO dbo.Product VALUES (3, N'washer', 3.00)")
    return cursor


def _number(error: pyodbc.Error) -> int:
    found = re.search(r"\((\d+)\)", str(error))
    return int(found.group(1)) if found else -1


def test_initial_synchronization_with_cross_apply_changetable_version(cur: Any) -> None:
    """Every row, with the version of its last change (NULL for rows not changed since tracking began)."""
    rows = cur.execute(
        "SELECT P.ProductID, P.Name, CT.SYS_CHANGE_CONTEXT, CT.SYS_CHANGE_VERSION FROM dbo.Product AS P "
        "CROSS APPLY CHANGETABLE(VERSION dbo.Product, (ProductID), (P.ProductID)) AS CT ORDER BY P.ProductID"
    ).fetchall()
    assert [tuple(r) for r in rows] == [
        (1, "bolt", None, None),
        (2, "nut", None, None),
        (3, "washer", None, 1),
    ]


def test_outer_apply_keeps_every_left_row(cur: Any) -> None:
    rows = cur.execute(
        "SELECT P.ProductID, CT.SYS_CHANGE_VERSION FROM dbo.Product AS P "
        "OUTER APPLY CHANGETABLE(VERSION dbo.Product, (ProductID), (P.ProductID)) AS CT ORDER BY P.ProductID"
    ).fetchall()
    assert [tuple(r) for r in rows] == [(1, None), (2, None), (3, 1)]


def test_conflict_detection_update_with_a_correlated_changetable_version(cur: Any) -> None:
    """The documented pattern: update only when the row has not changed since the client's last sync."""
    update = (
        "UPDATE dbo.Product SET ListPrice = ? FROM dbo.Product AS P WHERE ProductID = ? AND "
        "? >= ISNULL((SELECT CT.SYS_CHANGE_VERSION FROM CHANGETABLE(VERSION dbo.Product, (ProductID), "
        "(P.ProductID)) AS CT), 0)"
    )
    cur.execute(update, 9, 3, 0)  # last sync 0 < version 1 of product 3: a conflict, nothing updated
    assert cur.rowcount == 0
    cur.execute(update, 9, 3, 1)  # synced at 1: no conflict
    assert cur.rowcount == 1
    prices = dict(cur.execute("SELECT ProductID, ListPrice FROM dbo.Product").fetchall())
    assert {k: float(v) for k, v in prices.items()} == {1: 1.0, 2: 2.0, 3: 9.0}


def test_change_tracking_context_is_returned_as_sys_change_context(cur: Any) -> None:
    cur.execute(
        "DECLARE @originator_id varbinary(128); SET @originator_id = CAST('MyApplicationID' AS varbinary(128)); "
        "WITH CHANGE_TRACKING_CONTEXT (@originator_id) UPDATE dbo.Product SET ListPrice = 5 WHERE ProductID = 1"
    )
    cur.execute("WITH CHANGE_TRACKING_CONTEXT (0x0102) INSERT INTO dbo.Product VALUES (4, N'pin', 4.00)")
    cur.execute("UPDATE dbo.Product SET ListPrice = 6 WHERE ProductID = 2")
    changes = cur.execute(
        "SELECT CT.ProductID, CT.SYS_CHANGE_CONTEXT FROM CHANGETABLE(CHANGES dbo.Product, 0) AS CT ORDER BY 1"
    ).fetchall()
    assert [tuple(r) for r in changes] == [(1, b"MyApplicationID"), (2, None), (3, None), (4, b"\x01\x02")]
    version = cur.execute(
        "SELECT CT.SYS_CHANGE_CONTEXT FROM CHANGETABLE(VERSION dbo.Product, (ProductID), (1)) AS CT"
    ).fetchone()
    assert version[0] == b"MyApplicationID"


def test_context_of_a_rolled_back_statement_is_not_kept(cur: Any) -> None:
    cur.execute("BEGIN TRANSACTION")
    cur.execute(
        "WITH CHANGE_TRACKING_CONTEXT (0x07) UPDATE dbo.Product SET ListPrice = 5 WHERE ProductID = 1"
    )
    cur.execute("ROLLBACK TRANSACTION")
    cur.execute("UPDATE dbo.Product SET ListPrice = 5 WHERE ProductID = 1")
    context = cur.execute(
        "SELECT CT.SYS_CHANGE_CONTEXT FROM CHANGETABLE(CHANGES dbo.Product, 0) AS CT WHERE CT.ProductID = 1"
    ).fetchone()
    assert context[0] is None


def test_dropping_the_primary_key_of_a_tracked_table_is_refused(cur: Any) -> None:
    with pytest.raises(pyodbc.Error) as excinfo:
        cur.execute("ALTER TABLE dbo.Product DROP CONSTRAINT PK_Product")
    assert _number(excinfo.value) == 3735
    assert (
        cur.execute("SELECT COUNT(*) FROM sys.key_constraints WHERE name = 'PK_Product'").fetchone()[0] == 1
    )
    cur.execute("ALTER TABLE dbo.Product DISABLE CHANGE_TRACKING")
    cur.execute("ALTER TABLE dbo.Product DROP CONSTRAINT PK_Product")  # allowed once tracking is off


def test_merge_stays_refused_naming_the_feature(cur: Any) -> None:
    """MERGE is not simulated (docs/simulator.md): refused with 40517 rather than answered differently."""
    with pytest.raises(pyodbc.Error, match="MERGE") as excinfo:
        cur.execute(
            "MERGE dbo.Product AS t USING (SELECT 1 AS ProductID) AS s ON t.ProductID = s.ProductID "
            "WHEN MATCHED THEN UPDATE SET ListPrice = 0;"
        )
    assert _number(excinfo.value) == 40517


def test_a_subquery_argument_over_its_own_tables_is_not_correlated(cur: Any) -> None:
    rows = cur.execute(
        "SELECT CT.ProductID FROM CHANGETABLE(CHANGES dbo.Product, (SELECT MIN(ProductID) - 1 FROM dbo.Product)) AS CT"
    ).fetchall()
    assert [r[0] for r in rows] == [3]
