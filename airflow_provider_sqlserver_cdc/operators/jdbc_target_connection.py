"""An Airflow connection to a relational target database: the JDBC URL for the merge job and its login.

The URL names host, port and database only; the login goes to the job through the environment of
the spark-submit process (``JDBC_LOGIN_ENV``), never through its arguments, logs or XCom.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import (
    PASSWORD_ENV,
    USER_ENV,
    check_jdbc_url,
)

POSTGRES_CONN_TYPES = ("postgres", "postgresql")
#: Connection extras passed on as parameters of the PostgreSQL JDBC URL (none of them secret).
POSTGRES_URL_EXTRAS = ("sslmode", "sslrootcert", "ApplicationName", "connectTimeout", "options")


@dataclass(frozen=True)
class JdbcTarget:
    """Where the merge job writes: the JDBC URL (no credentials) and the login, kept out of ``repr``."""

    url: str
    user: str
    password: str = field(repr=False)

    def environment(self) -> dict[str, str]:
        """The environment variables that give the job its login."""
        return {USER_ENV: self.user, PASSWORD_ENV: self.password}


def jdbc_target_from_connection(conn_id: str, connection: Any) -> JdbcTarget:
    """Build the JDBC target from an Airflow connection of type ``postgres`` (or ``jdbc``, whose host is the URL).

    :param conn_id: the connection id, for messages.
    :param connection: the Airflow ``Connection``.
    """
    conn_type = (connection.conn_type or "").lower()
    extra: Mapping[str, Any] = connection.extra_dejson or {}
    if conn_type in POSTGRES_CONN_TYPES:
        if not connection.host or not connection.schema:
            raise ValueError(
                f"connection {conn_id!r}: a PostgreSQL target needs host and schema (the database name)"
            )
        parameters = {k: str(extra[k]) for k in POSTGRES_URL_EXTRAS if k in extra}
        url = f"jdbc:postgresql://{connection.host}:{connection.port or 5432}/{quote(connection.schema, safe='')}"
        if parameters:
            url += "?" + urlencode(parameters)
    elif conn_type == "jdbc":
        url = str(connection.host or "")
    else:
        raise ValueError(
            f"connection {conn_id!r} is of type {conn_type!r}: the relational target takes a 'postgres' connection "
            "(or 'jdbc' with the URL as host)"
        )
    try:
        check_jdbc_url(url)
    except Exception as err:
        raise ValueError(f"connection {conn_id!r}: {err}") from None
    if not connection.login:
        raise ValueError(f"connection {conn_id!r} has no login for the target database")
    return JdbcTarget(url, connection.login, connection.password or "")
