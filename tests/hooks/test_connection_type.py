"""The ``sqlserver_cdc`` connection type: its form, the driver rule, and test_connection against the simulator."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from airflow_provider_sqlserver_cdc.errors import DriverNotAllowedError
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook

ALLOW = "AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA"
DEFAULT_DRIVER = "AIRFLOW__SQLSERVER_CDC__DEFAULT_DRIVER"


def connection(sim, *, conn_type="sqlserver_cdc", database="shop", password=None, **extra) -> str:
    """The JSON of a connection to the simulator (no driver extra unless given)."""
    return json.dumps(
        {
            "conn_type": conn_type,
            "host": sim.host,
            "port": sim.port,
            "login": sim.user,
            "password": password or sim.password,
            "schema": database,
            "extra": extra,
        }
    )


@pytest.fixture
def simulator_db(sqlserver_simulator, monkeypatch):
    """The simulator with a CDC-enabled database ``shop``; drivers in extras refused, FreeTDS configured."""
    cur = sqlserver_simulator.connect().cursor()
    cur.execute("CREATE DATABASE shop")
    cur.execute("USE shop")
    cur.execute("EXEC sys.sp_cdc_enable_db")
    monkeypatch.setenv(ALLOW, "False")
    monkeypatch.setenv(DEFAULT_DRIVER, "FreeTDS")
    return sqlserver_simulator


def test_form_fields_and_behaviour_are_registered():
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    widgets = {
        key.rsplit("__", 1)[1] for key in manager.connection_form_widgets if "__sqlserver_cdc__" in key
    }
    assert {"driver", "encrypt", "trust_server_certificate", "application_intent"} <= widgets
    intent = manager.connection_form_widgets["extra__sqlserver_cdc__application_intent"].field
    assert {"ReadOnly", "ReadWrite"} <= set(intent["schema"]["enum"])
    assert (
        "allow_driver_in_extra"
        in manager.connection_form_widgets["extra__sqlserver_cdc__driver"].field["description"]
    )
    assert manager.field_behaviours["sqlserver_cdc"]["relabeling"] == {"schema": "Database"}


def test_driver_extra_is_refused_unless_allowed(conn_env, monkeypatch):
    monkeypatch.setenv(ALLOW, "False")
    hook = SqlServerCdcHook(conn_env(driver="/tmp/evil.so"))
    with pytest.raises(DriverNotAllowedError) as info:
        hook.odbc_connection_string()
    message = str(info.value)
    assert "\n" not in message and "'cdc_src'" in message and "'/tmp/evil.so'" in message
    assert "AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA=True" in message
    with pytest.raises(DriverNotAllowedError):  # whatever the case of the key
        SqlServerCdcHook(conn_env(Driver="FreeTDS")).odbc_connection_string()
    monkeypatch.setenv(ALLOW, "True")
    assert hook.odbc_driver == "/tmp/evil.so"


def test_driver_comes_from_the_hook_then_config_then_installed(conn_env, monkeypatch):
    monkeypatch.setenv(ALLOW, "False")
    conn_id = conn_env()
    monkeypatch.setenv(DEFAULT_DRIVER, "ODBC Driver 18 for SQL Server")
    assert SqlServerCdcHook(conn_id).odbc_driver == "ODBC Driver 18 for SQL Server"
    assert SqlServerCdcHook(conn_id, driver="{FreeTDS}").odbc_driver == "FreeTDS"
    monkeypatch.delenv(DEFAULT_DRIVER)
    import pyodbc

    assert SqlServerCdcHook(conn_id).odbc_driver in pyodbc.drivers()


def test_form_values_become_odbc_options(conn_env, monkeypatch):
    monkeypatch.setenv(ALLOW, "False")
    hook = SqlServerCdcHook(
        conn_env(encrypt=None, trust_server_certificate=True, application_intent="readonly", tds_version=""),
        driver="ODBC Driver 18 for SQL Server",
    )
    assert (
        "Encrypt=yes;TrustServerCertificate=yes;ApplicationIntent=ReadOnly;" in hook.odbc_connection_string()
    )
    assert (
        "TDS_Version=7.4;"
        in SqlServerCdcHook(conn_env(tds_version=""), driver="FreeTDS").odbc_connection_string()
    )
    with pytest.raises(ValueError, match="ReadWrite, ReadOnly"):
        SqlServerCdcHook(conn_env(application_intent="sometimes"), driver="FreeTDS").odbc_connection_string()


@pytest.mark.parametrize("conn_type", ["sqlserver_cdc", "mssql"], ids=["own_type", "mssql_type"])
def test_test_connection_succeeds(simulator_db, monkeypatch, conn_type):
    monkeypatch.setenv("AIRFLOW_CONN_SIM", connection(simulator_db, conn_type=conn_type))
    ok, message = SqlServerCdcHook("sim").test_connection()
    assert ok, message
    assert message == (
        f"Connected to SQL Server {simulator_db.host}:{simulator_db.port}, database 'shop' (CDC enabled), "
        "ODBC driver 'FreeTDS'."
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"password": "Wrong-pw-123"}, r"Login failed for user 'sa'.*Check the login, password"),
        ({"database": "nope"}, r"database 'nope'.*Database \(schema\) of Airflow connection 'sim'"),
        ({"driver": "FreeTDS"}, r"refused.*allow_driver_in_extra = True in section sqlserver_cdc"),
    ],
    ids=["bad-password", "unknown-database", "driver-extra"],
)
def test_test_connection_failures_are_one_line(simulator_db, monkeypatch, change, expected):
    monkeypatch.setenv("AIRFLOW_CONN_SIM", connection(simulator_db, **change))
    ok, message = SqlServerCdcHook("sim").test_connection()
    assert not ok
    assert "\n" not in message
    assert "Wrong-pw-123" not in message and simulator_db.password not in message
    assert re.search(expected, message), message


def airflow_connections_test(sim, conn_json: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "AIRFLOW_CONN_CDC_SIM": conn_json,
        "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
        ALLOW: "False",
        DEFAULT_DRIVER: "FreeTDS",
    }
    return subprocess.run(
        [sys.executable, "-m", "airflow", "connections", "test", "cdc_sim"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_airflow_cli_tests_the_connection(simulator_db, airflow_db):
    good = airflow_connections_test(simulator_db, connection(simulator_db))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Connection success!" in good.stdout
    refused = airflow_connections_test(simulator_db, connection(simulator_db, driver="FreeTDS"))
    assert "Connection failed!" in refused.stdout, refused.stdout + refused.stderr
    assert "allow_driver_in_extra = True in section sqlserver_cdc" in refused.stdout
    unknown = airflow_connections_test(simulator_db, connection(simulator_db, database="nope"))
    assert "There is no database 'nope'" in unknown.stdout, unknown.stdout + unknown.stderr
