"""Enabling CDC and its metadata, through pyodbc + FreeTDS (and a real SQL Server when configured)."""

from __future__ import annotations

import contextlib
import uuid

import pyodbc
import pytest
from cdc_scenario_support import CAPTURED_COLUMNS_RESULT, error_number, lsn

ORDERS = """CREATE TABLE dbo.orders (
    order_id int NOT NULL PRIMARY KEY,
    customer nvarchar(50) NULL,
    amount decimal(18,4) NULL,
    notes nvarchar(max) NULL,
    updated datetime2(3) NULL
)"""


def test_enable_db_sets_is_cdc_enabled_and_creates_the_cdc_tables(cdc_db):
    assert cdc_db.scalar("SELECT is_cdc_enabled FROM sys.databases WHERE name = DB_NAME()") in (1, True)
    for table in ("change_tables", "captured_columns", "index_columns", "ddl_history", "lsn_time_mapping"):
        assert cdc_db.rows(f"SELECT * FROM cdc.{table}") == []


def test_disable_db_clears_the_flag(cdc_db):
    cdc_db.execute("EXEC sys.sp_cdc_disable_db").close()
    assert cdc_db.scalar("SELECT is_cdc_enabled FROM sys.databases WHERE name = DB_NAME()") in (0, False)
    with pytest.raises(pyodbc.Error) as excinfo:
        cdc_db.rows("SELECT * FROM cdc.change_tables")
    assert error_number(excinfo) == 208


def test_enable_table_before_the_database_fails_with_22901(plain_db):
    plain_db.execute("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY)").close()
    with pytest.raises(pyodbc.Error) as excinfo:
        plain_db.enable_table("t")
    assert error_number(excinfo) == 22901
    assert f"The database '{plain_db.name}' is not enabled for Change Data Capture" in str(excinfo.value)


def test_enable_table_sets_is_tracked_by_cdc_and_metadata(cdc_db):
    cdc_db.execute(ORDERS).close()
    cdc_db.enable_table("orders")
    assert cdc_db.scalar("SELECT is_tracked_by_cdc FROM sys.tables WHERE name = 'orders'") in (1, True)
    (row,) = cdc_db.rows(
        "SELECT capture_instance, supports_net_changes, role_name, index_name, start_lsn, end_lsn "
        "FROM cdc.change_tables"
    )
    assert row[0] == "dbo_orders" and row[1] in (1, True) and row[2] is None
    assert row[3].startswith("PK")
    assert lsn(row[4]) is not None and len(row[4]) == 10 and row[5] is None
    columns = cdc_db.rows(
        "SELECT cc.column_name, cc.column_ordinal, cc.column_type FROM cdc.captured_columns cc "
        "ORDER BY cc.column_ordinal"
    )
    assert columns == [
        ("order_id", 1, "int"),
        ("customer", 2, "nvarchar"),
        ("amount", 3, "decimal"),
        ("notes", 4, "nvarchar"),
        ("updated", 5, "datetime2"),
    ]
    assert cdc_db.rows("SELECT column_name, index_ordinal FROM cdc.index_columns") == [("order_id", 1)]


def test_help_change_data_capture_columns_in_order(cdc_db):
    cdc_db.execute(ORDERS).close()
    cdc_db.enable_table("orders", captured_column_list="order_id, amount")
    cursor = cdc_db.execute(
        "EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N'orders'"
    )
    names = [d[0] for d in cursor.description]
    assert names == [
        "source_schema",
        "source_table",
        "capture_instance",
        "object_id",
        "source_object_id",
        "start_lsn",
        "end_lsn",
        "supports_net_changes",
        "has_drop_pending",
        "role_name",
        "index_name",
        "filegroup_name",
        "create_date",
        "index_column_list",
        "captured_column_list",
    ]
    (row,) = cursor.fetchall()
    assert row.source_table == "orders" and row.capture_instance == "dbo_orders"
    assert row.index_column_list == "[order_id]"
    assert row.captured_column_list == "[order_id], [amount]"


def test_get_captured_columns(cdc_db):
    cdc_db.execute(ORDERS).close()
    cdc_db.enable_table("orders")
    cursor = cdc_db.execute("EXEC sys.sp_cdc_get_captured_columns @capture_instance = N'dbo_orders'")
    assert [d[0] for d in cursor.description] == [name for name, _, _ in CAPTURED_COLUMNS_RESULT]
    rows = {r.column_name: r for r in cursor.fetchall()}
    assert rows["amount"].data_type == "decimal" and rows["amount"].numeric_precision == 18
    assert rows["amount"].numeric_scale == 4
    assert rows["customer"].character_maximum_length == 50
    assert rows["notes"].character_maximum_length == -1
    assert rows["updated"].datetime_precision == 3


def test_third_capture_instance_fails_with_22962(cdc_db):
    cdc_db.execute(ORDERS).close()
    cdc_db.enable_table("orders")
    cdc_db.enable_table("orders", capture_instance="orders_v2")
    with pytest.raises(pyodbc.Error) as excinfo:
        cdc_db.enable_table("orders", capture_instance="orders_v3")
    assert error_number(excinfo) == 22962
    assert "Two capture instances already exist for source table 'dbo.orders'" in str(excinfo.value)


def test_duplicate_capture_instance_name_fails_with_22926(cdc_db):
    cdc_db.execute(ORDERS).close()
    cdc_db.execute("CREATE TABLE dbo.other (id int NOT NULL PRIMARY KEY)").close()
    cdc_db.enable_table("orders", capture_instance="shared")
    with pytest.raises(pyodbc.Error) as excinfo:
        cdc_db.enable_table("other", capture_instance="shared")
    assert error_number(excinfo) == 22926


