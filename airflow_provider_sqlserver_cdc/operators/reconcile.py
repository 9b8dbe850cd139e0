"""CdcReconcileOperator: compare a replicated table with its source per key range, and repair what differs."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE
from airflow_provider_sqlserver_cdc.operators.source_reads import ConsistentReadOperator
from airflow_provider_sqlserver_cdc.operators.spark_job import SparkJobOperator
from airflow_provider_sqlserver_cdc.operators.target_tables import TargetTablesOperator
from airflow_provider_sqlserver_cdc.reconcile import (
    DEFAULT_DETAIL_LEAVES,
    DEFAULT_LEAF_ROWS,
    DEFAULT_MAX_REPORTED_KEYS,
)
from airflow_provider_sqlserver_cdc.spark import MERGE_JOB_PATH, RECONCILE_JOB_PATH

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.snapshot.reconcile import Comparison

#: Where the operator's request and result files live under ``staging_path``.
RECONCILE_FILES = "_reconcile/_requests"


class CdcReconcileOperator(ConsistentReadOperator, TargetTablesOperator, SparkJobOperator):
    """
    Compare one captured table with its Iceberg target at one consistent LSN; with ``repair=True`` fix what differs.

    The source is read once in key order inside a consistent read (docs/snapshot.md: the LSN S it
    sees) and summarised per leaf of ``leaf_rows`` rows (row count, digest sum); a Spark job
    (``spark/reconcile_job.py``, through spark-submit like the merge) summarises the target's live
    rows with the same bounds, bisects where the summaries differ and returns the differing leaves'
    rows, which are compared key by key with the source read at S. The differing keys go to the log
    and the XCom (at most ``max_reported_keys``). With ``repair=True`` the differing leaves are read
    again at a new consistent LSN S2 and only the rows that differ are written as a ``repair``
    window, which the merge job applies under its LSN guard (a change merged meanwhile, newer than
    S2, is kept). Nothing else of the table is read again or rewritten. docs/reconcile.md.

    Returns (XCom ``return_value``) the comparison's summary, with ``repair`` when one was merged.

    :param capture_instance: the capture instance whose table is compared. (templated)
    :param staging_path: staging storage for the request/result files and the repair window, reachable by
        this task and the Spark driver (the windows' base path). (templated)
    :param target_table: the target table instead of the merge's naming (:class:`TargetTablesOperator`:
        ``namespace``, ``table_name_template``, ``targets``). (templated)
    :param repair: re-copy the differing ranges (default False: compare and report only). (templated)
    :param leaf_rows: source rows per leaf: the finest range compared, and what a repair reads per differing leaf.
    :param detail_leaves: differing leaves compared key by key (and repaired) per run at most.
    :param max_reported_keys: differing keys in the log and XCom at most.
    :param fail_on_difference: fail the task when differences remain (after a repair: when it could not
        repair them all in this run).
    :param batch_size: source rows per batch read.

    Takes the arguments of :class:`SparkJobOperator` too (spark-submit's settings, ``jars``,
    ``packages``, ``ship_job_modules``; the reconcile job and the repair's merge run with them) and of
    :class:`ConsistentReadOperator` (the source connection and database, ``method``, ``lock_timeout``,
    ``allow_table_lock_fallback``: how each consistent read is fixed).
    """

    template_fields: Sequence[str] = (
        "capture_instance",
        "staging_path",
        "namespace",
        "target_table",
        "table_name_template",
        "targets",
        "repair",
        "sqlserver_cdc_conn_id",
        "database",
        *SparkJobOperator.template_fields,
    )
    job_path = RECONCILE_JOB_PATH
    job_name = "sqlserver-cdc-reconcile"

    def __init__(
        self,
        *,
        capture_instance: str,
        staging_path: str,
        target_table: str | None = None,
        repair: bool | str = False,
        leaf_rows: int = DEFAULT_LEAF_ROWS,
        detail_leaves: int = DEFAULT_DETAIL_LEAVES,
        max_reported_keys: int = DEFAULT_MAX_REPORTED_KEYS,
        fail_on_difference: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if self.namespace is None and target_table is None:
            raise ValueError(f"{self.task_id}: pass namespace (with table_name_template) or target_table")
        if leaf_rows < 1 or detail_leaves < 1 or max_reported_keys < 0:
            raise ValueError(f"{self.task_id}: leaf_rows and detail_leaves must be at least 1")
        self.capture_instance = capture_instance
        self.staging_path = staging_path
        self.target_table = target_table
        self.repair = repair
        self.leaf_rows = leaf_rows
        self.detail_leaves = detail_leaves
        self.max_reported_keys = max_reported_keys
        self.fail_on_difference = fail_on_difference
        self.batch_size = batch_size

    # --- spark-submit ------------------------------------------------------------------------------

    def _target_side(self, context: Context) -> Any:
        """The target side as a spark-submit of the reconcile job: request and result files on the staging storage."""
        from airflow_provider_sqlserver_cdc.parquet.manifest_store import write_atomically
        from airflow_provider_sqlserver_cdc.parquet.window_writer import resolve_filesystem
        from airflow_provider_sqlserver_cdc.staging_files import read_text, remove

        run = f"{context['dag'].dag_id}__{self.task_id}__{context['run_id']}__{uuid.uuid4().hex[:8]}"
        stem = f"{self.staging_path.rstrip('/')}/{RECONCILE_FILES}/{re.sub(r'[^A-Za-z0-9_.-]', '_', run)}"

        def side(request: dict[str, Any]) -> dict[str, Any]:
            filesystem, path = resolve_filesystem(f"{stem}.request.json")
            directory, name = path.rsplit("/", 1)
            filesystem.create_dir(directory, recursive=True)
            write_atomically(filesystem, directory, name, json.dumps(request).encode())
            try:
                self.submit_job(
                    context,
                    ["--request", f"{stem}.request.json", "--result", f"{stem}.result.json"],
                    application=RECONCILE_JOB_PATH,
                    name="sqlserver-cdc-reconcile",
                )
                text = read_text(f"{stem}.result.json")
                if text is None:
                    raise RuntimeError(
                        f"{self.task_id}: the reconcile job wrote no result file {stem}.result.json; see the Spark "
                        "driver's log"
                    )
                return json.loads(text)
            finally:
                remove(f"{stem}.request.json")
                remove(f"{stem}.result.json")

        return side

    def _merge(self, context: Context, manifest_uri: str, instance: CaptureInstance, table: str) -> None:
        from airflow_provider_sqlserver_cdc.operators.spark_merge import merge_job_arguments

        namespace = table.rsplit(".", 1)[0]
        arguments = merge_job_arguments([manifest_uri], namespace=namespace, targets={instance.name: table})
        self.submit_job(context, arguments, application=MERGE_JOB_PATH, name="sqlserver-cdc-reconcile-repair")

    # --- execute -----------------------------------------------------------------------------------

    def _log_differences(self, comparison: Comparison) -> None:
        for difference in comparison.differences[: self.max_reported_keys]:
            self.log.warning(
                "%s: key %s %s (leaf %d)",
                comparison.table,
                difference.key,
                difference.kind.replace("_", " "),
                difference.leaf,
            )
        left = len(comparison.differences) - self.max_reported_keys
        if left > 0:
            self.log.warning(
                "%s: %d more differing keys not listed (max_reported_keys)", comparison.table, left
            )

    def execute(self, context: Context) -> dict[str, Any]:
        """Compare (and repair); return the summary."""
        from airflow_provider_sqlserver_cdc.snapshot.range_copy import write_repair_window
        from airflow_provider_sqlserver_cdc.snapshot.reconcile import compare_at_consistent_point

        repair = (
            self.repair if isinstance(self.repair, bool) else str(self.repair).lower() in ("true", "1", "yes")
        )
        with self.source_hook() as hook:
            instance = hook.get_capture_instance(self.capture_instance)
            database = hook.source_database()
            table = self.target_table or self.target_table_for(instance, database)
            options = {"batch_size": self.batch_size, "log": self.log, "read": self.consistent_read()}
            comparison = compare_at_consistent_point(
                hook,
                instance,
                table=table,
                target_side=self._target_side(context),
                leaf_rows=self.leaf_rows,
                detail_leaves=self.detail_leaves,
                **options,
            )
            self._log_differences(comparison)
            summary = comparison.summary(self.max_reported_keys)
            repaired = None
            if repair and not comparison.matches:
                repaired = write_repair_window(
                    hook,
                    instance,
                    comparison,
                    staging_uri=self.staging_path,
                    database=database,
                    dag_id=context["dag"].dag_id,
                    run_id=context["run_id"],
                    **options,
                )
        if repaired is not None:
            self._merge(context, repaired.manifest_uri, instance, table)
            self.log.info(
                "%s: repair at %s merged: %d rows written, %d deleted, leaf ranges %s",
                table,
                repaired.repair_lsn,
                repaired.upserts,
                repaired.deletes,
                repaired.ranges,
            )
            summary["repair"] = repaired.to_dict()
        remaining = len(set(comparison.differing_leaves) - set(comparison.detailed_leaves))
        if self.fail_on_difference and not comparison.matches and (not repair or remaining):
            raise RuntimeError(
                f"{self.task_id}: {table} differs from {instance.source} at LSN {comparison.comparison_lsn}: "
                f"{len(comparison.differences)} keys in {len(comparison.detailed_leaves)} leaves"
                + (
                    f", {remaining} more leaves not compared key by key (raise detail_leaves)"
                    if remaining
                    else ""
                )
                + ("" if repair else "; run with repair=True to re-copy the differing ranges")
            )
        return summary
