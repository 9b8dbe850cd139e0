"""The ``reconcile:`` section of the pipeline settings (docs/reconcile.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from airflow_provider_sqlserver_cdc.pipeline.settings_fields import Section
from airflow_provider_sqlserver_cdc.reconcile import DEFAULT_LEAF_ROWS, DEFAULT_MAX_REPORTED_KEYS


@dataclass(frozen=True)
class ReconcileSettings(Section):
    """
    CdcReconcileOperator: compare each table with its source per key range, in the runs ``schedule`` picks.

    :param schedule: cron or preset (``@daily``): the runs whose data interval holds one of its times compare
        every table (a mapped task per table, after the watermark commit); None (default): no reconcile task.
    :param repair: re-copy the differing key ranges (only differing rows are written); False: report only.
    :param leaf_rows: source rows per leaf: the finest range compared, and what a repair reads per leaf.
    :param max_reported_keys: differing keys in the log and the XCom at most.
    :param fail_on_difference: fail the table's task when differences remain.
    :param execution_timeout_minutes: stop a hung comparison (it writes nothing until the repair's merge).
    """

    key: ClassVar[str] = "reconcile"
    schedule: str | None = None
    repair: bool = False
    leaf_rows: int = DEFAULT_LEAF_ROWS
    max_reported_keys: int = DEFAULT_MAX_REPORTED_KEYS
    fail_on_difference: bool = False
    execution_timeout_minutes: float = 120.0

    def check(self) -> None:
        """Refuse a bad schedule and non-positive sizes."""
        from croniter import croniter

        valid = self.schedule is None or croniter.is_valid(self.schedule)
        self._require("schedule", valid, f"is not a cron expression: {self.schedule!r}")
        self._require("leaf_rows", self.leaf_rows > 0, "must be positive")
        self._require("max_reported_keys", self.max_reported_keys >= 0, "must not be negative")
        self._require("execution_timeout_minutes", self.execution_timeout_minutes > 0, "must be positive")
