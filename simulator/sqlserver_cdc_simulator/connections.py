"""
How a client reaches a simulator: an ODBC connection string, or an Airflow ``mssql`` connection in JSON.

FreeTDS (Debian's ``tdsodbc``) speaks TDS 7.4 to it; Microsoft's ODBC Driver 18 uses TLS with the
simulator's self-signed certificate trusted::

    pyodbc.connect(odbc_connection_string(host="127.0.0.1", port=port, user="sa", password=pw))
    env["AIRFLOW_CONN_SIM"] = mssql_connection_json("127.0.0.1", port, "sa", pw, "shop")

A connection string holds the password: never log it.
"""

from __future__ import annotations

import json

FREETDS_DRIVER = "FreeTDS"
MS_ODBC_DRIVER = "ODBC Driver 18 for SQL Server"

MS_DRIVER_OPTIONS = {"Encrypt": "yes", "TrustServerCertificate": "yes"}
"""Driver 18's options against the simulator: TLS as in production, its self-signed certificate trusted."""

FREETDS_OPTIONS = {"TDS_Version": "7.4", "ClientCharset": "UTF-8"}
"""FreeTDS's options: the TDS version the simulator speaks, and UTF-8 on the client side."""


def is_freetds(driver: str) -> bool:
    """
    Whether ``driver`` names the FreeTDS ODBC driver (it takes ``SERVER`` and ``PORT`` apart).

    :param driver: the ODBC driver name.
    """
    return "freetds" in driver.lower()


def _braced(value: str) -> str:
    """An ODBC value, in braces (``}`` doubled) when it needs them."""
    if value == "" or any(ch in value for ch in ";{}=") or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


def odbc_connection_string(
    *,
    host: str,
    port: int = 1433,
    database: str | None = None,
    user: str | None = None,
    password: str | None = None,
    driver: str = FREETDS_DRIVER,
) -> str:
    """
    Return an ODBC connection string to a simulator (or any SQL Server) with ``driver``.

    :param host: the server's address.
    :param port: its TCP port.
    :param database: the database to use (the login's default when not given).
    :param user: the SQL login; without it, no ``UID``/``PWD``.
    :param password: the login's password.
    :param driver: the ODBC driver name (FreeTDS unless given).
    """
    parts = {"DRIVER": "{" + driver.strip("{}") + "}"}
    if is_freetds(driver):
        parts.update({"SERVER": _braced(host), "PORT": str(port), **FREETDS_OPTIONS})
    else:
        parts.update({"SERVER": _braced(f"tcp:{host},{port}"), **MS_DRIVER_OPTIONS})
    if database:
        parts["DATABASE"] = _braced(database)
    if user:
        parts.update({"UID": _braced(user), "PWD": _braced(password or "")})
    return ";".join(f"{key}={value}" for key, value in parts.items()) + ";"


def mssql_connection_json(
    host: str, port: int, login: str, password: str, database: str, *, driver: str = FREETDS_DRIVER
) -> str:
    """
    Return the JSON form of an Airflow ``mssql`` connection (the value of ``AIRFLOW_CONN_<ID>``) with ``driver``.

    The driver is named in the connection's extra: set ``AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA=True``
    where it is used, as the test suite, the demo and the benchmarks do. Microsoft's drivers get
    ``encrypt`` and ``trust_server_certificate`` (the simulator's certificate is self-signed).

    :param host: the server's address.
    :param port: its TCP port.
    :param login: the SQL login.
    :param password: its password.
    :param database: the database (the connection's ``schema``).
    :param driver: the ODBC driver (FreeTDS unless given).
    """
    extra: dict[str, object] = {"driver": driver}
    if not is_freetds(driver):
        extra.update({"encrypt": True, "trust_server_certificate": True})
    return json.dumps(
        {
            "conn_type": "mssql",
            "host": host,
            "port": port,
            "login": login,
            "password": password,
            "schema": database,
            "extra": extra,
        }
    )
