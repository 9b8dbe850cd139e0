"""LsnTrigger: the deferrable form of LsnSensor, polling the server from the triggerer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow.sdk import BaseHook
from airflow.triggers.base import TriggerEvent

from airflow_provider_sqlserver_cdc.hooks.source_hook import SourceHookMixin
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.triggers.dataclass_trigger import DataclassTrigger
from airflow_provider_sqlserver_cdc.window.manifest import DEFAULT_WINDOW_MODE
from airflow_provider_sqlserver_cdc.window.planning import window_ready

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook


def capture_ready(
    hook: SqlServerCdcHook,
    window_mode: str,
    data_interval_end: datetime | None,
    watermarks: dict[str, str | None],
) -> tuple[bool, str]:
    """
    Ask the source whether the capture job has processed what the run's windows need.

    :param hook: the source hook.
    :param window_mode: ``interval`` or ``watermark``.
    :param data_interval_end: aware end of the run's data interval (interval mode).
    :param watermarks: capture instance -> stored watermark LSN in hex (watermark mode).
    :return: ``(ready, explanation)``.
    """
    return window_ready(
        hook,
        hook.get_server_time_zone(),
        window_mode=window_mode,
        data_interval_end=data_interval_end,
        watermarks={k: Lsn.from_hex(v) if v else None for k, v in watermarks.items()},
    )


@dataclass(kw_only=True, eq=False, repr=False)
class LsnTrigger(SourceHookMixin, DataclassTrigger):
    """
    Poll until the capture job has processed what the window needs.

    The Airflow connection is fetched once with the async API (``BaseHook.aget_connection``); the
    blocking ODBC calls run in a worker thread, off the triggerer's event loop. Events carry
    ``status`` (``success``, ``timeout`` or ``error``) and ``message``, the reason in words.

    :param sqlserver_cdc_conn_id: Airflow connection of the source.
    :param database: source database (None: the connection's schema).
    :param server_time_zone: IANA zone of the server, if it observes DST.
    :param window_mode: ``interval`` or ``watermark``.
    :param data_interval_end: ISO 8601 end of the data interval (interval mode).
    :param watermarks: capture instance -> stored watermark LSN in hex (watermark mode).
    :param poll_interval: seconds between checks.
    :param timeout_at: ISO 8601 instant after which the trigger reports a timeout (None: never).
    """

    sqlserver_cdc_conn_id: str
    database: str | None = None
    server_time_zone: str | None = None
    window_mode: str = DEFAULT_WINDOW_MODE
    data_interval_end: str | None = None
    watermarks: dict[str, str | None] = field(default_factory=dict)
    poll_interval: float = 60.0
    timeout_at: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.watermarks = dict(self.watermarks or {})
        self.poll_interval = float(self.poll_interval)

    def check(self, connection: Connection) -> tuple[bool, str]:
        """
        Ask the source once whether the capture job is far enough (blocking: run it in a worker thread).

        :param connection: the Airflow connection of the source, fetched beforehand.
        """
        end = datetime.fromisoformat(self.data_interval_end) if self.data_interval_end else None
        with self.source_hook(connection) as hook:
            return capture_ready(hook, self.window_mode, end, self.watermarks)

    def capture_job_text(self, connection: Connection) -> str:
        """
        Describe the capture job's state in a sentence (blocking: run it in a worker thread).

        :param connection: the Airflow connection of the source, fetched beforehand.
        """
        with self.source_hook(connection) as hook:
            return hook.get_capture_job_status().describe()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = datetime.fromisoformat(self.timeout_at) if self.timeout_at else None
        try:
            connection = await BaseHook.aget_connection(self.sqlserver_cdc_conn_id)
            while True:
                ready, detail = await asyncio.to_thread(self.check, connection)
                if ready:
                    yield TriggerEvent({"status": "success", "message": detail})
                    return
                self.log.info("waiting: %s", detail)
                if deadline is not None and datetime.now(UTC) >= deadline:
                    job = await asyncio.to_thread(self.capture_job_text, connection)
                    yield TriggerEvent({"status": "timeout", "message": f"{detail}. Capture job: {job}."})
                    return
                await asyncio.sleep(self.poll_interval)
        except Exception as err:
            self.log.exception("LsnTrigger failed")
            yield TriggerEvent({"status": "error", "message": f"{type(err).__name__}: {err}"})
