"""The merge run: read and check every window, then merge them target table by target table, each on its own."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings, parse_args
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import COMMIT_TIME, POSITION_COLUMNS
from airflow_provider_sqlserver_cdc.spark.merge.column_groups import column_groups
from airflow_provider_sqlserver_cdc.spark.merge.concurrent_tables import run_concurrently
from airflow_provider_sqlserver_cdc.spark.merge.errors import (
    MergeJobError,
    TableMergeError,
    is_commit_conflict,
)
from airflow_provider_sqlserver_cdc.spark.merge.published_files import write_text
from airflow_provider_sqlserver_cdc.spark.merge.result_file import MergeResult
from airflow_provider_sqlserver_cdc.spark.merge.result_line import COMMITTED, FAILED, result_line
from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan, plan_schema
from airflow_provider_sqlserver_cdc.spark.merge.source_type_changes import check_target_can_follow
from airflow_provider_sqlserver_cdc.spark.merge.targets.base import (
    AppliedRanges,
    ChangeBatch,
    MergeTarget,
    ranges_after,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.selection import target_from_settings
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import (
    Window,
    check_files,
    check_rows,
    empty_changes,
    load_window,
    read_window,
)
from airflow_provider_sqlserver_cdc.window.lsn_ranges import covers, format_ranges
from airflow_provider_sqlserver_cdc.window.manifest import REPAIR, ManifestError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LOG = logging.getLogger("sqlserver_cdc.merge_job")
#: How often a table's merge is tried when another writer's commit conflicts with it.
CONFLICT_ATTEMPTS = 4


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
    frames = [_rows(spark, plan, w) for w in windows if w.manifest.row_count > 0]
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
    target.apply(ChangeBatch(plan, tuple(windows), changes, columns, hard, after, applied))
    return after


def _rows(spark: SparkSession, plan: TargetPlan, window: Window) -> DataFrame:
    """Return a window's rows: as the check read them, or read now for a window not checked by this plan."""
    checked = plan.checked.get(window.uri)
    return checked.rows if checked is not None else read_window(spark, window, plan.table)


def _pending(plan: TargetPlan, hard: bool) -> list[Window]:
    """Return the plan's windows not applied yet; refuse out-of-order windows under hard deletes.

    :param hard: hard deletes into a target that forgets deleted keys (windows must come in LSN order).
    """
    pending = []
    for window in plan.windows:
        manifest = window.manifest
        ranges = plan.applied.get(manifest.capture_instance, [])
        if manifest.kind == REPAIR:
            if hard:
                raise MergeJobError(
                    f"target table {plan.table}: window {window.label} is a reconcile repair; with --delete-mode "
                    "hard the table keeps no trace of deleted keys, so the repair's rows could bring back a key "
                    "deleted after them. Repair only targets merged with --delete-mode soft (docs/reconcile.md)"
                )
            pending.append(window)  # never skipped: its rows are older or newer than the table's per key
            continue
        if covers(ranges, *manifest.lsn_range):
            LOG.info("target %s: window %s is already applied, skipped", plan.table, window.label)
            plan.skipped.append(window)
            continue
        if hard and ranges and manifest.kind == "changes" and manifest.lsn_range[0] <= ranges[-1][1]:
            raise MergeJobError(
                f"target table {plan.table}: window {window.label} starts at or below the highest applied LSN "
                f"{Lsn.from_int(ranges[-1][1])} of {manifest.capture_instance}. With --delete-mode hard this target "
                "takes windows in LSN order only (a deleted row leaves no trace, so an older window would bring it "
                "back); use --delete-mode soft for backfills and re-runs (a PostgreSQL target keeps deleted keys "
                "and takes any order)"
            )
        pending.append(window)
    _check_continuity(plan, pending)
    return pending


