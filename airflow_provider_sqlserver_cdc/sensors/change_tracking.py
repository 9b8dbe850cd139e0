"""ChangeTrackingVersionSensor: wait until CHANGE_TRACKING_CURRENT_VERSION() can serve the run's windows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names
from airflow_provider_sqlserver_cdc.hooks.change_tracking_source import ChangeTrackingSourceMixin
from airflow_provider_sqlserver_cdc.sensors.source_window import SourceWindowSensor

if TYPE_CHECKING:
    from airflow.sdk import Context


class ChangeTrackingVersionSensor(ChangeTrackingSourceMixin, SourceWindowSensor):
    """
    Succeed when ``CHANGE_TRACKING_CURRENT_VERSION()`` is readable and not below any table's watermark.

    Change tracking has no capture job: a version exists as soon as its transaction commits, so
    there is no lag to wait for on a primary. The sensor waits while the version is below a
    watermark (a readable secondary or a restored database that is behind) and, in interval mode,
    until the server clock has passed the run's ``data_interval_end``; it fails at once when change
    tracking is off for the database.

    Takes the arguments of :class:`SourceWindowSensor`; ``capture_instance`` names the tracked
    tables (``schema.table``) whose watermarks are checked.
    """

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
