"""Statement shapes of the T-SQL the simulator supports, run through both drivers (and a real server when configured)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pymssql
import pyodbc
import pytest

DRIVER_ERRORS = (pyodbc.Error, pymssql.Error)


def _number(exc: BaseException) -> int | None:
    import re

    if isinstance(exc, pymssql.Error) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    m = re.search(r"\((\d+)\) \(SQL", str(exc))
    return int(m.group(1)) if m else None


def _refused(cur: Any, sql: str) -> tuple[int | None, str]:
    """Run ``sql``, which must fail; return the error's number and text."""
    with pytest.raises(DRIVER_ERRORS) as err:
        cur.execute(sql)
    return _number(err.value), str(err.value)


def _rows(cur: Any, sql: str) -> list[tuple[Any, ...]]:
    cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()]


@pytest.fixture
def shop(connect: Any) -> Any:
    """A cursor on a database with customers and orders."""
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA sales")
    cur.execute(
        "CREATE TABLE sales.customers (customer_id int NOT NULL IDENTITY(1,1) PRIMARY KEY, "
        "name nvarchar(50) NOT NULL, email varchar(100) NULL CONSTRAINT uq_email UNIQUE, "
        "country char(2) NOT NULL DEFAULT 'DE', created datetime2(3) NOT NULL DEFAULT SYSDATETIME())"
    )
    cur.execute(
        "CREATE TABLE sales.orders (order_id int NOT NULL, line_no smallint NOT NULL, customer_id int NOT NULL, "
        "amount decimal(10,2) NULL, status varchar(10) NOT NULL, CONSTRAINT pk_orders PRIMARY KEY (order_id, line_no))"
    )
    cur.execute(
        "INSERT INTO sales.customers (name, email) VALUES (N'Ann', 'ann@x.org'), (N'Bob', NULL), (N'Cid', 'cid@x.org')"
    )
    cur.execute("INSERT INTO sales.customers (name, email, country) VALUES (N'Dee', 'dee@x.org', 'FR')")
    cur.execute(
        "INSERT INTO sales.orders VALUES (1, 1, 1, 10.50, 'open'), (1, 2, 1, 5.25, 'open'), (2, 1, 2, 99.99, 'paid'), "
        "(3, 1, 3, NULL, 'open'), (4, 1, 1, 1.00, 'void')"
    )
    yield cur
    conn.close()


def test_create_table_applies_identity_defaults_and_not_null(shop: Any) -> None:
    rows = _rows(
        shop,
        "SELECT customer_id, name, email, country, CASE WHEN created IS NULL THEN 0 ELSE 1 END FROM sales.customers ORDER BY customer_id",
    )
    assert rows == [
        (1, "Ann", "ann@x.org", "DE", 1),
        (2, "Bob", None, "DE", 1),
        (3, "Cid", "cid@x.org", "DE", 1),
        (4, "Dee", "dee@x.org", "FR", 1),
    ]


def test_select_where_order_top_in_like_is_null(shop: Any) -> None:
    assert _rows(
        shop,
        "SELECT TOP 2 order_id, line_no FROM sales.orders WHERE status IN ('open', 'paid') ORDER BY amount DESC",
    ) == [
        (2, 1),
        (1, 1),
    ]
    assert _rows(shop, "SELECT name FROM sales.customers WHERE email IS NULL ORDER BY name") == [("Bob",)]
    assert _rows(shop, "SELECT name FROM sales.customers WHERE name LIKE N'_i%' AND email IS NOT NULL") == [
        ("Cid",)
    ]
    assert _rows(shop, "SELECT order_id FROM sales.orders WHERE amount BETWEEN 5 AND 11 ORDER BY 1") == [
        (1,),
        (1,),
    ]