def _check_continuity(plan: TargetPlan, pending: list[Window]) -> None:
    """Refuse windows that continue an applied-through LSN the table does not hold (source of truth).

    The extractor set ``applied_through`` from the watermark Variable, a mirror of the table; if the
    table lacks that LSN (restored, re-created, or changed by hand), applying the window would record
    a range over changes it never received.
    """
    after = ranges_after(plan.applied, pending)
    for window in pending:
        through = window.manifest.applied_through
        if window.manifest.kind != "changes" or through is None:
            continue
        ranges = after.get(window.manifest.capture_instance, [])
        if covers(ranges, int(Lsn.from_hex(through)), int(Lsn.from_hex(through))):
            continue
        held = format_ranges(plan.applied.get(window.manifest.capture_instance, [])) or "nothing"
        raise MergeJobError(
            f"target table {plan.table}: window {window.label} continues LSN {through} (the watermark Variable "
            f"of {window.manifest.capture_instance} said every change up to it is applied), but the table holds "
            f"{held}. The Variable is ahead of the table (was the table restored, re-created or rewritten?); "
            "nothing was written. Re-snapshot the table (trigger the DAG with conf "
            f'{{"resnapshot": ["{window.manifest.capture_instance}"]}}) or delete its watermark Variable'
        )


def _prepare(spark: SparkSession, target: MergeTarget, plan: TargetPlan, hard: bool) -> None:
    """Find the table's windows not applied yet, check them and plan the schema; change nothing.

    :param plan: the table's plan with all its windows; left with the pending ones.
    """
    plan.exists = target.exists(plan.table)
    plan.applied = target.applied_ranges(plan.table) if plan.exists else {}
    plan.windows = _pending(plan, hard and not target.remembers_hard_deletes)
    for window in plan.windows:
        check_files(spark, window)
        if window.manifest.row_count > 0:
            plan.checked[window.uri] = check_rows(spark, window, plan.table)
    if plan.windows:
        plan_schema(
            plan,
            target.table_schema(plan.table) if plan.exists else None,
            target.identifier_fields(plan.table) if plan.exists else None,
        )
        check_target_can_follow(spark, target, plan)


def _commit(spark: SparkSession, target: MergeTarget, plan: TargetPlan, hard: bool) -> None:
    """Create or evolve the table, then merge its snapshots and its change windows, a commit per group."""
    if not plan.windows:
        return
    if not plan.exists:
        target.create_table(plan)
    else:
        target.evolve_table(plan)
    snapshots = sorted(
        (w for w in plan.windows if w.manifest.kind == "snapshot"),
        key=lambda w: w.manifest.lsn_range[1],
    )
    changes = [w for w in plan.windows if w.manifest.kind in ("changes", REPAIR)]
    # one MERGE per run of windows carrying the same columns (one unless the source's schema changed)
    for batch in [*([s] for s in snapshots), *column_groups(changes)]:
        plan.applied = merge_batch(spark, target, plan, batch, plan.applied, hard)
        plan.merged.extend(batch)


def _commit_retrying(spark: SparkSession, target: MergeTarget, plan: TargetPlan, hard: bool) -> None:
    """Commit the table's windows; when another writer's commit conflicts, read the table again and retry.

    A retry re-reads the applied ranges, so the windows the conflicting writer (or this run's first
    attempt) committed are skipped, and the LSN guard keeps a change from replacing a newer one.
    """
    windows = list(plan.windows) + list(plan.skipped)
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            _commit(spark, target, plan, hard)
            return
        except Exception as err:
            if not is_commit_conflict(err) or attempt == CONFLICT_ATTEMPTS:
                raise
            LOG.warning(
                "target table %s: another writer committed first (%s); reading the table again, attempt %d of %d",
                plan.table,
                failure_reason(err),
                attempt + 1,
                CONFLICT_ATTEMPTS,
            )
            merged = list(plan.merged)
            plan.windows, plan.skipped, plan.merged = list(windows), [], merged
            _prepare(spark, target, plan, hard)


