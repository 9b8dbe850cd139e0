"""ChangeTrackingSourceMixin: the Change Tracking source hook opened at run time, never at parse time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook


class ChangeTrackingSourceMixin:
    """Open the source as a ChangeTrackingHook when the task runs (never when the DAG is parsed)."""

    sqlserver_cdc_conn_id: str
    database: str | None
    server_time_zone: str | None = None

    @contextmanager
    def source_hook(self, connection: Any = None) -> Iterator[ChangeTrackingHook]:
        """Yield a ChangeTrackingHook of the source and close its connection afterwards."""
        from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook

        hook = ChangeTrackingHook(
            self.sqlserver_cdc_conn_id, database=self.database, server_time_zone=self.server_time_zone
        )
        if connection is not None:
            hook.connection = connection
        try:
            yield hook
        finally:
            hook.close()
