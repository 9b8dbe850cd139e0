"""CdcSnapshotOperator (consistent initial copy of captured tables) and CdcLoadPlanOperator (snapshot or window?)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.operators.failure_record import record_failure
from airflow_provider_sqlserver_cdc.operators.source_reads import ConsistentReadOperator, LoadPlanOperator
from airflow_provider_sqlserver_cdc.operators.window_task import WindowTaskOperator
from airflow_provider_sqlserver_cdc.snapshot.load_plan import plan_loads, split_loads
from airflow_provider_sqlserver_cdc.snapshot.table_copy import DEFAULT_CHUNK_ROWS, snapshot_windows

if TYPE_CHECKING:
    from airflow.sdk import Context


class CdcSnapshotOperator(ConsistentReadOperator, WindowTaskOperator):
    """
    Copy captured tables consistently, each with the LSN its copy is consistent at.

    Each table becomes a window directory of kind ``snapshot`` (same Parquet layout and manifest
    as change windows; every row an insert at the snapshot LSN) under
    ``{base_path}/{capture_instance}/0x00000000000000000000_{snapshot_lsn}/``. The XCom has the
    keys of CdcExtractOperator's (``to_lsn`` = the snapshot LSN, ``kind`` = ``snapshot``), so
    CdcSparkMergeOperator and WatermarkCommitOperator take either. Works with
    ``.partial(...).expand(capture_instance=[...])``.

    Takes the arguments of :class:`WindowTaskOperator` (capture instance, base path, source
    connection, database, batch size, file size, key check, server time zone) and:

    Takes the arguments of :class:`ConsistentReadOperator` too (``method``, ``allow_table_lock_fallback``,
    ``lock_timeout``: how the snapshot point is fixed) and:

    :param chunk_rows: rows per key-range chunk; a failed snapshot resumes after the last whole chunk.
    :param resume: continue an unfinished snapshot when still valid (see docs/snapshot.md).
    """

    template_fields: Sequence[str] = ("capture_instance", "base_path", "sqlserver_cdc_conn_id", "database")
    ui_color = "#fce5cd"
    records_failures = True

    def __init__(self, *, chunk_rows: int = DEFAULT_CHUNK_ROWS, resume: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if chunk_rows <= 0:
            raise ValueError(f"{self.task_id}: chunk_rows must be positive, got {chunk_rows}")
        self.chunk_rows = chunk_rows
        self.resume = resume

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        return self.write_windows(
            context,
            snapshot_windows,
            chunk_rows=self.chunk_rows,
            resume=self.resume,
            read=self.consistent_read(),
        )


class CdcLoadPlanOperator(LoadPlanOperator):
    """
    Decide per capture instance whether this run snapshots it or extracts its next change window.

    Snapshot when no watermark is stored, when ``dag_run.conf["resnapshot"]`` names it (or the
    ``resnapshot`` argument does), or when the changes after its watermark were cleaned up
    (retention gap) or its capture instance was re-created. Pushes the XCom keys ``snapshot``
    and ``extract`` (lists of capture instances) and returns every decision, so a DAG can do
    ``CdcSnapshotOperator.partial(...).expand(capture_instance=plan.output["snapshot"])`` and
    ``CdcExtractOperator.partial(window_mode="watermark", ...).expand(capture_instance=plan.output["extract"])``.

    Takes the arguments of :class:`LoadPlanOperator` (source connection, database, ``resnapshot``) and:

    :param capture_instances: the capture instances of the DAG.
    :param check_retention: also snapshot instances whose watermark fell behind CDC's retention.
    """

    template_fields: Sequence[str] = ("capture_instances", *LoadPlanOperator.template_fields)

    def __init__(self, *, capture_instances: list[str], check_retention: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.capture_instances = capture_instances
        self.check_retention = check_retention

    def execute(self, context: Context) -> list[dict[str, Any]]:
        try:
            return self._plan(context)
        except Exception as err:  # the run's outcome names the error (e.g. a source that is down)
            record_failure(context, list(self.capture_instances), err)
            raise

    def _plan(self, context: Context) -> list[dict[str, Any]]:
        requested = self.requested_resnapshots(context)
        with self.source_hook() as hook:
            decisions = plan_loads(
                hook,
                list(self.capture_instances),
                conn_id=self.sqlserver_cdc_conn_id,
                database=hook.source_database(),
                resnapshot=requested,
                check_retention=self.check_retention,
            )
        for d in decisions:
            self.log.info("%s: %s (%s)", d.capture_instance, d.action, d.reason)
        self.push_plan(context, split_loads(decisions))
        return [d.to_dict() for d in decisions]
