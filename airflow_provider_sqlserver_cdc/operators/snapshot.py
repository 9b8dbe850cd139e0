"""CdcSnapshotOperator (consistent initial copy of captured tables) and CdcLoadPlanOperator (snapshot or window?)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_sqlserver_cdc.hooks.consistent_point import METHODS, SNAPSHOT_ISOLATION
from airflow_provider_sqlserver_cdc.hooks.source_hook import SourceHookMixin
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.operators.failure_record import record_failure
from airflow_provider_sqlserver_cdc.operators.window_task import WindowTaskOperator
from airflow_provider_sqlserver_cdc.snapshot.load_plan import (
    EXTRACT,
    SNAPSHOT,
    plan_loads,
    resnapshot_requests,
    split_loads,
)
from airflow_provider_sqlserver_cdc.snapshot.table_copy import DEFAULT_CHUNK_ROWS, snapshot_windows
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_ALLOW_TABLE_LOCK_FALLBACK

if TYPE_CHECKING:
    from airflow.sdk import Context


class CdcSnapshotOperator(WindowTaskOperator):
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

    :param chunk_rows: rows per key-range chunk; a failed snapshot resumes after the last whole chunk.
    :param method: ``snapshot_isolation`` (default; needs ALLOW_SNAPSHOT_ISOLATION ON) or
        ``table_lock`` (writers of the table wait for the whole copy).
    :param allow_table_lock_fallback: use ``table_lock`` when snapshot isolation is not allowed
        instead of failing.
    :param lock_timeout: seconds to wait for the shared table lock that fixes the snapshot point.
    :param resume: continue an unfinished snapshot when still valid (see docs/snapshot.md).
    """

    template_fields: Sequence[str] = ("capture_instance", "base_path", "sqlserver_cdc_conn_id", "database")
    ui_color = "#fce5cd"
    records_failures = True

    def __init__(
        self,
        *,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        method: str = SNAPSHOT_ISOLATION,
        allow_table_lock_fallback: bool = DEFAULT_ALLOW_TABLE_LOCK_FALLBACK,
        lock_timeout: float = 30.0,
        resume: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if method not in METHODS:
            raise ValueError(f"{self.task_id}: method must be one of {METHODS}, got {method!r}")
        if chunk_rows <= 0:
            raise ValueError(f"{self.task_id}: chunk_rows must be positive, got {chunk_rows}")
        self.chunk_rows = chunk_rows
        self.method = method
        self.allow_table_lock_fallback = allow_table_lock_fallback
        self.lock_timeout = lock_timeout
        self.resume = resume

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        return self.write_windows(
            context,
            snapshot_windows,
            chunk_rows=self.chunk_rows,
            method=self.method,
            lock_timeout_s=self.lock_timeout,
            allow_table_lock_fallback=self.allow_table_lock_fallback,
            resume=self.resume,
        )


class CdcLoadPlanOperator(SourceHookMixin, BaseOperator):
    """
    Decide per capture instance whether this run snapshots it or extracts its next change window.

    Snapshot when no watermark is stored, when ``dag_run.conf["resnapshot"]`` names it (or the
    ``resnapshot`` argument does), or when the changes after its watermark were cleaned up
    (retention gap) or its capture instance was re-created. Pushes the XCom keys ``snapshot``
    and ``extract`` (lists of capture instances) and returns every decision, so a DAG can do
    ``CdcSnapshotOperator.partial(...).expand(capture_instance=plan.output["snapshot"])`` and
    ``CdcExtractOperator.partial(window_mode="watermark", ...).expand(capture_instance=plan.output["extract"])``.

    :param capture_instances: the capture instances of the DAG.
    :param sqlserver_cdc_conn_id: Airflow connection (type ``mssql``) of the source.
    :param database: source database; defaults to the connection's schema.
    :param resnapshot: capture instances to snapshot again in every run of this task (templated;
        usually left empty and given per run through ``dag_run.conf``).
    :param check_retention: also snapshot instances whose watermark fell behind CDC's retention.
    """

    template_fields: Sequence[str] = ("capture_instances", "sqlserver_cdc_conn_id", "database", "resnapshot")
    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        capture_instances: list[str],
        sqlserver_cdc_conn_id: str = SqlServerCdcHook.default_conn_name,
        database: str | None = None,
        resnapshot: list[str] | None = None,
        check_retention: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.capture_instances = capture_instances
        self.sqlserver_cdc_conn_id = sqlserver_cdc_conn_id
        self.database = database
        self.resnapshot = resnapshot or []
        self.check_retention = check_retention

    def execute(self, context: Context) -> list[dict[str, Any]]:
        try:
            return self._plan(context)
        except Exception as err:  # the run's outcome names the error (e.g. a source that is down)
            record_failure(context, list(self.capture_instances), err)
            raise

    def _plan(self, context: Context) -> list[dict[str, Any]]:
        dag_run = context.get("dag_run")
        requested = set(self.resnapshot) | resnapshot_requests(getattr(dag_run, "conf", None))
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
        split = split_loads(decisions)
        ti = context["ti"]
        ti.xcom_push(key=SNAPSHOT, value=split[SNAPSHOT])
        ti.xcom_push(key=EXTRACT, value=split[EXTRACT])
        return [d.to_dict() for d in decisions]