def test_aggregates_group_by_having(shop: Any) -> None:
    rows = _rows(
        shop,
        "SELECT customer_id, COUNT(*) AS n, SUM(amount) AS total, MIN(amount), MAX(status) FROM sales.orders "
        "GROUP BY customer_id HAVING COUNT(*) >= 1 ORDER BY customer_id",
    )
    assert rows == [
        (1, 3, Decimal("16.75"), Decimal("1.00"), "void"),
        (2, 1, Decimal("99.99"), Decimal("99.99"), "paid"),
        (3, 1, None, None, "open"),
    ]
    assert _rows(shop, "SELECT COUNT(*), COUNT(amount), COUNT(DISTINCT customer_id) FROM sales.orders") == [
        (5, 4, 3)
    ]


def test_inner_and_left_join(shop: Any) -> None:
    rows = _rows(
        shop,
        "SELECT c.name, o.order_id FROM sales.customers AS c LEFT JOIN sales.orders o ON o.customer_id = c.customer_id "
        "AND o.status <> 'void' ORDER BY c.name, o.order_id",
    )
    assert rows == [("Ann", 1), ("Ann", 1), ("Bob", 2), ("Cid", 3), ("Dee", None)]
    rows = _rows(
        shop,
        "SELECT c.name, SUM(o.amount) FROM sales.customers c JOIN sales.orders o ON c.customer_id = o.customer_id "
        "WHERE o.status = 'open' GROUP BY c.name ORDER BY c.name",
    )
    assert rows == [("Ann", Decimal("15.75")), ("Cid", None)]


def test_cast_convert_case_and_functions(shop: Any) -> None:
    rows = _rows(
        shop,
        "SELECT CAST(amount AS int), CONVERT(varchar(12), amount), CASE WHEN amount > 50 THEN 'big' WHEN amount IS NULL "
        "THEN 'none' ELSE 'small' END, ISNULL(amount, 0), UPPER(status), LEN(status) FROM sales.orders ORDER BY order_id, line_no",
    )
    assert rows[0] == (10, "10.50", "small", Decimal("10.50"), "OPEN", 4)
    assert rows[2] == (99, "99.99", "big", Decimal("99.99"), "PAID", 4)
    assert rows[3] == (None, None, "none", Decimal("0.00"), "OPEN", 4)
    assert (
        _rows(
            shop,
            "SELECT CONVERT(varchar(10), CAST('2024-03-04' AS date), 112), DATEADD(day, 1, CAST('2024-02-28' AS date))",
        )[0][0]
        == "20240304"
    )


def test_insert_select_update_delete_report_row_counts(shop: Any) -> None:
    shop.execute("CREATE TABLE dbo.archive (order_id int, line_no smallint, amount decimal(10,2))")
    shop.execute(
        "INSERT INTO dbo.archive (order_id, line_no, amount) SELECT order_id, line_no, amount FROM sales.orders WHERE status = 'open'"
    )
    assert shop.rowcount == 3
    shop.execute("UPDATE sales.orders SET amount = amount * 2, status = 'paid' WHERE order_id = 1")
    assert shop.rowcount == 2
    shop.execute("DELETE FROM sales.orders WHERE status = 'void'")
    assert shop.rowcount == 1
    assert _rows(
        shop, "SELECT order_id, line_no, amount, status FROM sales.orders WHERE order_id = 1 ORDER BY line_no"
    ) == [
        (1, 1, Decimal("21.00"), "paid"),
        (1, 2, Decimal("10.50"), "paid"),
    ]
    assert _rows(shop, "SELECT COUNT(*) FROM dbo.archive") == [(3,)]


