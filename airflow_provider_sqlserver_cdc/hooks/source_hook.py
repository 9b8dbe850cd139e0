"""SourceHookMixin: the source-connection arguments of operators, sensor and trigger; the hook they open."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook


class SourceHookMixin:
    """
    Open the source's SqlServerCdcHook when a task runs, never when its DAG is parsed.

    The class using it sets ``sqlserver_cdc_conn_id``, ``database`` and (optionally)
    ``server_time_zone``. The hook module is imported only here, at run time, so the triggerer
    and DAG parsing do not load the driver stack.
    """

    sqlserver_cdc_conn_id: str
    database: str | None
    server_time_zone: str | None = None

    def new_source_hook(self) -> SqlServerCdcHook:
        """A new hook of the source (a subclass opens a subclass of SqlServerCdcHook)."""
        from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook

        return SqlServerCdcHook(
            self.sqlserver_cdc_conn_id, database=self.database, server_time_zone=self.server_time_zone
        )

    @contextmanager
    def source_hook(self, connection: Connection | None = None) -> Iterator[SqlServerCdcHook]:
        """
        Yield a hook of the source and close its connection afterwards.

        :param connection: the Airflow connection, when the caller fetched it already (the trigger
            fetches it with the async API); None: the hook looks it up itself.
        """
        hook = self.new_source_hook()
        if connection is not None:
            hook.connection = connection  # fills the hook's cached property: no second lookup
        try:
            yield hook
        finally:
            hook.close()
