"""Schema changes on a tracked table, each checked against the Microsoft page it follows (issue 19, item 5).

Through pyodbc + FreeTDS, as a real driver sees the simulator (and against a SQL Server when
``SQLSERVER_CDC_TEST_ODBC`` is set). The pages are in the repository MicrosoftDocs/sql-docs;
each test names its page by path under ``docs/``.
"""

from __future__ import annotations

import contextlib
import datetime
import uuid

import pyodbc
import pytest
from cdc_scenario_support import CAPTURED_COLUMNS_RESULT, INSTANCE_RESULT_COLUMNS, error_number, lsn

TABLE = (
    "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note varchar(20) NULL, amount int NULL, "
    "spare nvarchar(10) NULL)"
)
CAPTURED = "EXEC sys.sp_cdc_get_captured_columns @capture_instance = ?"
HISTORY = "EXEC sys.sp_cdc_get_ddl_history @capture_instance = ?"


@pytest.fixture
def orders(cdc_db):
    cdc_db.track(TABLE, "orders")
    return cdc_db


def _described(cursor: pyodbc.Cursor) -> list[tuple[str, type, int]]:
    """(name, Python type, precision) of each result column: precision tells int (10) from smallint (5) and tinyint (3)."""
    return [(d[0], d[1], d[4]) for d in cursor.description]


def _captured(db, instance: str) -> list[tuple]:
    """(column_name, column_id, column_ordinal, data_type, character_maximum_length) of an instance."""
    return [tuple(r[3:8]) for r in db.rows(CAPTURED, instance)]


def test_get_captured_columns_result_set_and_only_the_type_follows_the_source(orders):
    """Follows relational-databases/system-stored-procedures/sys-sp-cdc-get-captured-columns-transact-sql.md.

    "Result Sets": twelve columns in this order and with these types. "Remarks": names, ids and
    positions stay for the life of the instance; only the data type follows the source column;
    added and dropped columns leave the captured columns as they are.
    """
    cursor = orders.execute(CAPTURED, "dbo_orders")
    assert _described(cursor) == CAPTURED_COLUMNS_RESULT
    cursor.fetchall()
    cursor.close()
    before = _captured(orders, "dbo_orders")
    orders.run(
        "ALTER TABLE dbo.orders ADD region nvarchar(10) NULL",
        "ALTER TABLE dbo.orders DROP COLUMN spare",
        "ALTER TABLE dbo.orders ALTER COLUMN note varchar(60) NULL",
    )
    orders.capture()
    after = _captured(orders, "dbo_orders")
    assert (
        [r[:3] for r in after]
        == [r[:3] for r in before]
        == [
            ("id", 1, 1),
            ("note", 2, 2),
            ("amount", 3, 3),
            ("spare", 4, 4),  # dropped from the table, still a captured column
        ]
    )
    assert [r[3:] for r in after] == [("int", None), ("varchar", 60), ("int", None), ("nvarchar", 10)]
    assert before[1][3:] == ("varchar", 20)
    # column_ordinal: this page says "position within the source table", cdc-captured-columns-transact-sql.md
    # "ordinal in the change table"; the procedure reports cdc.captured_columns' (they differ with a column list)
    orders.enable_table("orders", capture_instance="dbo_orders_v2", captured_column_list="id, amount")
    assert [r[:3] for r in _captured(orders, "dbo_orders_v2")] == [("id", 1, 1), ("amount", 3, 2)]


