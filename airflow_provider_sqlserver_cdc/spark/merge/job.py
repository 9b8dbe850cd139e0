"""The merge run: read and check every window, then merge them target table by target table."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeSettings, parse_args
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import COMMIT_TIME, POSITION_COLUMNS
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan, plan_schema
from airflow_provider_sqlserver_cdc.spark.merge.targets.base import (
    AppliedRanges,
    ChangeBatch,
    MergeTarget,
    ranges_after,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import IcebergTarget
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import (
    Window,
    check_files,
    empty_changes,
    read_manifest,
    read_window,
)
from airflow_provider_sqlserver_cdc.window.lsn_ranges import covers
from airflow_provider_sqlserver_cdc.window.manifest import ManifestError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG = logging.getLogger("sqlserver_cdc.merge_job")
RESULT_MARKER = "SQLSERVER_CDC_MERGE_RESULT"


def configure_session(spark: SparkSession) -> None:
    """Set the session options the job relies on."""
    spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    # Windows hold proleptic Gregorian dates, as SQL Server does (date/datetime2 start at year 1).
    spark.conf.set("spark.sql.parquet.datetimeRebaseModeInRead", "CORRECTED")
    spark.conf.set("spark.sql.parquet.int96RebaseModeInRead", "CORRECTED")
    # The net effect keeps row_number() = 1 per key. Spark 3.5 would add a partial "window group
    # limit" before the shuffle: a full sort of every change row that saves nothing when keys seldom
    # repeat within a window (the common case once unneeded before-images are dropped) and saves little
    # when they do, since the rows are shuffled and sorted by key after it anyway.
    spark.conf.set("spark.sql.optimizer.windowGroupLimitThreshold", "-1")


def merge_batch(
    spark: SparkSession,
    target: MergeTarget,
    plan: TargetPlan,
    windows: list[Window],
    applied: AppliedRanges,
    hard: bool,
) -> AppliedRanges:
    """Apply windows of one target in one commit; return the table's applied ranges afterwards.

    :param windows: one snapshot, or change windows (in any order).
    :param applied: the ranges the table holds before.
    """
    frames = [
        read_window(spark, w, plan.table, check_count=False) for w in windows if w.manifest.row_count > 0
    ]
    snapshot = windows[0] if windows[0].manifest.kind == "snapshot" else None
    if not frames and snapshot is None:
        LOG.info("target %s: windows %s are empty, no MERGE", plan.table, [w.label for w in windows])
        return applied
    if frames:
        changes = frames[0]
        for frame in frames[1:]:
            changes = changes.unionByName(frame, allowMissingColumns=True)
    else:
        changes = empty_changes(spark, snapshot, plan.column_types)
    columns = tuple(c for c in changes.columns if c not in (*POSITION_COLUMNS, COMMIT_TIME))
    LOG.info("target %s: MERGE of %s", plan.table, ", ".join(w.label for w in windows))
    after = ranges_after(applied, windows)
    target.apply(ChangeBatch(plan, tuple(windows), changes, columns, hard, after))
    return after


def _pending(plan: TargetPlan, hard: bool) -> list[Window]:
    """Return the plan's windows not applied yet; refuse out-of-order windows under hard deletes."""
    pending = []
    for window in plan.windows:
        manifest = window.manifest
        ranges = plan.applied.get(manifest.capture_instance, [])
        if covers(ranges, *manifest.lsn_range):
            LOG.info("target %s: window %s is already applied, skipped", plan.table, window.label)
            plan.skipped.append(window)
            continue
        if hard and ranges and manifest.kind == "changes" and manifest.lsn_range[0] <= ranges[-1][1]:
            raise MergeJobError(
                f"target table {plan.table}: window {window.label} starts at or below the highest applied LSN "
                f"{Lsn.from_int(ranges[-1][1])} of {manifest.capture_instance}. With --delete-mode hard windows "
                "must be merged in LSN order (a deleted row leaves no trace, so an older window would bring it "
                "back); use --delete-mode soft for backfills and re-runs"
            )
        pending.append(window)
    return pending


def run(spark: SparkSession, settings: MergeSettings, target: MergeTarget | None = None) -> dict[str, Any]:
    """Validate every window, then merge them target by target; return a summary of what was done.

    :param settings: the job's settings.
    :param target: the kind of target table; default the Iceberg target with the settings' write mode.
    """
    configure_session(spark)
    if target is None:
        target = IcebergTarget(spark, settings.write_mode, settings.table_properties)
    target.check_session()
    if not settings.manifests:
        raise MergeJobError("no window manifests given: pass --manifest (the extract task's manifest URI)")
    windows = [read_manifest(spark, uri) for uri in settings.manifests]
    for window in windows:
        check_files(spark, window)
    hard = settings.delete_mode == "hard"
    plans: dict[str, TargetPlan] = {}
    for window in windows:
        table = settings.target_for(window)
        plans.setdefault(table, TargetPlan(table)).windows.append(window)
    for plan in plans.values():
        plan.exists = target.exists(plan.table)
        plan.applied = target.applied_ranges(plan.table) if plan.exists else {}
        plan.windows = _pending(plan, hard)
    for plan in plans.values():
        for window in plan.windows:
            if window.manifest.row_count > 0:
                read_window(spark, window, plan.table, check_count=True)
        if plan.windows:
            plan_schema(
                plan,
                target.table_schema(plan.table) if plan.exists else None,
                target.identifier_fields(plan.table) if plan.exists else None,
            )
    result: dict[str, Any] = {}
    for plan in plans.values():
        applied = plan.applied
        if plan.windows:
            if not plan.exists:
                target.create_table(plan)
            else:
                target.evolve_table(plan)
            snapshots = sorted(
                (w for w in plan.windows if w.manifest.kind == "snapshot"),
                key=lambda w: w.manifest.lsn_range[1],
            )
            for snapshot in snapshots:
                applied = merge_batch(spark, target, plan, [snapshot], applied, hard)
            changes = [w for w in plan.windows if w.manifest.kind == "changes"]
            if changes:
                applied = merge_batch(spark, target, plan, changes, applied, hard)
        result[plan.table] = {
            "applied": [w.label for w in plan.windows],
            "skipped": [w.label for w in plan.skipped],
            "max_applied_lsn": {
                ci: Lsn.from_int(max(hi for _, hi in ranges)).hex for ci, ranges in applied.items() if ranges
            },
        }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job as spark-submit does: parse the arguments, merge, print the result line.

    :param argv: the arguments; default ``sys.argv[1:]``.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = parse_args(sys.argv[1:] if argv is None else argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("sqlserver-cdc-merge").getOrCreate()
    try:
        result = run(spark, settings)
    except (MergeJobError, ManifestError) as err:
        LOG.error("%s", err)
        print(f"ERROR: {err}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    print(f"{RESULT_MARKER} {json.dumps(result, sort_keys=True)}")
    return 0
