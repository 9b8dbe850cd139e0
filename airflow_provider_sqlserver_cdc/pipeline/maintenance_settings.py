"""The ``maintenance:`` section of the pipeline settings (docs/maintenance.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from airflow_provider_sqlserver_cdc.pipeline.settings_fields import Section
from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import Thresholds
from airflow_provider_sqlserver_cdc.task_defaults import (
    DEFAULT_ORPHAN_AGE_HOURS,
    DEFAULT_RETAIN_LAST,
    DEFAULT_SNAPSHOT_RETENTION_HOURS,
)


@dataclass(frozen=True)
class TableMaintenanceSettings(Section):
    """
    CdcTableMaintenanceOperator: Iceberg's procedures on the target tables, after the merge of a run.

    :param enabled: add the maintenance task to the pipeline (off by default in the library; the
        example DAGs turn it on).
    :param schedule: cron or preset: the runs whose data interval holds one of its times run the task
        (the others skip it); the job itself then maintains only tables past a threshold.
    :param min_delete_files: position-delete files that make a table due (merge-on-read adds some per merge).
    :param min_small_files: data files under 3/4 of the target file size that make a table due.
    :param min_snapshots: snapshots that make a table due.
    :param min_metadata_bytes: metadata.json size that makes a table due.
    :param full_rewrite_delete_ratio: a due table's large data files are rewritten too only once position
        deletes reach this share of its rows (below it: small files and delete files only).
    :param snapshot_retention_hours: the time-travel window: older snapshots are expired.
    :param retain_last: snapshots kept whatever their age.
    :param orphan_age_hours: unreferenced files older than this are deleted (Iceberg's floor: 24).
    :param tombstone_margin_hours: purge soft-deleted rows older than the source's CDC retention by
        this margin; None (default): keep every tombstone.
    :param execution_timeout_minutes: stop a hung maintenance run (each procedure commits atomically).
    """

    key: ClassVar[str] = "maintenance"
    enabled: bool = False
    schedule: str = "@hourly"
    min_delete_files: int = Thresholds().delete_files
    min_small_files: int = Thresholds().small_files
    min_snapshots: int = Thresholds().snapshots
    min_metadata_bytes: int = Thresholds().metadata_bytes
    full_rewrite_delete_ratio: float = Thresholds().full_rewrite_delete_ratio
    snapshot_retention_hours: float = DEFAULT_SNAPSHOT_RETENTION_HOURS
    retain_last: int = DEFAULT_RETAIN_LAST
    orphan_age_hours: float = DEFAULT_ORPHAN_AGE_HOURS
    tombstone_margin_hours: float | None = None
    execution_timeout_minutes: float = 60.0

    def check(self) -> None:
        """Refuse a bad schedule, negative thresholds and an orphan age under Iceberg's floor."""
        from croniter import croniter

        self._require(
            "schedule", croniter.is_valid(self.schedule), f"is not a cron expression: {self.schedule!r}"
        )
        for name in ("min_delete_files", "min_small_files", "min_snapshots", "min_metadata_bytes"):
            self._require(name, getattr(self, name) >= 0, "must not be negative")
        self._require(
            "full_rewrite_delete_ratio", 0 < self.full_rewrite_delete_ratio <= 1, "must be in (0, 1]"
        )
        self._require("retain_last", self.retain_last >= 1, "must be at least 1")
        self._require("snapshot_retention_hours", self.snapshot_retention_hours >= 0, "must not be negative")
        self._require(
            "orphan_age_hours", self.orphan_age_hours >= 24, "must be at least 24 (Iceberg's floor)"
        )
        self._require(
            "tombstone_margin_hours",
            self.tombstone_margin_hours is None or self.tombstone_margin_hours >= 0,
            "must not be negative",
        )
        self._require("execution_timeout_minutes", self.execution_timeout_minutes > 0, "must be positive")

    def thresholds(self) -> Thresholds:
        """The job's thresholds."""
        return Thresholds(
            self.min_delete_files,
            self.min_small_files,
            self.min_snapshots,
            self.min_metadata_bytes,
            self.full_rewrite_delete_ratio,
        )
