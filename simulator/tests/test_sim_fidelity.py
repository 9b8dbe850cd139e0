"""Session behaviour drivers depend on: implicit transactions, info message 3621, one version everywhere."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pyodbc
import pytest

from sqlserver_cdc_simulator.events import ErrorEvent, Message
from sqlserver_cdc_simulator.version import VERSION_TEXT

pytestmark = pytest.mark.skipif("FreeTDS" not in pyodbc.drivers(), reason="needs the FreeTDS ODBC driver")


def _connect(sim: Any, database: str = "shop", autocommit: bool = True) -> pyodbc.Connection:
    return pyodbc.connect(sim.odbc_connection_string(database), autocommit=autocommit, timeout=10)


@pytest.fixture
def shop(sqlserver_simulator: Any) -> Any:
    sqlserver_simulator.execute("CREATE DATABASE shop")
    sqlserver_simulator.execute("ALTER DATABASE shop SET ALLOW_SNAPSHOT_ISOLATION ON")
    sqlserver_simulator.execute("CREATE TABLE dbo.t (id int PRIMARY KEY, v int)", database="shop")
    sqlserver_simulator.execute("INSERT INTO dbo.t VALUES (1, 10)", database="shop")
    return sqlserver_simulator


def test_implicit_transactions_follow_the_documented_trancount(shop: Any) -> None:
    """set-implicit-transactions-transact-sql.md: tests B and C of its example, and the SELECT exception."""
    cur = _connect(shop).cursor()
    cur.execute("SET IMPLICIT_TRANSACTIONS ON")
    assert cur.execute("SELECT @@TRANCOUNT").fetchone()[0] == 0  # SELECT without a table: none
    cur.execute("SELECT COUNT(*) FROM dbo.t").fetchall()
    assert cur.execute("SELECT @@TRANCOUNT").fetchone()[0] == 1
    cur.execute("COMMIT TRANSACTION")
    cur.execute("INSERT INTO dbo.t VALUES (2, 20)")
    assert cur.execute("SELECT @@TRANCOUNT").fetchone()[0] == 1
    cur.execute("ROLLBACK")
    assert cur.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 1  # the insert was rolled back
    cur.execute("COMMIT")
    cur.execute("BEGIN TRANSACTION")
    assert cur.execute("SELECT @@TRANCOUNT").fetchone()[0] == 2
    cur.execute("COMMIT TRANSACTION")
    assert cur.execute("SELECT @@TRANCOUNT").fetchone()[0] == 1
    cur.execute("COMMIT TRANSACTION")
    assert cur.execute("SELECT @@TRANCOUNT").fetchone()[0] == 0


def test_implicit_transaction_at_snapshot_isolation_keeps_its_snapshot(shop: Any) -> None:
    """What mssql-jdbc's setAutoCommit(false) + TRANSACTION_SNAPSHOT sends: later commits stay invisible."""
    reader = _connect(shop).cursor()
    reader.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    reader.execute("SET IMPLICIT_TRANSACTIONS ON")
    assert reader.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 1
    writer = _connect(shop).cursor()
    writer.execute("INSERT INTO dbo.t VALUES (3, 30)")
    assert reader.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 1
    reader.execute("COMMIT")
    assert reader.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 2


def test_primary_key_violation_is_followed_by_statement_terminated(shop: Any) -> None:
    """Msg 2627 then info 3621 "The statement has been terminated.", then the batch goes on."""
    session = shop.engine.open_session(shop.engine.logins["sa"], "shop")
    try:
        events = list(session.execute_batch("INSERT INTO dbo.t VALUES (1, 11); SELECT 1"))
    finally:
        shop.engine.close_session(session)
    errors = [i for i, e in enumerate(events) if isinstance(e, ErrorEvent)]
    assert [events[i].error.number for i in errors] == [2627]
    following = events[errors[0] + 1]
    assert isinstance(following, Message)
    assert (following.number, following.severity, following.text) == (
        3621,
        0,
        "The statement has been terminated.",
    )
    # over the wire the connection goes on after the error and its message
    cur = _connect(shop).cursor()
    with pytest.raises(pyodbc.IntegrityError, match="2627"):
        cur.execute("INSERT INTO dbo.t VALUES (1, 11)")
    assert cur.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 1


def _prelogin_version(host: str, port: int) -> str:
    """The VERSION option of the server's PRELOGIN answer, as major.minor.build.sub-build."""
    options = struct.pack(">BHHB", 0, 6, 6, 0xFF) + b"\x00" * 6
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(struct.pack(">BBHHBB", 0x12, 1, 8 + len(options), 0, 1, 0) + options)
        header = sock.recv(8, socket.MSG_WAITALL)
        body = sock.recv(struct.unpack(">H", header[2:4])[0] - 8, socket.MSG_WAITALL)
    pos = 0
    while body[pos] != 0xFF:
        token, offset, length = struct.unpack_from(">BHH", body, pos)
        if token == 0:
            major, minor, build, sub = struct.unpack_from(">BBHH", body, offset)
            return f"{major}.{minor}.{build}.{sub}"
        pos += 5
    raise AssertionError("no VERSION option")