def test_update_and_delete_top_change_exactly_n_rows(shop: Any) -> None:
    # SQL Server picks the TOP rows arbitrarily: assert counts, never which rows
    shop.execute("UPDATE TOP (2) sales.orders SET status = 'held' WHERE status = 'open'")
    assert shop.rowcount == 2
    assert _rows(shop, "SELECT status, COUNT(*) FROM sales.orders GROUP BY status ORDER BY status") == [
        ("held", 2),
        ("open", 1),
        ("paid", 1),
        ("void", 1),
    ]
    shop.execute("DELETE TOP (1) FROM sales.orders WHERE status = 'held'")
    assert shop.rowcount == 1
    shop.execute("DELETE TOP (1) sales.orders WHERE status = 'held'")
    assert shop.rowcount == 1
    assert _rows(shop, "SELECT COUNT(*) FROM sales.orders WHERE status = 'held'") == [(0,)]
    assert _rows(shop, "SELECT COUNT(*) FROM sales.orders") == [(3,)]
    shop.execute("UPDATE TOP (10) sales.orders SET amount = 0 WHERE status <> 'void'")
    assert shop.rowcount == 2
    shop.execute("INSERT INTO sales.orders VALUES (5, 1, 1, 2.00, 'open')")
    shop.execute("DELETE TOP (50) PERCENT FROM sales.orders")
    assert shop.rowcount == 2
    assert _rows(shop, "SELECT COUNT(*) FROM sales.orders") == [(2,)]


def test_update_and_delete_top_take_a_variable(cursor_after: Any) -> None:
    cur = cursor_after(
        "CREATE TABLE dbo.q (id int NOT NULL PRIMARY KEY, done bit NOT NULL)",
        "INSERT INTO dbo.q VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)",
    )
    cur.execute("SET NOCOUNT ON; DECLARE @n int = 3; UPDATE TOP (@n) dbo.q SET done = 1 WHERE done = 0")
    assert _rows(cur, "SELECT COUNT(*) FROM dbo.q WHERE done = 1") == [(3,)]
    cur.execute("SET NOCOUNT ON; DECLARE @n int = 2; DELETE TOP (@n) FROM dbo.q WHERE done = 1")
    assert _rows(cur, "SELECT COUNT(*) FROM dbo.q WHERE done = 1") == [(1,)]
    assert _rows(cur, "SELECT COUNT(*) FROM dbo.q") == [(3,)]


@pytest.mark.parametrize(
    ("sql", "near"),
    [
        ("UPDATE TOP 2 dbo.q SET done = 1", "2"),
        ("DELETE TOP 1 FROM dbo.q", "1"),
        ("UPDATE TOP (1) WITH TIES dbo.q SET done = 1", "WITH"),
        ("DELETE TOP (1) WITH TIES FROM dbo.q", "WITH"),
    ],
)
def test_update_and_delete_top_need_parentheses_and_take_no_ties(
    cursor_after: Any, sql: str, near: str
) -> None:
    # top-transact-sql.md: parentheses are optional only in SELECT, WITH TIES only in SELECT
    cur = cursor_after(
        "CREATE TABLE dbo.q (id int NOT NULL PRIMARY KEY, done bit NOT NULL)",
        "INSERT INTO dbo.q VALUES (1, 0), (2, 0), (3, 0)",
    )
    number, message = _refused(cur, sql)
    assert number in (102, 156)  # 156 is SQL Server's "near the keyword"; the simulator answers 102
    assert f"Incorrect syntax near {'the keyword ' if number == 156 else ''}'{near}'." in message
    assert _rows(cur, "SELECT COUNT(*) FROM dbo.q WHERE done = 0") == [(3,)]


_ROLE_MEMBERS = (
    "SELECT r.name, m.name FROM sys.database_role_members AS rm "
    "JOIN sys.database_principals AS r ON r.principal_id = rm.role_principal_id "
    "JOIN sys.database_principals AS m ON m.principal_id = rm.member_principal_id "
    "WHERE r.name = '{role}'"
)


def _member_of_role(cursor_after: Any, user: str, role: str) -> Any:
    """A cursor of a database where ``user`` (a user without login) is a member of the new role ``role``."""
    return cursor_after(
        f"CREATE USER {user} WITHOUT LOGIN", f"CREATE ROLE {role}", f"ALTER ROLE {role} ADD MEMBER {user}"
    )


