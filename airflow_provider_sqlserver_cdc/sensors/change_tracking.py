"""ChangeTrackingVersionSensor: wait until CHANGE_TRACKING_CURRENT_VERSION() can serve the run's windows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.sensor import BaseSensorOperator

from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names
from airflow_provider_sqlserver_cdc.hooks.change_tracking_source import ChangeTrackingSourceMixin
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_WINDOW_MODE

if TYPE_CHECKING:
    from airflow.sdk import Context


class ChangeTrackingVersionSensor(ChangeTrackingSourceMixin, BaseSensorOperator):
    """
    Succeed when ``CHANGE_TRACKING_CURRENT_VERSION()`` is readable and not below any table's watermark.

    Change tracking has no capture job: a version exists as soon as its transaction commits, so
    there is no lag to wait for on a primary. The sensor waits while the version is below a
    watermark (a readable secondary or a restored database that is behind) and, in interval mode,
    until the server clock has passed the run's ``data_interval_end``; it fails at once when change
    tracking is off for the database.

    :param capture_instance: the tracked tables (``schema.table``) whose watermarks are checked.
    :param sqlserver_cdc_conn_id: Airflow connection (type ``mssql``) of the source.
    :param database: source database; defaults to the connection's schema.
    :param window_mode: ``interval`` or ``watermark`` (as the extract's).
    """

    template_fields: Sequence[str] = ("capture_instance", "sqlserver_cdc_conn_id", "database", "window_mode")
    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        capture_instance: str | list[str] | None = None,
        sqlserver_cdc_conn_id: str = SqlServerCdcHook.default_conn_name,
        database: str | None = None,
        window_mode: str = DEFAULT_WINDOW_MODE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.window_mode = window_mode
        self.capture_instance = capture_instance
        self.sqlserver_cdc_conn_id = sqlserver_cdc_conn_id
        self.database = database

    def poke(self, context: Context) -> bool:
        from airflow_provider_sqlserver_cdc.hooks.change_tracking import (
            lsn_version,
            split_table_name,
            tracked_table_name,
        )
        from airflow_provider_sqlserver_cdc.state import read_watermark
        from airflow_provider_sqlserver_cdc.window.change_window import watermark_key

        with self.source_hook() as hook:
            current = hook.current_version()
            database = hook.source_database()
            interval_end = context.get("data_interval_end")
            if self.window_mode == "interval" and interval_end is not None:
                server_now = hook.get_server_now()
                if server_now < interval_end:
                    self.log.info("waiting: the server clock %s has not passed %s", server_now, interval_end)
                    return False
        behind = []
        for name in capture_instance_names(self.capture_instance):
            key = watermark_key(
                self.sqlserver_cdc_conn_id, database, tracked_table_name(*split_table_name(name))
            )
            mark = read_watermark(key)
            if mark is not None and lsn_version(mark.position) > current:
                behind.append(f"{name} (watermark {lsn_version(mark.position)})")
        if behind:
            self.log.info(
                "waiting: CHANGE_TRACKING_CURRENT_VERSION() %d is below %s", current, ", ".join(behind)
            )
            return False
        self.log.info("ready: CHANGE_TRACKING_CURRENT_VERSION() is %d", current)
        return True
