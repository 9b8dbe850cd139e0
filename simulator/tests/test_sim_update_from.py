"""
UPDATE / DELETE ... FROM: which FROM reference the target binds to, as Microsoft documents it.

docs/t-sql/queries/update-transact-sql.md (FROM table_source): "If the object being updated is the same
as the object in the FROM clause and there is only one reference to the object in the FROM clause, an
object alias may or may not be specified. If the object being updated appears more than one time in the
FROM clause, one, and only one, reference to the object must not specify a table alias." The conflict
detection example of docs/relational-databases/track-changes/work-with-change-tracking-sql-server.md
updates ``SalesLT.Product`` ``FROM SalesLT.Product AS P``. DELETE binds the same way
(delete-transact-sql.md, FROM table_source).
"""

from __future__ import annotations

from typing import Any

import pyodbc
import pytest


@pytest.fixture
def cur(sqlserver_simulator: Any) -> Any:
    sqlserver_simulator.execute("CREATE DATABASE shop")
    sqlserver_simulator.execute("CREATE TABLE dbo.t (id int PRIMARY KEY, a int)", database="shop")
    sqlserver_simulator.execute("CREATE TABLE dbo.u (id int PRIMARY KEY, b int)", database="shop")
    sqlserver_simulator.execute("INSERT INTO dbo.t VALUES (1, 0), (2, 0), (3, 0)", database="shop")
    sqlserver_simulator.execute("INSERT INTO dbo.u VALUES (1, 10), (2, 20)", database="shop")
    return sqlserver_simulator.connect("shop").cursor()


def _t(cur: Any) -> list[tuple[int, int]]:
    return [tuple(r) for r in cur.execute("SELECT id, a FROM dbo.t ORDER BY id").fetchall()]


def test_update_binds_to_the_single_aliased_reference(cur: Any) -> None:
    cur.execute("UPDATE dbo.t SET a = 9 FROM dbo.t AS P WHERE P.id = 1")
    assert cur.rowcount == 1
    assert _t(cur) == [(1, 9), (2, 0), (3, 0)]


def test_update_with_the_documented_conflict_detection_shape(cur: Any) -> None:
    cur.execute("UPDATE dbo.t SET a = 7 FROM dbo.t AS P WHERE id = 2 AND P.a = 0")
    assert _t(cur) == [(1, 0), (2, 7), (3, 0)]


def test_update_binds_to_the_unaliased_one_of_two_references(cur: Any) -> None:
    cur.execute(
        "UPDATE dbo.t SET a = x.id * 100 FROM dbo.t INNER JOIN dbo.t AS x ON dbo.t.id = x.id WHERE x.id = 3"
    )
    assert _t(cur) == [(1, 0), (2, 0), (3, 300)]


def test_two_aliased_references_are_ambiguous(cur: Any) -> None:
    with pytest.raises(pyodbc.Error, match=r"\(8154\)"):
        cur.execute("UPDATE dbo.t SET a = 1 FROM dbo.t AS x INNER JOIN dbo.t AS y ON x.id = y.id")
    assert _t(cur) == [(1, 0), (2, 0), (3, 0)]


def test_update_through_an_alias_and_a_join(cur: Any) -> None:
    cur.execute("UPDATE dbo.t SET a = u.b FROM dbo.t AS P INNER JOIN dbo.u ON u.id = P.id")
    assert _t(cur) == [(1, 10), (2, 20), (3, 0)]


def test_delete_binds_to_the_single_aliased_reference(cur: Any) -> None:
    cur.execute("DELETE dbo.t FROM dbo.t AS P WHERE P.id = 1")
    assert cur.rowcount == 1
    assert _t(cur) == [(2, 0), (3, 0)]


def test_delete_of_an_alias(cur: Any) -> None:
    cur.execute("DELETE P FROM dbo.t AS P INNER JOIN dbo.u ON u.id = P.id WHERE u.b = 20")
    assert _t(cur) == [(1, 0), (3, 0)]


def test_delete_from_target_from_table_source(cur: Any) -> None:
    """delete-transact-sql.md: DELETE [ FROM ] table_or_view_name FROM table_source."""
    cur.execute("DELETE FROM dbo.t FROM dbo.t AS P WHERE P.id = 3")
    assert cur.rowcount == 1
    assert _t(cur) == [(1, 0), (2, 0)]
    cur.execute("DELETE FROM dbo.t WHERE id = 2")
    assert _t(cur) == [(1, 0)]