def test_get_ddl_history_lists_add_drop_and_alter_in_lsn_order_for_each_instance(orders):
    """Follows relational-databases/system-stored-procedures/sys-sp-cdc-get-ddl-history-transact-sql.md
    and relational-databases/system-tables/cdc-ddl-history-transact-sql.md.

    The result set's seven columns; one row per DDL that changed the column structure (add, drop,
    data type change), ``required_column_update`` set only where the change table's column was
    altered; the history of an instance starts when it was enabled; cdc.ddl_history holds one row
    per change table, named by its ``object_id``.
    """
    add = "ALTER TABLE dbo.orders ADD region nvarchar(10) NULL"
    drop = "ALTER TABLE dbo.orders DROP COLUMN spare"
    orders.run(add, drop)
    orders.capture()
    orders.enable_table("orders", capture_instance="dbo_orders_v2")
    alter = "ALTER TABLE dbo.orders ALTER COLUMN amount bigint NULL"
    orders.run(alter, "CREATE INDEX ix_note ON dbo.orders (note)")  # an index is no column change
    orders.capture()

    cursor = orders.execute(HISTORY, "dbo_orders")
    assert _described(cursor) == [
        *INSTANCE_RESULT_COLUMNS,
        ("required_column_update", bool, 1),
        ("ddl_command", str, 0),  # nvarchar(max)
        ("ddl_lsn", bytearray, 10),
        ("ddl_time", datetime.datetime, 23),
    ]
    old = [tuple(r) for r in cursor.fetchall()]
    cursor.close()
    assert [(r[:4], r[4].strip()) for r in old] == [
        (("dbo", "orders", "dbo_orders", False), add),
        (("dbo", "orders", "dbo_orders", False), drop),
        (("dbo", "orders", "dbo_orders", True), alter),
    ]
    assert lsn(old[0][5]) < lsn(old[1][5]) < lsn(old[2][5])
    # the second instance was enabled after the ADD and the DROP: its history has the ALTER only
    new = orders.rows(HISTORY, "dbo_orders_v2")
    assert [(r[2], r[3], r[4].strip(), lsn(r[5])) for r in new] == [
        ("dbo_orders_v2", True, alter, lsn(old[2][5]))
    ]
    table_rows = orders.rows(
        "SELECT h.object_id, h.source_object_id, h.ddl_command FROM cdc.ddl_history AS h "
        "ORDER BY h.ddl_lsn, h.object_id"
    )
    v1, v2, source = (
        orders.scalar("SELECT OBJECT_ID(N'cdc.dbo_orders_CT')"),
        orders.scalar("SELECT OBJECT_ID(N'cdc.dbo_orders_v2_CT')"),
        orders.scalar("SELECT OBJECT_ID(N'dbo.orders')"),
    )
    assert [(r[0], r[1]) for r in table_rows] == [
        (v1, source),
        (v1, source),
        *sorted([(v1, source), (v2, source)]),
    ]


def test_old_instance_keeps_its_shape_and_the_new_one_captures_from_its_start_lsn(orders):
    """Follows relational-databases/track-changes/about-change-data-capture-sql-server.md,
    "Handling Changes to Source Tables".

    New columns are ignored by the existing instance, a dropped tracked column is NULL in the
    following change rows, a data type change reaches the change table; a second instance with the
    new shape captures the same changes from its own start, both in tandem.
    """
    orders.run("INSERT INTO dbo.orders (id, note, amount, spare) VALUES (1, 'a', 10, N'x')")
    orders.run(
        "ALTER TABLE dbo.orders ADD region nvarchar(10) NULL",
        "ALTER TABLE dbo.orders DROP COLUMN spare",
        "ALTER TABLE dbo.orders ALTER COLUMN amount bigint NULL",
        "INSERT INTO dbo.orders (id, note, amount, region) VALUES (2, 'b', 5000000000, N'eu')",
    )
    orders.capture()
    orders.enable_table("orders", capture_instance="dbo_orders_v2")
    start_v2 = lsn(
        orders.scalar("SELECT start_lsn FROM cdc.change_tables WHERE capture_instance = N'dbo_orders_v2'")
    )
    orders.run("UPDATE dbo.orders SET region = N'us', amount = 7 WHERE id = 1")
    orders.capture()

    def changes(instance: str) -> list[tuple]:
        low = orders.scalar("SELECT sys.fn_cdc_get_min_lsn(?)", instance)
        high = orders.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        cursor = orders.execute(
            f"SELECT * FROM cdc.fn_cdc_get_all_changes_{instance}(?, ?, N'all')", low, high
        )
        names = [d[0] for d in cursor.description]
        rows = [tuple(r) for r in cursor.fetchall()]
        cursor.close()
        return names, rows

    names, rows = changes("dbo_orders")
    assert names[4:] == ["id", "note", "amount", "spare"]
    assert [r[4:] for r in rows] == [(1, "a", 10, "x"), (2, "b", 5000000000, None), (1, "a", 7, None)]
    names, rows = changes("dbo_orders_v2")
    assert names[4:] == ["id", "note", "amount", "region"]
    assert [r[4:] for r in rows] == [(1, "a", 7, "us")]
    assert all(lsn(r[0]) > start_v2 for r in rows)


