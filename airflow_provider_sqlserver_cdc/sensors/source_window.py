"""SourceWindowSensor: the arguments every sensor of the source shares (tables, connection, window mode)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator

from airflow_provider_sqlserver_cdc.source_task import SourceTaskOperator
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_WINDOW_MODE


class SourceWindowSensor(BaseSensorOperator, SourceTaskOperator):
    """
    The base of LsnSensor and ChangeTrackingVersionSensor: wait until the source can serve a run's windows.

    A sensor that reads the source as :class:`SourceTaskOperator` does (its source-connection
    arguments: ``sqlserver_cdc_conn_id``, ``database``, ``server_time_zone``) and:

    :param capture_instance: capture instance(s), or tracked tables (``schema.table``).
    :param window_mode: ``interval`` or ``watermark`` (as the extract's).
    """

    template_fields: Sequence[str] = ("capture_instance", "sqlserver_cdc_conn_id", "database", "window_mode")
    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        capture_instance: str | list[str] | None = None,
        window_mode: str = DEFAULT_WINDOW_MODE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.capture_instance = capture_instance
        self.window_mode = window_mode
