"""CdcTableMaintenanceOperator: spark-submit the provider's table maintenance job for the target tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.operators.spark_job import SparkJobOperator
from airflow_provider_sqlserver_cdc.source_task import SourceTaskOperator
from airflow_provider_sqlserver_cdc.spark import MAINTENANCE_JOB_PATH
from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import (
    DEFAULT_ORPHAN_AGE_HOURS,
    DEFAULT_RETAIN_LAST,
    DEFAULT_SNAPSHOT_RETENTION_HOURS,
    MaintenanceSettings,
    Thresholds,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_sqlserver_cdc.lsn import Lsn

#: Iceberg's own floor for the age of files remove_orphan_files may delete.
MIN_ORPHAN_AGE_HOURS = 24.0


def maintenance_job_arguments(settings: MaintenanceSettings) -> list[str]:
    """Return the command-line arguments of ``maintenance_job.py`` that its ``parse_args`` reads as ``settings``.

    :param settings: what the job is asked to do: the tables (``namespace`` and ``tables``), thresholds,
        retention ages, and for the tombstone purge the source's min LSNs (docs/maintenance.md).
    """
    if not settings.namespace and not settings.tables:
        raise ValueError("pass namespace (the merge's target namespace) or tables")
    if settings.orphan_age_hours < MIN_ORPHAN_AGE_HOURS:
        raise ValueError(
            f"orphan_age_hours must be at least {MIN_ORPHAN_AGE_HOURS:g}: a younger unreferenced file may "
            f"belong to a commit in progress, got {settings.orphan_age_hours}"
        )
    thresholds = settings.thresholds
    arguments = ["--namespace", settings.namespace] if settings.namespace else []
    for table in settings.tables:
        arguments += ["--table", table]
    arguments += [
        "--min-delete-files",
        str(thresholds.delete_files),
        "--min-small-files",
        str(thresholds.small_files),
        "--min-snapshots",
        str(thresholds.snapshots),
        "--min-metadata-bytes",
        str(thresholds.metadata_bytes),
        "--full-rewrite-delete-ratio",
        f"{thresholds.full_rewrite_delete_ratio:g}",
        "--snapshot-retention-hours",
        f"{settings.snapshot_retention_hours:g}",
        "--retain-last",
        str(settings.retain_last),
        "--orphan-age-hours",
        f"{settings.orphan_age_hours:g}",
    ]
    if settings.force:
        arguments.append("--force")
    if settings.tombstone_margin_hours is not None:
        arguments += ["--tombstone-margin-hours", f"{settings.tombstone_margin_hours:g}"]
        for capture_instance, lsn in settings.cdc_min_lsn.items():
            arguments += ["--cdc-min-lsn", f"{capture_instance}={lsn.hex}"]
    return arguments


class CdcTableMaintenanceOperator(SourceTaskOperator, SparkJobOperator):
    """
    Maintain the provider's Iceberg target tables with Iceberg's procedures, keeping the applied state.

    A :class:`SparkJobOperator` (Spark settings, ``ship_job_modules``) whose application is
    ``maintenance_job.py``. Per table the job copies the applied state into the table properties,
    reads the figures (data and delete files, small files, snapshots, metadata.json bytes), and when one
    passes its threshold runs ``rewrite_data_files`` (sorted on the key; only the small files while
    position deletes remove under ``thresholds.full_rewrite_delete_ratio`` of the rows, every file with
    a delete from then on),
    ``rewrite_position_delete_files``, ``expire_snapshots`` (older than the time-travel window),
    ``rewrite_manifests`` and ``remove_orphan_files``, logging the figures before and after.

    Run it where no merge of the same tables runs at the same time: after the merge task of the
    pipeline's run (the factory does, with one active run); a commit conflict with a merge from
    elsewhere (a backfill) fails the rewrite, and the task's retries run it again.

    :param namespace: ``catalog.namespace`` whose provider tables are maintained. (templated)
    :param tables: further dotted tables. (templated)
    :param thresholds: when a table is maintained (any figure at or above its threshold).
    :param force: maintain every table whatever its figures.
    :param snapshot_retention_hours: the time-travel window kept (snapshots older are expired); with
        ``retain_last``, every snapshot of the last hour and the last 10 runs by default. A longer window
        keeps more copies of the compacted files (docs/maintenance.md, "Disk and time travel").
    :param retain_last: snapshots kept whatever their age.
    :param orphan_age_hours: unreferenced files older than this are deleted (at least 24).
    :param tombstone_margin_hours: purge soft-deleted rows older than the source's CDC retention (the
        capture instances' min LSN) whose delete committed more than this many hours ago; None (default):
        never purge. Needs the source connection and ``capture_instances``.
    :param capture_instances: capture instances whose min LSN bounds the purge. (templated)
    :param sqlserver_cdc_conn_id: the source connection (read only for the tombstone purge).
    :param database: the source database; default the connection's.
    """

    job_path = MAINTENANCE_JOB_PATH
    job_name = "sqlserver-cdc-maintenance"

    template_fields: Sequence[str] = (
        *SparkJobOperator.template_fields,
        "namespace",
        "tables",
        "capture_instances",
    )

    def __init__(
        self,
        *,
        namespace: str | None = None,
        tables: Sequence[str] = (),
        thresholds: Thresholds | None = None,
        force: bool = False,
        snapshot_retention_hours: float = DEFAULT_SNAPSHOT_RETENTION_HOURS,
        retain_last: int = DEFAULT_RETAIN_LAST,
        orphan_age_hours: float = DEFAULT_ORPHAN_AGE_HOURS,
        tombstone_margin_hours: float | None = None,
        capture_instances: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if orphan_age_hours < MIN_ORPHAN_AGE_HOURS:
            raise ValueError(f"{self.task_id}: orphan_age_hours must be at least {MIN_ORPHAN_AGE_HOURS:g}")
        if retain_last < 1 or snapshot_retention_hours < 0:
            raise ValueError(f"{self.task_id}: retain_last must be at least 1, snapshot_retention_hours >= 0")
        if tombstone_margin_hours is not None and tombstone_margin_hours < 0:
            raise ValueError(f"{self.task_id}: tombstone_margin_hours must not be negative")
        self.namespace = namespace
        self.tables = tables
        self.capture_instances = capture_instances
        # What the job is asked to do; the tables (templated) and the source's min LSNs are filled in as it runs.
        self.settings = MaintenanceSettings(
            thresholds=thresholds or Thresholds(),
            force=force,
            snapshot_retention_hours=snapshot_retention_hours,
            retain_last=retain_last,
            orphan_age_hours=orphan_age_hours,
            tombstone_margin_hours=tombstone_margin_hours,
        )

    @property
    def thresholds(self) -> Thresholds:
        """When a table is maintained (any figure at or above its threshold)."""
        return self.settings.thresholds

    @property
    def tombstone_margin_hours(self) -> float | None:
        """The tombstone purge's margin; None: no purge."""
        return self.settings.tombstone_margin_hours

    def source_min_lsns(self) -> dict[str, Lsn]:
        """Return capture instance -> ``sys.fn_cdc_get_min_lsn`` for the tombstone purge (empty when it is off)."""
        if self.tombstone_margin_hours is None or not self.capture_instances:
            return {}
        with self.source_hook() as hook:
            return {ci: hook.get_min_lsn(ci) for ci in self.capture_instances}

    def execute(self, context: Context) -> None:
        """Read the source's min LSNs if purging, fill in the job's arguments and run spark-submit."""
        min_lsns = self.source_min_lsns()
        if self.tombstone_margin_hours is not None:
            self.log.info(
                "Tombstone purge floors (source min LSN): %s", {k: v.hex for k, v in min_lsns.items()}
            )
        tables = tuple(self.tables or ())
        settings = replace(self.settings, namespace=self.namespace, tables=tables, cdc_min_lsn=min_lsns)
        self.submit_job(context, maintenance_job_arguments(settings))