def test_net_changes_without_primary_key_or_unique_index_fails_with_22939(cdc_db):
    cdc_db.execute("CREATE TABLE dbo.heap (id int NOT NULL, v int NULL)").close()
    with pytest.raises(pyodbc.Error) as excinfo:
        cdc_db.enable_table("heap", supports_net_changes=1)
    assert error_number(excinfo) == 22939
    # without net changes the heap can be tracked, and only the all-changes function exists
    cdc_db.enable_table("heap", supports_net_changes=0)
    assert cdc_db.scalar("SELECT supports_net_changes FROM cdc.change_tables") in (0, False)


def test_unique_index_can_identify_rows_for_net_changes(cdc_db):
    cdc_db.execute(
        "CREATE TABLE dbo.people (id int NOT NULL, email nvarchar(100) NOT NULL, "
        "CONSTRAINT UQ_people_email UNIQUE (email))"
    ).close()
    cdc_db.enable_table("people", supports_net_changes=1, index_name="UQ_people_email")
    assert cdc_db.rows("SELECT index_name FROM cdc.change_tables") == [("UQ_people_email",)]
    assert cdc_db.rows("SELECT column_name FROM cdc.index_columns") == [("email",)]


def test_unknown_source_table_fails_with_22931(cdc_db):
    with pytest.raises(pyodbc.Error) as excinfo:
        cdc_db.enable_table("missing")
    assert error_number(excinfo) == 22931


def test_disable_table_removes_the_instance(cdc_db):
    cdc_db.execute(ORDERS).close()
    cdc_db.enable_table("orders")
    cdc_db.execute(
        "EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', @capture_instance = N'all'"
    ).close()
    assert cdc_db.rows("SELECT * FROM cdc.change_tables") == []
    assert cdc_db.scalar("SELECT is_tracked_by_cdc FROM sys.tables WHERE name = 'orders'") in (0, False)


def test_role_gating_denies_change_data_to_a_user_outside_the_role(cdc_db):
    cdc_db.execute(ORDERS).close()
    cdc_db.enable_table("orders", role_name="cdc_reader")
    cdc_db.execute("INSERT INTO dbo.orders (order_id, amount) VALUES (1, 10)").close()
    cdc_db.capture()
    login = f"reader_{uuid.uuid4().hex[:8]}"
    password = "Rdr-" + uuid.uuid4().hex[:12] + "!"
    cdc_db.execute(f"CREATE LOGIN [{login}] WITH PASSWORD = '{password}'").close()
    try:
        cdc_db.execute(f"CREATE USER [{login}] FOR LOGIN [{login}]").close()
        if not cdc_db.backend.simulated:
            # SQL Server also requires SELECT on the captured columns; the simulator models only the role.
            cdc_db.execute(f"GRANT SELECT ON SCHEMA::dbo TO [{login}]").close()
        outsider = cdc_db.connect(UID=login, PWD=password)
        try:
            cursor = outsider.cursor()
            assert lsn(cursor.execute("SELECT sys.fn_cdc_get_min_lsn('dbo_orders')").fetchone()[0]) == bytes(
                10
            )
            with pytest.raises(pyodbc.Error) as excinfo:
                cursor.execute(
                    "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(sys.fn_cdc_get_max_lsn(), "
                    "sys.fn_cdc_get_max_lsn(), N'all')"
                ).fetchall()
            assert error_number(excinfo) == 229
            # once in the gating role, the same user reads the changes (new connection: new token)
            cdc_db.execute(f"ALTER ROLE [cdc_reader] ADD MEMBER [{login}]").close()
            outsider.close()
            outsider = cdc_db.connect(UID=login, PWD=password)
            cursor = outsider.cursor()
            rows = cursor.execute(
                "DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn('dbo_orders'), @t binary(10) = sys.fn_cdc_get_max_lsn(); "
                "SELECT order_id FROM cdc.fn_cdc_get_all_changes_dbo_orders(@f, @t, N'all')"
            ).fetchall()
            assert [r[0] for r in rows] == [1]
        finally:
            outsider.close()
    finally:
        with contextlib.suppress(pyodbc.Error):
            cdc_db.execute(f"DROP USER [{login}]").close()
        cdc_db.execute(f"DROP LOGIN [{login}]").close()


def test_rowversion_is_captured_as_binary_8(cdc_db):
    cdc_db.execute("CREATE TABLE dbo.versioned (id int NOT NULL PRIMARY KEY, rv rowversion)").close()
    cdc_db.enable_table("versioned")
    assert cdc_db.rows(
        "SELECT column_name, column_type FROM cdc.captured_columns ORDER BY column_ordinal"
    ) == [
        ("id", "int"),
        ("rv", "timestamp"),
    ]
    (row,) = cdc_db.rows(
        "SELECT ty.name, c.max_length FROM sys.columns c JOIN sys.types ty ON ty.user_type_id = c.user_type_id "
        "WHERE c.object_id = OBJECT_ID('cdc.dbo_versioned_CT') AND c.name = 'rv'"
    )
    assert row == ("binary", 8)


def test_role_name_must_be_given(cdc_db):
    cdc_db.execute(ORDERS).close()
    with pytest.raises(pyodbc.Error) as excinfo:
        cdc_db.execute("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders'")
    assert error_number(excinfo) == 201
    assert "expects parameter '@role_name', which was not supplied" in str(excinfo.value)
    with pytest.raises(pyodbc.Error) as excinfo:
        cdc_db.enable_table("orders", role_name="")
    assert error_number(excinfo) == 22907
