"""ODBC connection strings: from an Airflow connection (through the hook) and from explicit parts."""

from __future__ import annotations

import pyodbc
import pytest

from airflow_provider_sqlserver_cdc.hooks.odbc_connection import (
    FREETDS_DRIVER,
    MS_ODBC_DRIVER,
    odbc_connection_string,
    odbc_value,
    parse_odbc_connection_string,
    redact,
    yes_no,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook


def test_freetds_connection_string_escapes_values(conn_env, secret):
    hook = SqlServerCdcHook(conn_env(driver="FreeTDS"))
    text = hook.odbc_connection_string()
    assert text.startswith("DRIVER={FreeTDS};SERVER=db.example;PORT=14330;TDS_Version=7.4;")
    assert "DATABASE=shop;" in text and "UID=cdc_reader;" in text
    assert "PWD={s3cr;et}}pw};" in text
    assert hook.server == "db.example:14330"
    assert secret not in hook.server


def test_microsoft_driver_uses_encrypt_extras(conn_env):
    hook = SqlServerCdcHook(
        conn_env(driver="ODBC Driver 18 for SQL Server", encrypt="false", trust_server_certificate=True),
        database="other",
    )
    text = hook.odbc_connection_string()
    assert "SERVER=tcp:db.example,14330;" in text
    assert "Encrypt=no;TrustServerCertificate=yes;" in text
    assert "DATABASE=other;" in text


def test_freetds_tds_version_extra_and_braced_driver(conn_env):
    hook = SqlServerCdcHook(conn_env(driver="{FreeTDS}", tds_version="7.3"))
    assert hook.odbc_driver == "FreeTDS"
    assert "TDS_Version=7.3;ClientCharset=UTF-8;" in hook.odbc_connection_string()


def test_default_driver_is_an_installed_one(conn_env):
    hook = SqlServerCdcHook(conn_env())
    assert hook.odbc_driver in pyodbc.drivers()


def test_odbc_value():
    assert odbc_value("plain") == "plain"
    assert odbc_value("a;b") == "{a;b}"
    assert odbc_value("a}b") == "{a}}b}"
    assert odbc_value(" x") == "{ x}"
    assert odbc_value("") == "{}"
    assert odbc_value("a=b") == "{a=b}"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "yes"),
        (False, "no"),
        ("true", "yes"),
        ("Mandatory", "yes"),
        ("1", "yes"),
        ("false", "no"),
        (0, "no"),
    ],
)
def test_yes_no(value, expected):
    assert yes_no(value) == expected


def test_explicit_parts_for_freetds():
    text = odbc_connection_string(
        host="127.0.0.1", port=50123, database="shop", user="sa", password="Sim-ab;c!", driver=FREETDS_DRIVER
    )
    assert text == (
        "DRIVER={FreeTDS};SERVER=127.0.0.1;PORT=50123;TDS_Version=7.4;ClientCharset=UTF-8;"
        "DATABASE=shop;UID=sa;PWD={Sim-ab;c!};"
    )


def test_explicit_parts_without_database_or_login():
    text = odbc_connection_string(host="db", driver=MS_ODBC_DRIVER)
    assert (
        text
        == "DRIVER={ODBC Driver 18 for SQL Server};SERVER=tcp:db,1433;Encrypt=yes;TrustServerCertificate=no;"
    )


def test_options_replace_driver_defaults_and_add_keys():
    text = odbc_connection_string(
        host="db", port=1, user="u", password="p", options={"tds_version": "8.0", "Timeout": 5}
    )
    assert "tds_version=8.0;ClientCharset=UTF-8;Timeout=5;" in text
    assert "TDS_Version=7.4" not in text


def test_parse_round_trips_braced_values():
    text = odbc_connection_string(host="db", port=2, database="d b", user="u", password="a;b}}c{ ")
    parts = parse_odbc_connection_string(text)
    assert parts["PWD"] == "a;b}}c{ "
    assert parts["DATABASE"] == "d b"
    assert parts["DRIVER"] == "FreeTDS"
    assert parts["PORT"] == "2"


def test_redact_hides_the_password_only(secret):
    text = odbc_connection_string(host="db", port=2, user="u", password=secret)
    redacted = redact(text)
    assert secret not in redacted and "s3cr" not in redacted
    assert "PWD=***" in redacted and "UID=u;" in redacted and "SERVER=db;" in redacted
    assert redact("DRIVER=FreeTDS;Password=x;") == "DRIVER=FreeTDS;PASSWORD=***;"


def test_importing_it_does_not_configure_airflow():
    """The simulator's pytest plugin imports it before a suite's conftest has set AIRFLOW_HOME."""
    import subprocess
    import sys

    code = (
        "import sys, airflow_provider_sqlserver_cdc.hooks.odbc_connection; "
        "assert 'airflow.configuration' not in sys.modules, 'airflow configured at import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
