"""
Airflow connections for tests, the demo and benchmarks, given as ``AIRFLOW_CONN_<ID>`` variables.

Airflow reads a connection from the environment variable ``AIRFLOW_CONN_<CONN_ID upper-case>``
holding its JSON form; a DAG run in a child process finds it there without a metadata DB entry::

    env[connection_variable("sim")] = mssql_connection_json(host, port, "sa", password, "shop")

(``mssql_connection_json`` is the simulator's: ``sqlserver_cdc_simulator.connections``.)
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