def test_one_version_everywhere(sqlserver_simulator: Any) -> None:
    """PRELOGIN, LOGINACK (FreeTDS's SQL_DBMS_VER), @@VERSION, SERVERPROPERTY and sp_server_info agree."""
    assert VERSION_TEXT == "16.0.4120.1"
    assert _prelogin_version(sqlserver_simulator.host, sqlserver_simulator.port) == VERSION_TEXT
    conn = _connect(sqlserver_simulator, "master")
    assert conn.getinfo(pyodbc.SQL_DBMS_VER) == "16.00.4120"
    cur = conn.cursor()
    version, product = cur.execute(
        "SELECT @@VERSION, CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128))"
    ).fetchone()
    assert f" - {VERSION_TEXT} " in version
    assert product == VERSION_TEXT
    info = {r[1]: r[2] for r in cur.execute("EXEC sp_server_info").fetchall()}
    assert VERSION_TEXT in info["DBMS_VER"]


@pytest.mark.parametrize(
    ("sql", "number", "names"),
    [
        # objects SQL Server has and the simulator lacks: 40517 naming them
        ("SELECT * FROM sys.dm_tran_locks", 40517, "sys.dm_tran_locks"),
        ("SELECT * FROM INFORMATION_SCHEMA.ROUTINES", 40517, "INFORMATION_SCHEMA.ROUTINES"),
        ("EXEC sp_helptext 't'", 40517, "sp_helptext"),
        (
            "SELECT * FROM sys.fn_listextendedproperty(NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
            40517,
            "fn_listextendedproperty",
        ),
        ("SELECT PARSENAME('a.b', 1)", 40517, "PARSENAME"),
        # names SQL Server does not have: its own errors
        ("SELECT * FROM sys.no_such_view", 208, "sys.no_such_view"),
        ("EXEC sp_no_such_procedure", 2812, "sp_no_such_procedure"),
        ("SELECT no_such_function(1)", 195, "no_such_function"),
        ("SELECT dbo.no_such_function(1)", 4121, "dbo.no_such_function"),
        ("SELECT no_such_db.sys.fn_cdc_get_max_lsn()", 4121, "no_such_db"),
    ],
)
def test_unsupported_is_told_apart_from_nonexistent(
    sqlserver_simulator: Any, sql: str, number: int, names: str | None
) -> None:
    cur = _connect(sqlserver_simulator, "master").cursor()
    with pytest.raises(pyodbc.Error) as info:
        cur.execute(sql)
    assert f"({number})" in str(info.value)
    if names:
        assert names in str(info.value)


def test_system_functions_and_views_by_three_part_name(shop: Any) -> None:
    """What a CDC connector sends: [db].sys.fn_cdc_*; also INFORMATION_SCHEMA and dm_server_services."""
    shop.execute("EXEC sys.sp_cdc_enable_db", database="shop")
    shop.execute(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL",
        database="shop",
    )
    shop.execute("INSERT INTO dbo.t VALUES (5, 50)", database="shop")
    shop.run_capture_scan("shop")
    cur = _connect(shop, "master").cursor()
    max_lsn = cur.execute("SELECT [shop].sys.fn_cdc_get_max_lsn()").fetchone()[0]
    assert isinstance(max_lsn, bytes) and len(max_lsn) == 10
    following, when = cur.execute(
        "SELECT [shop].sys.fn_cdc_increment_lsn(?), [shop].sys.fn_cdc_map_lsn_to_time(?)", max_lsn, max_lsn
    ).fetchone()
    assert following > max_lsn and when is not None
    rows = cur.execute(
        "SELECT TABLE_NAME, COLUMN_NAME FROM shop.INFORMATION_SCHEMA.CONSTRAINT_COLUMN_USAGE"
    ).fetchall()
    assert [tuple(r) for r in rows] == [("t", "id")]
    services = dict(cur.execute("SELECT servicename, status_desc FROM sys.dm_server_services").fetchall())
    assert services["SQL Server Agent (MSSQLSERVER)"] == "Running"


def test_catalog_procedures_of_odbc_and_jdbc_metadata(shop: Any) -> None:
    """sp-pkeys / sp-statistics / sp-special-columns / sp-fkeys-transact-sql.md result shapes."""
    cur = _connect(shop).cursor()
    assert [tuple(r) for r in cur.execute("EXEC sp_pkeys @table_name = 't'").fetchall()] == [
        ("shop", "dbo", "t", "id", 1, cur.execute("SELECT name FROM sys.key_constraints").fetchone()[0])
    ]
    statistics = cur.execute("EXEC sp_statistics 't'").fetchall()
    assert [(r.INDEX_NAME is None, r.COLUMN_NAME) for r in statistics] == [(True, None), (False, "id")]
    special = cur.execute("EXEC sp_special_columns 't'").fetchall()
    assert [(r.COLUMN_NAME, r.TYPE_NAME, r.PRECISION, r.LENGTH) for r in special] == [("id", "int", 10, 4)]
    fkeys = cur.execute("EXEC sp_fkeys 't'")
    assert [d[0] for d in fkeys.description][:3] == ["PKTABLE_QUALIFIER", "PKTABLE_OWNER", "PKTABLE_NAME"]
    assert fkeys.fetchall() == []
    columns = cur.execute("EXEC sp_columns 'T%'").fetchall()  # LIKE pattern, case-insensitive
    assert [(r.COLUMN_NAME, r.TYPE_NAME, r.NULLABLE, r.ORDINAL_POSITION) for r in columns] == [
        ("id", "int", 0, 1),
        ("v", "int", 1, 2),
    ]