def test_drop_role_fails_15144_while_it_has_members(cursor_after: Any) -> None:
    cur = _member_of_role(cursor_after, "alice", "data_reader")
    number, message = _refused(cur, "DROP ROLE data_reader")
    assert number == 15144
    assert "The role has members. It must be empty before it can be dropped." in message
    assert _rows(cur, _ROLE_MEMBERS.format(role="data_reader")) == [("data_reader", "alice")]
    cur.execute("ALTER ROLE data_reader DROP MEMBER alice")
    cur.execute("DROP ROLE data_reader")
    assert _rows(cur, "SELECT COUNT(*) FROM sys.database_principals WHERE name = 'data_reader'") == [(0,)]


_SCHEMA_OWNERS = (
    "SELECT s.name, p.name FROM sys.schemas AS s JOIN sys.database_principals AS p "
    "ON p.principal_id = s.principal_id WHERE s.name LIKE 'owned%' ORDER BY s.name"
)


def test_a_principal_that_owns_a_schema_cannot_be_dropped_15138(cursor_after: Any) -> None:
    # drop-role-transact-sql.md / drop-user-transact-sql.md: a principal that owns securables stays
    cur = cursor_after(
        "CREATE USER carol WITHOUT LOGIN",
        "CREATE ROLE loaders AUTHORIZATION carol",
        "CREATE SCHEMA owned_by_role AUTHORIZATION loaders",
        "CREATE SCHEMA owned_by_user AUTHORIZATION carol",
    )
    assert _rows(cur, _SCHEMA_OWNERS) == [("owned_by_role", "loaders"), ("owned_by_user", "carol")]
    assert _rows(
        cur, "SELECT SCHEMA_OWNER FROM INFORMATION_SCHEMA.SCHEMATA WHERE SCHEMA_NAME = 'owned_by_role'"
    ) == [("loaders",)]
    assert _rows(
        cur,
        "SELECT o.name FROM sys.database_principals AS r "
        "JOIN sys.database_principals AS o ON o.principal_id = r.owning_principal_id WHERE r.name = 'loaders'",
    ) == [("carol",)]
    for sql in ("DROP ROLE loaders", "DROP USER carol"):
        number, message = _refused(cur, sql)
        assert number == 15138
        assert "The database principal owns a schema in the database, and cannot be dropped." in message
    assert _rows(cur, "SELECT COUNT(*) FROM sys.database_principals WHERE name IN ('carol', 'loaders')") == [
        (2,)
    ]
    cur.execute("DROP SCHEMA owned_by_role")
    cur.execute("DROP ROLE loaders")
    cur.execute("DROP SCHEMA owned_by_user")
    cur.execute("DROP USER carol")
    assert _rows(cur, "SELECT COUNT(*) FROM sys.database_principals WHERE name IN ('carol', 'loaders')") == [
        (0,)
    ]


def test_authorization_of_an_unknown_principal_is_refused(sql_backend: Any, cursor_after: Any) -> None:
    cur = cursor_after()
    for sql in (
        "CREATE SCHEMA owned_by_nobody AUTHORIZATION nobody",
        "CREATE ROLE led_by_nobody AUTHORIZATION nobody",
    ):
        number, _ = _refused(cur, sql)
        if sql_backend.is_simulator:
            assert number == 40517  # SQL Server refuses it too; its message is on no page of the docs
    assert _rows(cur, "SELECT COUNT(*) FROM sys.schemas WHERE name = 'owned_by_nobody'") == [(0,)]
    assert _rows(cur, "SELECT COUNT(*) FROM sys.database_principals WHERE name = 'led_by_nobody'") == [(0,)]


def test_a_principal_that_owns_a_role_is_not_dropped(sql_backend: Any, cursor_after: Any) -> None:
    cur = cursor_after("CREATE ROLE leads", "CREATE ROLE team AUTHORIZATION leads")
    number, _ = _refused(cur, "DROP ROLE leads")
    if sql_backend.is_simulator:
        assert number == 40517  # refused, as SQL Server does (drop-role-transact-sql.md), without its message
    cur.execute("DROP ROLE team")
    cur.execute("DROP ROLE leads")
    assert _rows(cur, "SELECT COUNT(*) FROM sys.database_principals WHERE name IN ('leads', 'team')") == [
        (0,)
    ]


