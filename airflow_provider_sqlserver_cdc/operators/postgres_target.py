"""PostgresTargetOperator: the arguments that name a PostgreSQL target, and its URL and login when a task runs."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook, BaseOperator

from airflow_provider_sqlserver_cdc.operators.jdbc_target_connection import (
    JdbcTarget,
    jdbc_target_from_connection,
)


class PostgresTargetOperator(BaseOperator):
    """
    The base of the operators that write to or report on a PostgreSQL target (the merge, the wait for the apply).

    :param target_conn_id: the target database's Airflow connection (type ``postgres``), looked up
        when the task runs.
    :param jdbc_url: the target's JDBC URL (without credentials), instead of or over the connection's.
    """

    def __init__(
        self, *, target_conn_id: str | None = None, jdbc_url: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.target_conn_id = target_conn_id
        self.jdbc_url = jdbc_url

    def connection_target(self) -> JdbcTarget | None:
        """The target's URL and login from ``target_conn_id`` (a connection lookup); None without one."""
        if not self.target_conn_id:
            return None
        connection = BaseHook.get_connection(self.target_conn_id)
        return jdbc_target_from_connection(self.target_conn_id, connection)

    def target_url(self, target: JdbcTarget | None) -> str | None:
        """The target's JDBC URL: ``jdbc_url`` when given, else that of ``target`` (the connection's)."""
        return self.jdbc_url or (target.url if target is not None else None)