def test_a_third_capture_instance_fails_with_22962_and_a_freed_slot_can_be_used(orders):
    """Follows relational-databases/system-stored-procedures/sys-sp-cdc-enable-table-transact-sql.md
    ("A source table can have a maximum of two capture instances") and the text of error 22962 in
    relational-databases/errors-events/database-engine-events-and-errors-22000-to-22999.md.
    """
    orders.enable_table("orders", capture_instance="dbo_orders_v2")
    with pytest.raises(pyodbc.Error) as raised:
        orders.enable_table("orders", capture_instance="dbo_orders_v3")
    assert error_number(raised) == 22962
    assert (
        "Two capture instances already exist for source table 'dbo.orders'. A table can have at most two "
        "capture instances. If the current tracking options are not appropriate, disable change tracking "
        "for the obsolete instance by using sys.sp_cdc_disable_table and retry the operation."
    ) in str(raised.value)
    assert orders.rows("SELECT capture_instance FROM cdc.change_tables ORDER BY capture_instance") == [
        ("dbo_orders",),
        ("dbo_orders_v2",),
    ]
    orders.run(
        "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', "
        "@capture_instance = N'dbo_orders'"
    )
    orders.enable_table("orders", capture_instance="dbo_orders_v3")
    assert orders.rows("SELECT capture_instance FROM cdc.change_tables ORDER BY capture_instance") == [
        ("dbo_orders_v2",),
        ("dbo_orders_v3",),
    ]


def test_narrowing_a_column_below_its_stored_values_fails_the_statement_with_2628(orders):
    """A column type change converts every stored value; one that does not fit fails the statement and
    leaves the table as it was. Error text: relational-databases/errors-events/
    database-engine-events-and-errors-2000-to-2999.md (2628); 8115 in the 8000-8999 page.
    """
    orders.run("INSERT INTO dbo.orders (id, note, amount) VALUES (1, 'a note of 17 chars', 100000)")
    with pytest.raises(pyodbc.Error) as raised:
        orders.execute("ALTER TABLE dbo.orders ALTER COLUMN note varchar(5) NULL")
    assert error_number(raised) == 2628
    assert "String or binary data would be truncated in table" in str(raised.value)
    with pytest.raises(pyodbc.Error) as raised:
        orders.execute("ALTER TABLE dbo.orders ALTER COLUMN amount smallint NULL")
    assert error_number(raised) == 8115
    assert orders.rows("SELECT id, note, amount FROM dbo.orders") == [(1, "a note of 17 chars", 100000)]
    assert orders.rows(
        "SELECT c.name, t.name, c.max_length FROM sys.columns AS c JOIN sys.types AS t "
        "ON t.user_type_id = c.user_type_id WHERE c.object_id = OBJECT_ID(N'dbo.orders') AND c.column_id IN (2, 3) "
        "ORDER BY c.column_id"
    ) == [("note", "varchar", 20), ("amount", "int", 4)]