def test_drop_user_leaves_its_roles_so_they_can_be_dropped(cursor_after: Any) -> None:
    cur = _member_of_role(cursor_after, "bob", "auditors")
    cur.execute("DROP USER bob")
    cur.execute("CREATE USER bob WITHOUT LOGIN")
    assert _rows(cur, _ROLE_MEMBERS.format(role="auditors")) == []
    cur.execute("DROP ROLE auditors")
    assert _refused(cur, "DROP ROLE bob")[0] == 15151


@pytest.mark.parametrize(
    ("sql", "message"), [("DROP ROLE db_owner", "role 'db_owner'"), ("DROP USER dbo", "user 'dbo'")]
)
def test_fixed_principals_cannot_be_dropped(connect: Any, sql: str, message: str) -> None:
    cur = connect().cursor()
    number, error = _refused(cur, sql)
    assert number == 15150
    assert f"Cannot drop the {message}." in error
    assert _rows(cur, "SELECT COUNT(*) FROM sys.database_principals WHERE name IN ('db_owner', 'dbo')") == [
        (2,)
    ]


def test_alter_table_add_and_drop_column(shop: Any) -> None:
    shop.execute("ALTER TABLE sales.orders ADD note nvarchar(20) NULL, qty int NOT NULL DEFAULT 1")
    assert _rows(shop, "SELECT order_id, note, qty FROM sales.orders WHERE order_id = 2") == [(2, None, 1)]
    shop.execute("ALTER TABLE sales.orders DROP COLUMN note")
    cols = _rows(
        shop, "SELECT name FROM sys.columns WHERE object_id = OBJECT_ID('sales.orders') ORDER BY column_id"
    )
    assert [c[0] for c in cols] == ["order_id", "line_no", "customer_id", "amount", "status", "qty"]
    assert _refused(shop, "SELECT note FROM sales.orders")[0] == 207


def test_declare_set_and_variables_in_queries(shop: Any) -> None:
    rows = _rows(
        shop,
        "DECLARE @min decimal(10,2) = 5; DECLARE @n int; SET @n = 2; "
        "SELECT TOP (@n) order_id FROM sales.orders WHERE amount >= @min ORDER BY amount",
    )
    assert rows == [(1,), (1,)]


def test_exec_with_named_and_positional_arguments(connect: Any) -> None:
    cur = connect().cursor()
    named = _rows(cur, "EXEC sp_datatype_info_100 @data_type = 12, @ODBCVer = 3")
    positional = _rows(cur, "EXEC sp_datatype_info_100 12, 3")
    assert named and named == positional
    assert named[0][0] == "varchar" and named[0][1] == 12


def test_use_and_three_part_names(cursor_after: Any, sql_backend: Any) -> None:
    cur = cursor_after("CREATE TABLE dbo.t (id int)", "INSERT INTO dbo.t VALUES (7)")
    cur.execute("USE master")
    assert _rows(cur, f"SELECT id FROM [{sql_backend.database}].dbo.t") == [(7,)]
    assert _rows(cur, "SELECT DB_NAME()") == [("master",)]
    cur.execute(f"USE [{sql_backend.database}]")
    assert _rows(cur, "SELECT DB_NAME(), SCHEMA_NAME()") == [(sql_backend.database, "dbo")]


