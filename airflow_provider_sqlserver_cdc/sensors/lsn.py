"""LsnSensor: wait until the capture job has processed every transaction the run's windows need."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowSensorTimeout, AirflowSkipException

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names
from airflow_provider_sqlserver_cdc.extraction.instance_switch import resolve_streams
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.sensors.source_window import SourceWindowSensor
from airflow_provider_sqlserver_cdc.state import read_watermarks
from airflow_provider_sqlserver_cdc.triggers.lsn import LsnTrigger, capture_ready
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key
from airflow_provider_sqlserver_cdc.window.manifest import WINDOW_MODES

if TYPE_CHECKING:
    from airflow.sdk import Context

# The deferral's own timeout comes this long after the trigger's: the trigger reports the timeout
# first, with the capture job's state; the deferral's timeout is the backstop should it not.
DEFERRAL_GRACE = timedelta(seconds=60)


class LsnSensor(SourceWindowSensor):
    """
    Succeed when the capture job has processed every transaction the run's windows need.

    Interval mode: the commit time mapped to ``sys.fn_cdc_get_max_lsn()`` has reached the run's
    ``data_interval_end``. Watermark mode: the max LSN is above the stored watermark of every
    capture instance. Supports ``mode="poke"``, ``mode="reschedule"`` and ``deferrable=True``
    (LsnTrigger). On timeout the error says whether the capture job runs and how far behind it is;
    with ``soft_fail=True`` a timeout skips the task instead, while real errors (login refused,
    unknown capture instance, an error in the trigger) still fail it. Deferred, the sensor's
    ``timeout`` becomes the deferral's ``timeout`` and the trigger's deadline.

    Takes the arguments of :class:`SourceWindowSensor` (``capture_instance`` is needed in watermark
    mode) and:

    :param deferrable: wait in the triggerer instead of a worker slot.
    """

    def __init__(self, *, deferrable: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable

    def _watermarks(self, hook: SqlServerCdcHook) -> dict[str, str | None]:
        if self.window_mode != "watermark":
            return {}
        names = capture_instance_names(self.capture_instance)
        if not names:
            raise ValueError("LsnSensor in watermark mode needs capture_instance")
        database = hook.source_database()
        # Resolve ``schema.table`` to the instance name, as CdcExtractOperator keys its watermark.
        streams = resolve_streams(
            hook, names, lambda stream: watermark_key(self.sqlserver_cdc_conn_id, database, stream)
        )
        keys = {s: watermark_key(self.sqlserver_cdc_conn_id, database, s) for s, _ in streams}
        return {name: mark.lsn if mark else None for name, mark in read_watermarks(keys).items()}

    def poke(self, context: Context) -> bool:
        with self.source_hook() as hook:
            marks = self._watermarks(hook)
            ready, detail = capture_ready(hook, self.window_mode, context.get("data_interval_end"), marks)
        self.log.info("%s: %s", "ready" if ready else "waiting", detail)
        return ready

    def execute(self, context: Context) -> Any:
        if self.window_mode not in WINDOW_MODES:
            raise ValueError(f"window_mode must be one of {WINDOW_MODES}, got {self.window_mode!r}")
        for name in capture_instance_names(self.capture_instance):
            if "." not in name:
                tsql.validate_capture_instance(name)
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as err:
                raise AirflowSensorTimeout(f"{err} {self._capture_job_text()}") from None
            except AirflowSkipException as err:
                if not self.soft_fail:
                    raise
                raise AirflowSkipException(f"{err} {self._capture_job_text()}") from None
        interval_end = context.get("data_interval_end")
        with self.source_hook() as hook:
            marks = self._watermarks(hook)
            ready, detail = capture_ready(hook, self.window_mode, interval_end, marks)
        if ready:
            self.log.info("ready: %s", detail)
            return None
        timeout = self._timeout()
        poll = self.poke_interval
        self.defer(
            trigger=LsnTrigger(
                sqlserver_cdc_conn_id=self.sqlserver_cdc_conn_id,
                database=self.database,
                server_time_zone=self.server_time_zone,
                window_mode=self.window_mode,
                data_interval_end=interval_end.isoformat() if interval_end else None,
                watermarks=marks,
                poll_interval=poll.total_seconds() if isinstance(poll, timedelta) else float(poll),
                timeout_at=(datetime.now(UTC) + timeout).isoformat() if timeout is not None else None,
            ),
            method_name="execute_complete",
            timeout=timeout + DEFERRAL_GRACE if timeout is not None else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> None:
        """
        Finish after the trigger fired: succeed, time out (skip with ``soft_fail``), or fail with the reason.

        :param context: the task's context.
        :param event: the trigger's event payload: ``status`` and ``message``.
        """
        event = event or {}
        status, message = event.get("status"), event.get("message")
        if status == "success":
            self.log.info("ready: %s", message)
            return
        if status == "timeout":
            reason = f"LsnSensor timed out: {message}"
            if self.soft_fail:
                # Airflow's soft_fail may replace the skip's message: the reason goes to the log first.
                self.log.warning("%s (soft_fail: skipping)", reason)
                raise AirflowSkipException(reason)
            raise AirflowSensorTimeout(reason)
        # Not an AirflowException: soft_fail skips those, and an error must fail the task.
        raise RuntimeError(f"LsnTrigger failed: {message}")

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """Resume after the deferral; when the deferral itself timed out, say where the capture job is."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except (AirflowSensorTimeout, AirflowSkipException) as err:
            # The base class turns the deferral's own timeout (TaskDeferralTimeout) into
            # AirflowSensorTimeout, or with soft_fail into a skip caused by one.
            timed_out = isinstance(err, AirflowSensorTimeout) or isinstance(
                err.__cause__, AirflowSensorTimeout
            )
            if next_method == "execute_complete" or not timed_out:
                raise
            job = self._capture_job_text()
            if isinstance(err, AirflowSkipException):
                self.log.warning("LsnSensor timed out (soft_fail: skipping). %s", job)
                raise
            raise AirflowSensorTimeout(f"LsnSensor timed out: {err}. {job}") from err

    def _timeout(self) -> timedelta | None:
        if self.timeout is None:
            return None
        return self.timeout if isinstance(self.timeout, timedelta) else timedelta(seconds=float(self.timeout))

    def _capture_job_text(self) -> str:
        try:
            with self.source_hook() as hook:
                return "Capture job: " + hook.get_capture_job_status().describe() + "."
        except Exception as err:
            return f"(capture job state unavailable: {err})"
