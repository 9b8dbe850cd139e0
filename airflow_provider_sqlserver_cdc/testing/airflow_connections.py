"""
Airflow connections for tests, the demo and benchmarks, given as ``AIRFLOW_CONN_<ID>`` variables.

Airflow reads a connection from the environment variable ``AIRFLOW_CONN_<CONN_ID upper-case>``
holding its JSON form; a DAG run in a child process finds it there without a metadata DB entry::

    env[connection_variable("sim")] = mssql_connection_json(host, port, "sa", password, "shop")
"""

from __future__ import annotations

import json

LOCAL_SPARK_CONNECTION = json.dumps(
    {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}
)
"""``spark_default`` for a local Spark: ``local[2]`` master, client deploy mode."""


def connection_variable(conn_id: str) -> str:
    """
    Return the name of the environment variable Airflow reads connection ``conn_id`` from.

    :param conn_id: the Airflow connection id.
    """
    return f"AIRFLOW_CONN_{conn_id.upper()}"


def mssql_connection_json(
    host: str, port: int, login: str, password: str, database: str, *, driver: str = "FreeTDS"
) -> str:
    """
    Return the JSON form of an ``mssql`` connection that the CDC hook opens with pyodbc and ``driver``.

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
    if "freetds" not in driver.lower():
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
