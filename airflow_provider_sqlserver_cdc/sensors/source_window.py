"""SourceWindowSensor: the arguments every sensor of the source shares (tables, connection, window mode)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator

from airflow_provider_sqlserver_cdc.hooks.source_hook import SourceHookMixin
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_WINDOW_MODE


class SourceWindowSensor(SourceHookMixin, BaseSensorOperator):
    """
    The base of LsnSensor and ChangeTrackingVersionSensor: wait until the source can serve a run's windows.

    :param capture_instance: capture instance(s), or tracked tables (``schema.table``).
    :param sqlserver_cdc_conn_id: Airflow connection (type ``sqlserver_cdc`` or ``mssql``) of the source.
    :param database: source database; defaults to the connection's schema.
    :param window_mode: ``interval`` or ``watermark`` (as the extract's).
    :param server_time_zone: IANA zone of the server when it observes daylight-saving time.
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
        server_time_zone: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.capture_instance = capture_instance
        self.sqlserver_cdc_conn_id = sqlserver_cdc_conn_id
        self.database = database
        self.window_mode = window_mode
        self.server_time_zone = server_time_zone
