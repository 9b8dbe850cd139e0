"""
The Change Tracking branch of the replication pipeline, for the tables in ``settings.change_tracking``.

::

    ct_plan -+-> ct_snapshot[table to snapshot] ---------------------+
             +-> ct_wait_for_version[table] -> ct_extract[table] ----+-> merge -> commit_watermarks

The same shape as the CDC branch: ``ct_plan`` snapshots a table without a watermark (or asked
for in ``dag_run.conf["resnapshot"]``, or, with ``auto_resnapshot``, one whose changes were
cleaned up; otherwise that fails the run naming the table); the sensor checks
``CHANGE_TRACKING_CURRENT_VERSION()``; the extract writes version windows in the CDC window format.
The factory feeds their windows to the one merge and watermark commit of the run. Tasks take the
CDC branch's settings (sensor, extract sizes and timeouts, snapshot timeout).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from airflow.sdk import task

from airflow_provider_sqlserver_cdc.operators.change_tracking import (
    ChangeTrackingExtractOperator,
    ChangeTrackingLoadPlanOperator,
    ChangeTrackingSnapshotOperator,
)
from airflow_provider_sqlserver_cdc.sensors.change_tracking import ChangeTrackingVersionSensor
from airflow_provider_sqlserver_cdc.snapshot.load_plan import EXTRACT, SNAPSHOT

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.pipeline.settings import ReplicationSettings


def add_change_tracking_tasks(settings: ReplicationSettings, *, window_mode: str) -> list[Any]:
    """
    Add the Change Tracking tasks to the DAG or task group being defined; return the two window-writing tasks.

    :param settings: the pipeline's settings (``change_tracking.tables`` not empty).
    :param window_mode: ``interval`` or ``watermark``.
    """

    @task(task_id="ct_snapshot_list")
    def snapshot_list(names: list[str]) -> list[str]:
        """The tracked tables the plan snapshots (a plain XCom, which mapping needs)."""
        return list(names)

    @task(task_id="ct_extract_list")
    def extract_list(names: list[str]) -> list[str]:
        """The tracked tables the plan extracts a version window for."""
        return list(names)

    source = settings.source.operator_arguments()
    sizes = {
        "batch_size": settings.extract.batch_size,
        "max_file_bytes": settings.extract.max_file_bytes,
        **settings.masking.operator_arguments(),  # column masking (docs/column-masking.md)
    }
    plan = ChangeTrackingLoadPlanOperator(
        task_id="ct_plan",
        tables=list(settings.change_tracking.tables),
        auto_resnapshot=settings.change_tracking.auto_resnapshot,
        **source,
    )
    snapshot = ChangeTrackingSnapshotOperator.partial(
        task_id="ct_snapshot",
        base_path=settings.staging_path,
        execution_timeout=dt.timedelta(minutes=settings.snapshot.execution_timeout_minutes),
        **sizes,
        **source,
    ).expand(capture_instance=snapshot_list(plan.output[SNAPSHOT]))
    to_extract = extract_list(plan.output[EXTRACT])
    wait = ChangeTrackingVersionSensor.partial(
        task_id="ct_wait_for_version",
        window_mode=window_mode,
        **settings.sensor.operator_arguments(),
        **source,
    ).expand(capture_instance=to_extract)
    extract = ChangeTrackingExtractOperator.partial(
        task_id="ct_extract",
        base_path=settings.staging_path,
        window_mode=window_mode,
        execution_timeout=dt.timedelta(minutes=settings.extract.execution_timeout_minutes),
        **sizes,
        **source,
    ).expand(capture_instance=to_extract)
    wait >> extract
    return [snapshot, extract]
