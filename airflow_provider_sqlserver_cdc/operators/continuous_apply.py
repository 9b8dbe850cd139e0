"""Tasks of the continuous apply mode: wait until a run's windows are applied; run the apply application."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowException
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_sqlserver_cdc.merge_outputs import record_merge_outputs
from airflow_provider_sqlserver_cdc.operators.postgres_target import PostgresTargetOperator
from airflow_provider_sqlserver_cdc.operators.spark_job import SparkJobOperator
from airflow_provider_sqlserver_cdc.operators.spark_merge import (
    APPLIED_RANGES_XCOM_KEY,
    MERGED_WINDOWS_XCOM_KEY,
    window_descriptions,
)
from airflow_provider_sqlserver_cdc.spark import CONTINUOUS_APPLY_JOB_PATH
from airflow_provider_sqlserver_cdc.spark.continuous.job import DEFAULT_POLL_SECONDS
from airflow_provider_sqlserver_cdc.spark.continuous.published_state import (
    ApplyState,
    RunWindow,
    run_result,
    state_uri,
    utc_now,
)
from airflow_provider_sqlserver_cdc.spark.merge.arguments import ICEBERG_TARGET, POSTGRES_TARGET
from airflow_provider_sqlserver_cdc.staging_files import read_text
from airflow_provider_sqlserver_cdc.task_defaults import (
    DEFAULT_APPLY_POLL_SECONDS,
    DEFAULT_APPLY_TIMEOUT_SECONDS,
)
from airflow_provider_sqlserver_cdc.triggers.applied_windows import AppliedWindowsTrigger
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow
from airflow_provider_sqlserver_cdc.window.manifest import WindowManifest

if TYPE_CHECKING:
    from airflow.sdk import Context


def run_manifests(value: Any) -> list[WindowManifest]:
    """Return the manifests of the windows of the extract/snapshot XComs.

    :param value: the XCom in any shape ``ChangeWindow.from_xcom`` reads.
    """
    manifests = []
    for window in ChangeWindow.from_xcom(value):
        text = read_text(window.manifest_uri)
        if text is None:
            raise AirflowException(
                f"window manifest {window.manifest_uri} of {window.capture_instance} does not exist: the extract "
                "task did not finish this window; re-run it"
            )
        manifests.append(WindowManifest.from_json(text, window.manifest_uri))
    return manifests


def run_windows(value: Any) -> list[RunWindow]:
    """Return the windows of the extract/snapshot XComs with the LSN range each brings its table to.

    The range is read from the window's manifest (``WindowManifest.lsn_range``, as the merge records
    it), so CDC and Change Tracking windows are checked alike.

    :param value: the XCom in any shape ``ChangeWindow.from_xcom`` reads.
    """
    windows = []
    for manifest in run_manifests(value):
        first, last = manifest.lsn_range
        windows.append(RunWindow(manifest.capture_instance, min(first, last), last, manifest.label))
    return windows


class WaitForAppliedWindowsOperator(PostgresTargetOperator):
    """
    Wait, deferred, until the continuous apply application has applied the run's windows.

    It reads what the application publishes on the staging path (``_continuous_apply/state.json`` and
    ``lock.json``); no Spark runs in the worker or the triggerer. It succeeds when every window of
    the run is in its table, pushing ``applied_lsn_ranges`` for WatermarkCommitOperator; it fails at
    once when a table holding one of them is stopped (with the application's error), and after
    ``timeout_seconds`` saying whether the application is down or behind and what to do.

    Like the batch merge it emits an asset event per target table in its ``outlets`` (the factory
    declares the same ones), with the same extra (docs/assets.md), from what the application
    published: the snapshot that applied the run's windows (``published_state.run_result``), and
    the ``sqlserver_cdc.*`` row and merge-time metrics for windows applied from this run's extraction.

    :param windows: the extract (and snapshot) XComs of the run. (templated)
    :param staging_path: the staging path the application applies. (templated)
    :param timeout_seconds: how long to wait for the windows.
    :param poll_interval: seconds between reads of the published state.

    A PostgreSQL target is named as :class:`PostgresTargetOperator` says (``target_conn_id`` or
    ``jdbc_url``): its asset events' ``postgres://`` host.
    """

    template_fields: Sequence[str] = ("windows", "staging_path")
    ui_color = "#cfe2f3"

    def __init__(
        self,
        *,
        windows: Any,
        staging_path: str,
        timeout_seconds: float = DEFAULT_APPLY_TIMEOUT_SECONDS,
        poll_interval: float = DEFAULT_APPLY_POLL_SECONDS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if timeout_seconds <= 0 or poll_interval <= 0:
            raise ValueError(f"{self.task_id}: timeout_seconds and poll_interval must be positive")
        self.windows = windows
        self.staging_path = staging_path
        self.timeout_seconds = timeout_seconds
        self.poll_interval = poll_interval

    def execute(self, context: Context) -> None:
        windows = run_windows(self.windows)
        if not windows:  # every window task failed or had nothing to do (run_outcome reports failures)
            raise AirflowSkipException(f"{self.task_id}: the run has no windows to wait for")
        self.log.info(
            "Waiting until %d window(s) are applied: %s", len(windows), ", ".join(w.label for w in windows)
        )
        self.defer(
            trigger=AppliedWindowsTrigger(
                staging_path=self.staging_path,
                windows=[w.to_dict() for w in windows],
                poll_interval=self.poll_interval,
                timeout_at=(utc_now() + dt.timedelta(seconds=self.timeout_seconds)).isoformat(),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> None:
        """Succeed with the applied ranges, or fail with what the trigger found."""
        status = event.get("status")
        if status == "applied":
            self.log.info("%s", event.get("message"))
            context["ti"].xcom_push(key=APPLIED_RANGES_XCOM_KEY, value=event.get("applied_lsn_ranges") or {})
            # The windows as found (failed extracts left none): what WatermarkCommitOperator commits.
            context["ti"].xcom_push(
                key=MERGED_WINDOWS_XCOM_KEY, value=[dict(w) for w in window_descriptions(self.windows)]
            )
            self.asset_extras = self._record_outputs(context)
            return
        if status == "timeout":
            raise AirflowException(
                f"{self.task_id}: the run's windows were not applied within {self.timeout_seconds:.0f} s "
                f"(staging path {self.staging_path}):\n{event.get('message')}"
            )
        raise AirflowException(f"{self.task_id}: {event.get('message')}")

    def _record_outputs(self, context: Context) -> dict[str, dict[str, Any]]:
        """Asset events and metrics of the applied windows, as the batch merge emits them (merge_outputs.py)."""
        try:
            text = read_text(state_uri(self.staging_path))
            state = ApplyState.from_json(text) if text else ApplyState()
            windows = [(m.capture_instance, m.label, m.created_at) for m in run_manifests(self.windows)]
            url = self.jdbc_url or self.target_url(self.connection_target())
        except Exception:  # the windows are applied: a missing event must not fail the run
            self.log.exception("the windows are applied, but what the application published cannot be read")
            return {}
        return record_merge_outputs(
            context,
            window_value=self.windows,
            result=run_result(state, windows),
            outlets=self.outlets,
            namespace=None,
            table_name_template="",
            targets=state.capture_instances,  # capture instance -> table, as the application merged it
            seconds=None,
            log=self.log,
            target_kind=POSTGRES_TARGET if url else ICEBERG_TARGET,
            jdbc_url=url,
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The OpenLineage of the applied windows, as the batch merge's (lineage.py; OpenLineage provider only)."""
        from airflow_provider_sqlserver_cdc.lineage import merge_lineage

        return merge_lineage(getattr(self, "asset_extras", {}))


class ContinuousApplyOperator(SparkJobOperator):
    """
    Run the continuous apply application (``continuous_apply_job.py``) as a long-running spark-submit.

    The task runs as long as the application does; its retries restart it (it resumes from what the
    tables hold). Give it no ``execution_timeout``, and deploy mode ``cluster`` on a cluster so the
    driver does not live in the worker. Spark settings and ``ship_job_modules`` as for
    :class:`SparkJobOperator` (the job's modules go as ``py_files``, the merge job's zip).

    :param staging_path: the staging path whose windows it applies. (templated)
    :param merge_arguments: the merge job's arguments without windows (``merge_job_arguments([], ...)``:
        ``--namespace``, ``--delete-mode``, ``--target``...).
    :param poll_seconds: seconds between polls of the staging path.
    """

    template_fields: Sequence[str] = (*SparkJobOperator.template_fields, "staging_path")
    job_path = CONTINUOUS_APPLY_JOB_PATH
    job_name = "sqlserver-cdc-continuous-apply"

    def __init__(
        self,
        *,
        staging_path: str,
        merge_arguments: Sequence[str],
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if "--manifest" in merge_arguments:
            raise ValueError(
                f"{self.task_id}: merge_arguments take no --manifest: the application finds the windows"
            )
        self.staging_path = staging_path
        self.merge_arguments = list(merge_arguments)
        self.poll_seconds = poll_seconds

    def execute(self, context: Context) -> None:
        arguments = ["--staging-path", self.staging_path, "--poll-seconds", f"{self.poll_seconds:g}"]
        self.submit_job(context, [*arguments, *self.merge_arguments])