@pytest.mark.parametrize(
    ("sql", "number"),
    [
        ("INSERT INTO sales.orders VALUES (1, 1, 1, 1, 'dup')", 2627),
        ("INSERT INTO sales.customers (name, email) VALUES (N'Eve', 'ann@x.org')", 2627),
        ("INSERT INTO sales.orders (order_id, line_no, customer_id, amount) VALUES (9, 1, 1, 1)", 515),
        ("SELECT * FROM sales.nothing_here", 208),
        ("SELECT no_such_column FROM sales.orders", 207),
        ("SELECT * FROM FROM sales.orders", 156),
        ("SELECT * FROM sales.orders WHERE", 102),
        ("UPDATE sales.customers SET customer_id = 5", 8102),
        ("DELETE TOP 2 FROM sales.orders", 102),
        ("UPDATE TOP 2 sales.orders SET status = 'x'", 102),
        ("INSERT INTO sales.orders VALUES (9, 1, 1, 1, 'a-very-long-status')", 2628),
        ("SELECT 1 / 0", 8134),
        ("SELECT SQRT(-1)", 3623),
        ("SELECT POWER(-1.0, 0.5)", 3623),
        ("SELECT CAST(1e308 AS float) * 10", 8115),
        ("SELECT ROUND(1.5)", 174),
        ("SELECT CAST('abc' AS int)", 245),
        ("SELECT CAST(300 AS tinyint)", 220),
    ],
)
def test_errors_have_sql_server_numbers_and_keep_the_connection(shop: Any, sql: str, number: int) -> None:
    with pytest.raises(DRIVER_ERRORS) as err:
        shop.execute(sql)
        shop.fetchall()
    assert _number(err.value) == number
    assert _rows(shop, "SELECT COUNT(*) FROM sales.orders") == [(5,)]


def test_duplicate_key_message_names_constraint_table_and_value(shop: Any) -> None:
    with pytest.raises(DRIVER_ERRORS) as err:
        shop.execute("INSERT INTO sales.orders VALUES (2, 1, 1, 1, 'dup')")
    assert "Violation of PRIMARY KEY constraint 'pk_orders'" in str(err.value)
    assert "'sales.orders'" in str(err.value) and "(2, 1)" in str(err.value)


def test_null_into_not_null_message_names_column_and_table(shop: Any, sql_backend: Any) -> None:
    with pytest.raises(DRIVER_ERRORS) as err:
        shop.execute(
            "INSERT INTO sales.orders (order_id, line_no, customer_id, status) VALUES (9, 1, 1, NULL)"
        )
    assert (
        f"Cannot insert the value NULL into column 'status', table '{sql_backend.database}.sales.orders'"
        in str(err.value)
    )


def test_drop_table_schema_and_database(connect: Any, sql_backend: Any) -> None:
    cur = connect(database="master").cursor()
    cur.execute("CREATE DATABASE scratch_sim_db")
    cur.execute("USE scratch_sim_db")
    cur.execute("CREATE SCHEMA s")
    cur.execute("CREATE TABLE s.t (id int)")
    cur.execute("DROP TABLE s.t")
    cur.execute("DROP SCHEMA s")
    cur.execute("USE master")
    cur.execute("DROP DATABASE scratch_sim_db")
    assert _rows(cur, "SELECT COUNT(*) FROM sys.databases WHERE name = 'scratch_sim_db'") == [(0,)]


def test_if_else_and_begin_end_blocks(cursor_after: Any) -> None:
    cur = cursor_after("IF OBJECT_ID('dbo.u') IS NOT NULL DROP TABLE dbo.u")
    cur.execute(
        "IF NOT EXISTS (SELECT 1 FROM sys.tables WHERE name = 'u')\n"
        "BEGIN\n    CREATE TABLE dbo.u (id int)\n    INSERT INTO dbo.u VALUES (1)\nEND\n"
        "ELSE\nBEGIN\n    INSERT INTO dbo.u VALUES (2)\nEND"
    )
    cur.execute(
        "IF EXISTS (SELECT 1 FROM sys.tables WHERE name = 'u') INSERT INTO dbo.u VALUES (3) ELSE INSERT INTO dbo.u VALUES (4)"
    )
    assert _rows(cur, "SELECT id, CASE WHEN id = 1 THEN 'one' ELSE 'other' END FROM dbo.u ORDER BY id") == [
        (1, "one"),
        (3, "other"),
    ]
    assert _rows(cur, "DECLARE @n int = 5; IF @n > 3 SELECT 'big' ELSE SELECT 'small'") == [("big",)]