def _unmerged_labels(plan: TargetPlan) -> list[str]:
    """Return the labels of the plan's pending windows this run has not committed."""
    return [w.label for w in plan.windows if w not in plan.merged]


def failure_reason(err: BaseException) -> str:
    """Return what to tell about a table's failure: the job's own messages whole, others' first line.

    :param err: the error that stopped the table.
    """
    if isinstance(err, (MergeJobError, ManifestError)):
        return str(err)
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:1000]


def _operation_rows(windows: Sequence[Window]) -> dict[str, int]:
    """Return operation -> rows over the windows' manifests (a snapshot's rows are inserts)."""
    rows: dict[str, int] = {}
    for window in windows:
        for operation, count in window.manifest.operation_counts.items():
            rows[operation] = rows.get(operation, 0) + int(count)
    return rows


def table_entry(plan: TargetPlan, error: BaseException | None) -> dict[str, Any]:
    """Return the summary of one table: committed or failed, its windows, rows and applied LSNs.

    :param plan: the table's plan after the run.
    :param error: what stopped the table, None when it committed.
    """
    applied = plan.windows if error is None else plan.merged
    entry: dict[str, Any] = {
        "status": COMMITTED if error is None else FAILED,
        "applied": [w.label for w in applied],
        "skipped": [w.label for w in plan.skipped],
        "max_applied_lsn": {
            ci: Lsn.from_int(max(hi for _, hi in ranges)).hex for ci, ranges in plan.applied.items() if ranges
        },
        "applied_lsn_ranges": {ci: format_ranges(ranges) for ci, ranges in plan.applied.items() if ranges},
        "rows": _operation_rows(applied),
        "snapshot_id": plan.snapshot_id,
        "seconds": round(plan.seconds, 3),
    }
    if error is not None:
        entry["failed_windows"] = _unmerged_labels(plan)
        entry["error"] = failure_reason(error)
    return entry


def _failure_message(plans: dict[str, TargetPlan], failures: dict[str, BaseException]) -> str:
    """Return the job's error when tables failed: each failed table, its windows and reason; what to do."""
    committed = [table for table in plans if table not in failures]
    lines = [
        f"the merge failed for {len(failures)} of {len(plans)} target table(s): {', '.join(failures)}",
        *(
            f"- {table} (windows {', '.join(_unmerged_labels(plans[table]))}): {failure_reason(err)}"
            for table, err in failures.items()
        ),
        f"Committed: {', '.join(committed) if committed else 'none'}. Fix the cause and re-run the task: each "
        "table skips the windows it already holds, so only the failed tables' windows are merged again",
    ]
    return "\n".join(lines)


def _log_failure(plan: TargetPlan, err: BaseException) -> None:
    LOG.error(
        "target table %s failed, windows %s; the other tables go on: %s",
        plan.table,
        ", ".join(_unmerged_labels(plan)),
        failure_reason(err),
        exc_info=not isinstance(err, (MergeJobError, ManifestError)),
    )


def _merge_concurrently(
    spark: SparkSession, settings: MergeJobSettings, plans: list[TargetPlan], hard: bool
) -> dict[str, BaseException]:
    """Check and merge the tables ``settings.concurrent_tables`` at a time (``concurrent_tables``); return the failures."""

    def merge_table(session: SparkSession, plan: TargetPlan) -> None:
        target = target_from_settings(session, settings)
        started = time.monotonic()
        try:
            _prepare(session, target, plan, hard)
            _commit_retrying(session, target, plan, hard)
        except Exception as err:
            _log_failure(plan, err)
            raise
        finally:
            plan.seconds += time.monotonic() - started

    LOG.info("merging %d target tables, %d at a time", len(plans), settings.concurrent_tables)
    failed = run_concurrently(spark, plans, merge_table, settings.concurrent_tables, configure_session)
    return {plans[index].table: err for index, err in failed.items()}


