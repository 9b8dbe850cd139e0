"""Driver errors become the provider's errors with actionable messages, never with the password."""

from __future__ import annotations

import pyodbc
import pytest
from airflow.sdk import Connection

from airflow_provider_sqlserver_cdc.errors import (
    CdcNotEnabledError,
    ChangeDataPermissionError,
    LsnRangeError,
    SqlServerCdcError,
    SqlServerLoginError,
)
from airflow_provider_sqlserver_cdc.hooks.driver_errors import (
    ErrorContext,
    driver_message,
    native_error_number,
    translate_driver_error,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook

SECRET = "s3cr;et}pw"
CONNECTION = Connection(conn_id="cdc_src", conn_type="sqlserver_cdc", login="cdc_reader", password=SECRET)
CONTEXT = ErrorContext.of_connection(CONNECTION, server="db.example:14330", database="shop", driver="FreeTDS")


@pytest.mark.parametrize(
    ("message", "number", "error"),
    [
        (
            "[28000] [FreeTDS][SQL Server]Login failed for user 'x'. (18456) (SQLDriverConnect)",
            18456,
            SqlServerLoginError,
        ),
        (
            "[42000] [FreeTDS][SQL Server]The SELECT permission was denied on the object 'fn_cdc_get_all_changes_dbo_t', "
            "database 'shop', schema 'cdc'. (229) (SQLExecDirectW)",
            229,
            ChangeDataPermissionError,
        ),
        (
            "[42000] [FreeTDS][SQL Server]An insufficient number of arguments were supplied for the procedure or "
            "function cdc.fn_cdc_get_all_changes_ ... . (313) (SQLExecDirectW)",
            313,
            LsnRangeError,
        ),
        (
            "[42S02] [FreeTDS][SQL Server]Invalid object name 'cdc.change_tables'. (208) (SQLExecDirectW)",
            208,
            CdcNotEnabledError,
        ),
    ],
)
def test_driver_errors_become_provider_errors(conn_env, message, number, error):
    err = pyodbc.ProgrammingError("42000", message)
    assert native_error_number(err) == number
    translated = SqlServerCdcHook(conn_env())._translate(err, "reading change data", "dbo_t")
    assert isinstance(translated, error)
    assert "db.example:14330" in str(translated)
    assert not str(translated).startswith("[")


def test_arrow_odbc_message_and_native_error():
    err = RuntimeError(
        "External error: State: 42000, Native error: 229, Message: [FreeTDS][SQL Server]denied"
    )
    assert native_error_number(err) == 229
    assert driver_message(err) == "denied"


def test_connection_errors_name_the_driver_and_connection():
    err = pyodbc.OperationalError(
        "08001", "[08001] [FreeTDS]Unable to connect to data source (0) (SQLDriverConnect)"
    )
    translated = translate_driver_error(err, "connecting", CONTEXT)
    assert isinstance(translated, SqlServerLoginError)
    assert "'FreeTDS'" in str(translated) and "'cdc_src'" in str(translated)


def test_other_errors_keep_the_instance_and_the_place():
    err = pyodbc.ProgrammingError(
        "42000", "[42000] [FreeTDS][SQL Server]Something else. (50000) (SQLExecDirectW)"
    )
    translated = translate_driver_error(err, "reading change data", CONTEXT, "dbo_t")
    assert type(translated) is SqlServerCdcError
    assert str(translated) == (
        "SQL Server error while reading change data for capture instance 'dbo_t' (server db.example:14330, "
        "database shop): Something else. (50000) (SQLExecDirectW)"
    )


def test_a_password_the_driver_echoes_is_hidden():
    err = pyodbc.Error("HY000", f"[HY000] [FreeTDS]Bad attribute PWD={SECRET} (0) (SQLDriverConnect)")
    translated = translate_driver_error(err, "connecting", CONTEXT)
    assert SECRET not in str(translated) and "PWD=***" in str(translated)
    assert SECRET not in repr(CONTEXT)


def test_only_a_login_the_server_answered_is_marked_refused():
    refused = pyodbc.InterfaceError(
        "28000", "[28000] [FreeTDS][SQL Server]Login failed for user 'x'. (18456) (SQLDriverConnect)"
    )
    unreachable = pyodbc.OperationalError(
        "08001", "[08001] [FreeTDS][SQL Server]Unable to connect to data source (0) (SQLDriverConnect)"
    )
    assert translate_driver_error(refused, "connecting", CONTEXT).refused is True
    assert translate_driver_error(unreachable, "connecting", CONTEXT).refused is False
