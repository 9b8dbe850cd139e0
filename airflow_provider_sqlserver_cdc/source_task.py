"""SourceTaskOperator: the base of every task that reads the source, operators and sensors alike."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_sqlserver_cdc.hooks.source_hook import SourceHookMixin
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_SQLSERVER_CDC_CONN_ID


class SourceTaskOperator(SourceHookMixin, BaseOperator):
    """
    An operator that reads the source: the connection arguments, and the hook it opens when it runs.

    The sensors of the source build on it too (``sensors.source_window.SourceWindowSensor``).

    :param sqlserver_cdc_conn_id: Airflow connection (type ``sqlserver_cdc`` or ``mssql``) of the source.
    :param database: source database; defaults to the connection's schema.
    :param server_time_zone: IANA zone of the server when it observes daylight-saving time.
    """

    def __init__(
        self,
        *,
        sqlserver_cdc_conn_id: str = DEFAULT_SQLSERVER_CDC_CONN_ID,
        database: str | None = None,
        server_time_zone: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sqlserver_cdc_conn_id = sqlserver_cdc_conn_id
        self.database = database
        self.server_time_zone = server_time_zone