def run(spark: SparkSession, settings: MergeJobSettings, target: MergeTarget | None = None) -> dict[str, Any]:
    """Validate every window, then merge them target by target; return a summary of what was done.

    A table that fails (a window that does not check out, a schema it cannot take, a failed MERGE)
    does not stop the others: every table is attempted, then ``TableMergeError`` names the failed ones.

    :param settings: the job's settings.
    :param target: the kind of target table; default the one the settings select (``targets.selection``).
    """
    configure_session(spark)
    given_target = target is not None
    if target is None:
        target = target_from_settings(spark, settings)
    target.check_session()
    if not settings.manifests:
        raise MergeJobError("no window manifests given: pass --manifest (the extract task's manifest URI)")
    windows = [load_window(spark, uri) for uri in settings.manifests]
    hard = settings.delete_mode == "hard"
    plans: dict[str, TargetPlan] = {}
    for window in windows:
        table = settings.target_for(window)
        plans.setdefault(table, TargetPlan(table)).windows.append(window)
    failures: dict[str, BaseException] = {}
    concurrent = settings.concurrent_tables > 1 and len(plans) > 1 and not given_target
    if concurrent:
        failures = _merge_concurrently(spark, settings, list(plans.values()), hard)
    for step in () if concurrent else (_prepare, _commit_retrying):
        for plan in plans.values():
            if plan.table in failures:
                continue
            started = time.monotonic()
            try:
                step(spark, target, plan, hard)
            except Exception as err:
                failures[plan.table] = err
                _log_failure(plan, err)
            finally:
                plan.seconds += time.monotonic() - started
    result = {plan.table: table_entry(plan, failures.get(plan.table)) for plan in plans.values()}
    for table, entry in result.items():
        if entry["status"] == COMMITTED:
            # The asset event's snapshot id (assets.py): the commit just made, read again only for a replay.
            committed = entry["snapshot_id"]
            entry["version"] = str(committed) if committed is not None else target.version(table)
    if failures:
        raise TableMergeError(_failure_message(plans, failures), result, failures) from next(
            iter(failures.values())
        )
    return result


def write_result(spark: SparkSession, uri: str, summary: dict[str, Any], started: float) -> None:
    """Write the run's result file (``result_file``) atomically; a failure to write it is logged, not raised.

    :param uri: where (``--result-uri``).
    :param summary: target table -> entry.
    :param started: ``time.monotonic()`` when the run started.
    """
    result = MergeResult.from_summary(
        summary, seconds=round(time.monotonic() - started, 3), application_id=spark.sparkContext.applicationId
    )
    try:
        write_text(spark, uri, result.to_json())
    except Exception as err:  # the commits stand; the operator says it found no result file
        LOG.error("could not write the result file %s: %s", uri, failure_reason(err))
        return
    LOG.info("result written to %s", uri)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job as spark-submit does: parse the arguments, merge, write the result file and print its line.

    The result (``--result-uri``, and the last stdout line for a reader of the log) is written when
    tables failed too (their entries say ``failed``); the exit code is then 2, as for any error the
    user has to fix.

    :param argv: the arguments; default ``sys.argv[1:]``.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = parse_args(sys.argv[1:] if argv is None else argv)
    import airflow_provider_sqlserver_cdc as package

    # Where the driver found the job's modules: the py_files zip, or the provider installed on the cluster.
    LOG.info("merge job %s, modules from %s", package.__version__, Path(package.__file__).parent)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("sqlserver-cdc-merge").getOrCreate()
    started = time.monotonic()
    try:
        result = run(spark, settings)
    except (MergeJobError, ManifestError) as err:
        if isinstance(err, TableMergeError):
            if settings.result_uri:
                write_result(spark, settings.result_uri, err.result, started)
            print(result_line(err.result))
        LOG.error("%s", err)
        print(f"ERROR: {err}", file=sys.stderr)
        return 2
    else:
        if settings.result_uri:
            write_result(spark, settings.result_uri, result, started)
    finally:
        spark.stop()
    print(result_line(result))
    return 0