def test_table_variable_and_insert_exec(shop: Any) -> None:
    """What mssql-jdbc's getColumns sends: DECLARE @t TABLE, INSERT INTO @t EXEC, SELECT FROM @t."""
    cur = _connect(shop).cursor()
    cur.execute(
        "DECLARE @keys TABLE (q sysname, o sysname, t sysname, c sysname, seq smallint, pk sysname);"
        "INSERT INTO @keys EXEC sp_pkeys 't';"
        "SELECT c, seq FROM @keys"
    )
    while cur.description is None:  # the INSERT's row count comes first
        assert cur.nextset()
    assert [tuple(r) for r in cur.fetchall()] == [("id", 1)]
    with pytest.raises(pyodbc.Error, match="213"):
        cur.execute("DECLARE @few TABLE (a int); INSERT INTO @few EXEC sp_pkeys 't'")
    with pytest.raises(pyodbc.Error, match="208"):  # gone with its batch
        cur.execute("SELECT * FROM [#tv_keys]")


@pytest.mark.parametrize(
    ("view", "first_columns"),
    [
        ("sys.foreign_keys", ["name", "object_id", "principal_id"]),
        ("sys.foreign_key_columns", ["constraint_object_id", "constraint_column_id", "parent_object_id"]),
        ("sys.views", ["name", "object_id", "principal_id"]),
        ("sys.procedures", ["name", "object_id", "principal_id"]),
        ("sys.sql_modules", ["object_id", "definition", "uses_ansi_nulls"]),
        (
            "INFORMATION_SCHEMA.REFERENTIAL_CONSTRAINTS",
            ["CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME"],
        ),
        ("INFORMATION_SCHEMA.VIEWS", ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME"]),
    ],
)
def test_views_of_objects_the_simulator_cannot_create_are_empty(
    shop: Any, view: str, first_columns: list[str]
) -> None:
    """No views, procedures or foreign keys can exist here: reflecting them finds none, with SQL Server's columns."""
    cur = _connect(shop).cursor()
    cur.execute(f"SELECT * FROM {view}")
    assert [d[0] for d in cur.description][:3] == first_columns
    assert cur.fetchall() == []


@pytest.mark.parametrize(
    "sql",
    [
        "SET ANSI_NULLS OFF",  # NULL = NULL would be true (set-ansi-nulls-transact-sql.md)
        "SET CONCAT_NULL_YIELDS_NULL OFF",  # 'a' + NULL would be 'a'
        "SET ANSI_WARNINGS OFF",  # truncation and divide by zero would be silent
        "SET QUOTED_IDENTIFIER OFF",  # "x" would be a string
        "SET DATEFIRST 1",  # DATEPART(weekday, …) would count from Monday
        "SET LANGUAGE German",  # date names and formats would change
        "SELECT 1 AS a FOR JSON PATH",  # the rows would become one JSON document
    ],
)
def test_settings_and_clauses_that_change_answers_are_refused(sqlserver_simulator: Any, sql: str) -> None:
    cur = _connect(sqlserver_simulator, "master").cursor()
    with pytest.raises(pyodbc.Error, match="40517"):
        cur.execute(sql)
    assert cur.execute("SELECT CASE WHEN NULL = NULL THEN 1 ELSE 0 END").fetchone()[0] == 0


def test_the_options_drivers_send_at_connect_are_accepted(sqlserver_simulator: Any) -> None:
    """pymssql's and tedious's connection options, and SET ANSI_DEFAULTS ON (implicit transactions on)."""
    cur = _connect(sqlserver_simulator, "master").cursor()
    cur.execute(
        "SET ANSI_NULLS ON; SET ANSI_WARNINGS ON; SET ANSI_PADDING ON; SET CONCAT_NULL_YIELDS_NULL ON;"
        " SET QUOTED_IDENTIFIER ON; SET NUMERIC_ROUNDABORT OFF; SET ARITHABORT ON; SET DATEFIRST 7;"
        " SET DATEFORMAT mdy; SET LANGUAGE us_english; SET TEXTSIZE 2147483647; SET ANSI_NULL_DFLT_ON ON"
    )
    cur.execute("SET ANSI_DEFAULTS ON")
    cur.execute("SELECT COUNT(*) FROM sys.databases").fetchall()
    assert cur.execute("SELECT @@TRANCOUNT").fetchone()[0] == 1
    cur.execute("COMMIT")