def test_temporary_tables_are_private_to_the_connection(connect: Any) -> None:
    first = connect()
    cur = first.cursor()
    cur.execute("CREATE TABLE #work (id int PRIMARY KEY, v nvarchar(10))")
    cur.execute("INSERT INTO #work VALUES (1, N'a'), (2, N'b')")
    cur.execute("UPDATE #work SET v = N'z' WHERE id = 2")
    assert _rows(cur, "SELECT id, v FROM #work ORDER BY id") == [(1, "a"), (2, "z")]
    assert _rows(cur, "SELECT CASE WHEN OBJECT_ID('tempdb..#work') IS NULL THEN 0 ELSE 1 END") == [(1,)]
    other = connect().cursor()
    assert _refused(other, "SELECT * FROM #work")[0] == 208
    cur.execute("DROP TABLE #work")
    first.close()


def test_raiserror_and_throw_report_their_numbers_and_messages(connect: Any) -> None:
    cur = connect().cursor()
    number, message = _refused(cur, "RAISERROR('bad %s value %d', 16, 1, 'x', 5)")
    assert number == 50000
    assert "bad x value 5" in message
    number, message = _refused(cur, "THROW 51000, 'custom failure', 1")
    assert number == 51000
    assert "custom failure" in message
    assert _rows(cur, "SELECT 1") == [(1,)]


def test_update_and_delete_with_joins(cursor_after: Any) -> None:
    cur = cursor_after(
        "CREATE TABLE dbo.t (id int PRIMARY KEY, v int)",
        "CREATE TABLE dbo.s (id int PRIMARY KEY, v int)",
        "INSERT INTO dbo.t VALUES (1, 0), (2, 0), (3, 0)",
        "INSERT INTO dbo.s VALUES (1, 10), (2, 20)",
    )
    cur.execute("UPDATE t SET v = s.v FROM dbo.t AS t JOIN dbo.s AS s ON s.id = t.id WHERE s.v > 10")
    assert cur.rowcount == 1
    cur.execute("UPDATE dbo.t SET v = s.v + 1 FROM dbo.s WHERE s.id = t.id")
    assert cur.rowcount == 2
    assert _rows(cur, "SELECT id, v FROM dbo.t ORDER BY id") == [(1, 11), (2, 21), (3, 0)]
    cur.execute("DELETE t FROM dbo.t AS t JOIN dbo.s AS s ON s.id = t.id WHERE s.v = 10")
    assert cur.rowcount == 1
    assert _rows(cur, "SELECT id, v FROM dbo.t ORDER BY id") == [(2, 21), (3, 0)]


def test_output_clause_returns_inserted_and_deleted_rows(cursor_after: Any) -> None:
    cur = cursor_after("CREATE TABLE dbo.t (id int IDENTITY PRIMARY KEY, v nvarchar(5))")
    assert _rows(cur, "INSERT INTO dbo.t (v) OUTPUT inserted.id, inserted.v VALUES (N'a'), (N'b')") == [
        (1, "a"),
        (2, "b"),
    ]
    assert _rows(
        cur, "UPDATE dbo.t SET v = N'z' OUTPUT deleted.v AS old, inserted.v AS new WHERE id = 2"
    ) == [("b", "z")]
    assert _rows(cur, "DELETE dbo.t OUTPUT deleted.* WHERE id = 1") == [(1, "a")]
    assert _rows(cur, "SELECT id, v FROM dbo.t") == [(2, "z")]


def test_while_loops_with_break_and_continue(cursor_after: Any) -> None:
    cur = cursor_after("CREATE TABLE dbo.t (id int PRIMARY KEY)")
    cur.execute(
        "DECLARE @i int = 0\nWHILE @i < 10\nBEGIN\n    SET @i += 1\n    IF @i = 3 CONTINUE\n    IF @i > 6 BREAK\n"
        "    INSERT INTO dbo.t VALUES (@i)\nEND"
    )
    assert _rows(cur, "SELECT id FROM dbo.t ORDER BY id") == [(1,), (2,), (4,), (5,), (6,)]