def test_narrowing_below_values_in_the_change_table_stops_the_capture_until_cdc_is_re_enabled(orders):
    """Follows relational-databases/track-changes/known-issues-and-errors-change-data-capture.md,
    "DDL changes to source tables" and "Error 2628", with the views of
    relational-databases/system-dynamic-management-views/change-data-capture-sys-dm-cdc-errors.md and
    change-data-capture-sys-dm-cdc-log-scan-sessions.md (phase 6, schema versioning).

    The source's rows fit the narrower type but a change row does not: the capture process fails
    on the DDL, records the error, and captures nothing from that transaction on; the remedy is to
    consume the change data, then disable and re-enable CDC on the table.
    """
    orders.run("INSERT INTO dbo.orders (id, note) VALUES (1, 'seventeen chars..')")
    orders.run("UPDATE dbo.orders SET note = 'short' WHERE id = 1")
    orders.capture()
    high = lsn(orders.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
    narrow = "ALTER TABLE dbo.orders ALTER COLUMN note varchar(10) NULL"
    orders.run(narrow, "INSERT INTO dbo.orders (id, note) VALUES (2, 'after')")
    for _ in range(2):  # every later scan stops at the same transaction
        with pytest.raises(pyodbc.Error) as raised:
            orders.run("EXEC sys.sp_cdc_scan")
        assert error_number(raised) == 2628
    errors = orders.rows(
        "SELECT phase_number, error_number, error_severity, error_message FROM sys.dm_cdc_errors"
    )
    assert [e[:3] for e in errors] == [(6, 2628, 16), (6, 2628, 16)]
    assert "cdc.dbo_orders_CT" in errors[0][3]
    failed = orders.rows(
        "SELECT error_count, failed_sessions_count FROM sys.dm_cdc_log_scan_sessions WHERE session_id > 0 "
        "AND error_count > 0"
    )
    assert failed == [(1, 1), (1, 2)]
    assert lsn(orders.scalar("SELECT sys.fn_cdc_get_max_lsn()")) == high
    assert orders.rows(HISTORY, "dbo_orders") == []
    assert _captured(orders, "dbo_orders")[1][3:] == ("varchar", 20)  # the metadata did not move either
    # the documented way out: disable and re-enable capture on the table
    orders.run(
        "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', @capture_instance = N'all'"
    )
    orders.enable_table("orders")
    orders.run("INSERT INTO dbo.orders (id, note) VALUES (3, 'resumed')")
    orders.capture()
    low = orders.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")
    assert orders.rows(
        "SELECT id, note FROM cdc.fn_cdc_get_all_changes_dbo_orders(?, sys.fn_cdc_get_max_lsn(), N'all')", low
    ) == [(3, "resumed")]


def test_a_narrowing_the_change_rows_fit_is_captured_like_any_type_change(orders):
    """Follows relational-databases/track-changes/about-change-data-capture-sql-server.md ("if an existing
    column undergoes a change in its data type, the change is propagated to the change table") and
    sys-sp-cdc-get-ddl-history-transact-sql.md (``required_column_update``).
    """
    orders.run("INSERT INTO dbo.orders (id, note) VALUES (1, 'short')")
    narrow = "ALTER TABLE dbo.orders ALTER COLUMN note varchar(10) NULL"
    orders.run(narrow, "INSERT INTO dbo.orders (id, note) VALUES (2, 'ten chars.')")
    orders.capture()
    assert [(r[3], r[4].strip()) for r in orders.rows(HISTORY, "dbo_orders")] == [(True, narrow)]
    assert _captured(orders, "dbo_orders")[1][3:] == ("varchar", 10)
    low = orders.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")
    assert orders.rows(
        "SELECT id, note FROM cdc.fn_cdc_get_all_changes_dbo_orders(?, sys.fn_cdc_get_max_lsn(), N'all')", low
    ) == [(1, "short"), (2, "ten chars.")]


def test_sp_rename_of_a_tracked_column_is_refused_and_changes_nothing(orders):
    """sp_rename on a CDC-enabled table: relational-databases/system-stored-procedures/sp-rename-transact-sql.md,
    relational-databases/tables/rename-columns-database-engine.md and
    relational-databases/track-changes/about-change-data-capture-sql-server.md say nothing about it.

    Without a page to follow, the simulator answers 40517 (not supported) rather than invent either
    SQL Server's answer (believed to be 4928, "Cannot alter column ... because it is 'REPLICATED'",
    as reported by users, not by Microsoft's pages) or a rename recorded in cdc.ddl_history. It
    changes nothing: the column keeps its name and no DDL is recorded.
    """
    statements = ["EXEC sp_rename N'dbo.orders.note', N'remark', N'COLUMN'"]
    if orders.backend.simulated:  # a table rename: no page and no report either way, not probed on SQL Server
        statements.append("EXEC sp_rename N'dbo.orders', N'purchases'")
    for statement in statements:
        with pytest.raises(pyodbc.Error) as raised:
            orders.run(statement)
        if orders.backend.simulated:
            assert error_number(raised) == 40517
    orders.capture()
    assert [r[0] for r in _captured(orders, "dbo_orders")] == ["id", "note", "amount", "spare"]
    assert orders.scalar("SELECT COL_NAME(OBJECT_ID(N'dbo.orders'), 2)") == "note"
    assert orders.rows(HISTORY, "dbo_orders") == []


def test_the_metadata_procedures_answer_22981_outside_the_gating_role(cdc_db):
    """Follows the "Permissions" sections of sys-sp-cdc-get-captured-columns-transact-sql.md (error 22981,
    "Object does not exist or access is denied.") and sys-sp-cdc-get-ddl-history-transact-sql.md
    (gating role membership needed besides db_owner).
    """
    cdc_db.run(TABLE)
    cdc_db.enable_table("orders", role_name="cdc_reader")
    login = f"outsider_{uuid.uuid4().hex[:8]}"
    password = "Out-" + uuid.uuid4().hex[:12] + "!"
    cdc_db.run(f"CREATE LOGIN [{login}] WITH PASSWORD = '{password}'")
    try:
        cdc_db.run(f"CREATE USER [{login}] FOR LOGIN [{login}]")
        if not cdc_db.backend.simulated:  # the simulator models the gating role only, not column SELECT
            cdc_db.run(f"GRANT SELECT ON SCHEMA::dbo TO [{login}]")
        outsider = cdc_db.connect(UID=login, PWD=password)
        try:
            for procedure in (CAPTURED, HISTORY):
                with pytest.raises(pyodbc.Error) as raised:
                    outsider.cursor().execute(procedure, "dbo_orders").fetchall()
                assert error_number(raised) == 22981
                assert "Object does not exist or access is denied." in str(raised.value)
        finally:
            outsider.close()
        assert len(cdc_db.rows(CAPTURED, "dbo_orders")) == 4  # db_owner reads them
    finally:
        with contextlib.suppress(pyodbc.Error):
            cdc_db.run(f"DROP USER [{login}]")
        cdc_db.run(f"DROP LOGIN [{login}]")
