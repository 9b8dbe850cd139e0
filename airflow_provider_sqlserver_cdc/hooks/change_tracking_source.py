"""ChangeTrackingSourceMixin: the Change Tracking source hook opened at run time, never at parse time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.hooks.source_hook import SourceHookMixin

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook


class ChangeTrackingSourceMixin(SourceHookMixin):
    """Open the source as a ChangeTrackingHook when the task runs (never when the DAG is parsed)."""

    def new_source_hook(self) -> ChangeTrackingHook:
        """A new ChangeTrackingHook of the source."""
        from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook

        return ChangeTrackingHook(
            self.sqlserver_cdc_conn_id, database=self.database, server_time_zone=self.server_time_zone
        )
