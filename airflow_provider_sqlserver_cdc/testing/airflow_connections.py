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


def mssql_connection_json(host: str, port: int, login: str, password: str, database: str) -> str:
    """
    Return the JSON form of an ``mssql`` connection that the CDC hook opens with pyodbc + FreeTDS.

    The driver is named in the connection's extra (the simulator speaks no TLS, which Microsoft's
    driver 18 wants): set ``AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA=True`` where it is used,
    as the test suite, the demo and the benchmarks do.

    :param host: the server's address.
    :param port: its TCP port.
    :param login: the SQL login.
    :param password: its password.
    :param database: the database (the connection's ``schema``).
    """
    return json.dumps(
        {
            "conn_type": "mssql",
            "host": host,
            "port": port,
            "login": login,
            "password": password,
            "schema": database,
            "extra": {"driver": "FreeTDS"},
        }
    )
