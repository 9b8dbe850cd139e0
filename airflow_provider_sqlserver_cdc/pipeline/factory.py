"""
Build the replication pipeline, as a whole DAG or as a task group of your own DAG.

Per run, for every capture instance in ``settings.tables`` (or in the Variable that replaces them)::

    tables -> plan -+-> snapshot[ci to snapshot] ----------------------+
                    +-> wait_for_capture[ci] -> extract[ci] -----------+-> merge -> commit_watermarks
                                                            (every task above) -> run_outcome

``plan`` (CdcLoadPlanOperator) snapshots a capture instance that has no watermark yet (first
run, or its watermark Variable was deleted), that ``dag_run.conf["resnapshot"]`` names, or whose
changes after the watermark were cleaned up; the others get the run's change window.
``snapshot`` and ``wait_for_capture``/``extract`` are mapped over the capture instances of each
path (a mapped task with nothing to do is skipped). One Spark application merges every window
of the run: Spark's start-up dominates a small merge, and each target table is its own Iceberg
commit, so a failure leaves the other tables committed and the retry skips them.

One capture instance's failure stays its own. ``merge`` runs once every window task is done
(``all_done``), on the windows that exist, and skips when there are none: a failed
``extract[i]`` (a retention gap, a schema change, a lost connection) leaves no window, and the
other instances' windows are merged; ``commit_watermarks`` takes the windows the merge took
(its XCom ``merged_windows``), so it depends on the merge alone; it runs ``all_done``: when one
target table fails in the merge, the tables that committed get their watermarks in the same run.
Airflow derives a run's state from its leaf tasks, so the leaf ``run_outcome`` (``all_done``, no retries) reads the states of
the run's tasks and fails the run with one line per failed capture instance: the task, the
error (a failed snapshot or extract records it in its XCom ``failure``) and what to do; the
run's other capture instances are named as merged and committed (pipeline/run_outcome.py).

With ``maintenance.enabled``, ``commit_watermarks -> maintenance_window -> maintain_tables`` follows:
in the runs whose data interval holds a time of ``maintenance.schedule``, CdcTableMaintenanceOperator
compacts and expires the target tables that pass a threshold (docs/maintenance.md).

Window modes:

- ``interval``: each run extracts the transactions committed in its data interval. The DAG's
  schedule is a ``CronDataIntervalTimetable`` whatever ``[scheduler] create_cron_data_intervals``
  says: a run of the interval ending at 10:00 covers [09:00, 10:00), which is what the windows
  are cut from (Airflow 3's default for a cron string gives runs an empty data interval).
- ``watermark``: each run takes every change after the stored watermark up to the max LSN when
  it starts, whatever its data interval: for runs triggered on demand or by events, or to catch
  up after an outage in one run. Run only one of the two modes per table: they share watermarks
  and targets.

Why the defaults (settings.py) are safe:

- **Windows are pure functions of the data interval** (interval mode). A re-run, a retry or a
  backfill of an interval extracts the identical LSN range into the same directory (its files
  replaced), and the merge applies a change only when its LSN position is newer than the row's,
  skipping a window already recorded in the table's Iceberg snapshot summary. So ``retries``
  (3, with a delay) on every task cannot lose or duplicate data, and neither can
  ``airflow backfill create`` over past intervals, in any order (docs/backfill.md).
- **Retries in watermark mode** are idempotent too: a retried extract re-reads the same
  watermark (it moves only after the merge) and rewrites its window; the merge skips windows
  already applied. Backfills do not apply there: the window does not depend on the interval.
- **max_active_runs = 1.** In interval mode correctness does not depend on it, but two runs
  merging into the same Iceberg tables at once would conflict and retry their commits; one run
  at a time keeps Spark busy once per interval (backfills take ``--max-active-runs``
  themselves). In watermark mode it is required: a run's window starts at the watermark the
  previous run committed, so two concurrent runs would extract overlapping windows (the merge
  would still apply each change once, but the work would be done twice).
- **Sensor:** ``reschedule`` mode (no worker slot held), poking every minute, timing out after
  an hour without retries: a capture job that is that far behind (SQL Server Agent stopped) is
  an operational problem the timeout message describes (job state, lag), not a glitch.
- **Timeouts:** extract and snapshot 30 min, merge 60 min (``execution_timeout``), far above a
  normal interval's work, so only a hung task is stopped; its retry is idempotent (a snapshot
  resumes after its last whole chunk).
- **catchup = False**; intervals that got no run (scheduler down, DAG paused) are healed by the
  next run, which extends its window back over their changes (``extract.on_gap``: ``heal``;
  ``fail`` fails the run naming the ``airflow backfill create`` command instead). Past intervals
  can always be re-run with ``airflow backfill create``.
- **Watermarks** mirror the LSN ranges the target tables hold, read from the tables after the
  merge committed them (``commit_watermarks``); they only move forward, and a backfill never moves them back.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import (
    DAG,
    CronDataIntervalTimetable,
    TaskGroup,
    TriggerRule,
    get_current_context,
    task,
)

from airflow_provider_sqlserver_cdc.assets import declared_target_tables, postgres_target_outlet, target_asset
from airflow_provider_sqlserver_cdc.operators.continuous_apply import WaitForAppliedWindowsOperator
from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.operators.maintenance import CdcTableMaintenanceOperator
from airflow_provider_sqlserver_cdc.operators.reconcile import CdcReconcileOperator
from airflow_provider_sqlserver_cdc.operators.retention_headroom import CdcRetentionHeadroomOperator
from airflow_provider_sqlserver_cdc.operators.snapshot import CdcLoadPlanOperator, CdcSnapshotOperator
from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator
from airflow_provider_sqlserver_cdc.operators.watermark import WatermarkCommitOperator
from airflow_provider_sqlserver_cdc.pipeline.change_tracking_tasks import add_change_tracking_tasks
from airflow_provider_sqlserver_cdc.pipeline.run_outcome import check_run
from airflow_provider_sqlserver_cdc.pipeline.settings import ReplicationSettings
from airflow_provider_sqlserver_cdc.pipeline.source_groups import add_source_groups, describe_source
from airflow_provider_sqlserver_cdc.pipeline.table_list import run_tables, tables_variable_key
from airflow_provider_sqlserver_cdc.sensors.lsn import LsnSensor
from airflow_provider_sqlserver_cdc.shared_storage import catalog_warehouses, check_shared_paths
from airflow_provider_sqlserver_cdc.spark.merge.arguments import POSTGRES_TARGET
from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_WINDOW_MODE
from airflow_provider_sqlserver_cdc.window.manifest import WINDOW_MODES


def cdc_replication_dag(
    settings: ReplicationSettings,
    *,
    dag_id: str,
    window_mode: str = DEFAULT_WINDOW_MODE,
    **dag_kwargs: Any,
) -> DAG:
    """
    Return a DAG that replicates ``settings.tables``, its tasks without a group prefix.

    Schedule, start date, retries and ``max_active_runs`` come from ``settings.dag``;
    ``catchup`` is off. The Variable ``<dag_id>__tables`` replaces the tables at run time.

    :param settings: the pipeline's settings.
    :param dag_id: the DAG's id.
    :param window_mode: ``interval`` (a CronDataIntervalTimetable of ``settings.dag.schedule``) or
        ``watermark`` (``settings.dag.watermark_schedule``).
    :param dag_kwargs: further DAG arguments (``description``, ``tags``...), or ones replacing the
        settings' (``schedule``, ``catchup``...); a ``doc_md`` is shown above the pipeline's own
        documentation (this module's: the tasks and why the defaults are safe).
    """
    _check_window_mode(window_mode)
    if window_mode == "interval":
        schedule: Any = CronDataIntervalTimetable(settings.dag.schedule, timezone="UTC")
    else:
        schedule = settings.dag.watermark_schedule
    arguments = {
        "schedule": schedule,
        "start_date": settings.dag.start_date,
        "catchup": False,
        "max_active_runs": settings.dag.max_active_runs,
        "default_args": settings.dag.default_args(),
        **dag_kwargs,
        "doc_md": "\n\n".join(filter(None, [dag_kwargs.get("doc_md"), __doc__])),
    }
    if window_mode == "watermark" and arguments["max_active_runs"] != 1:
        raise ValueError(
            f"{dag_id}: max_active_runs must be 1 in watermark mode (a run starts at the watermark "
            f"the previous run committed), got {arguments['max_active_runs']}"
        )
    dag = DAG(dag_id, **arguments)
    with dag:
        add_replication_tasks(settings, window_mode=window_mode, tables_variable=tables_variable_key(dag_id))
    return dag


def cdc_replication_task_group(
    settings: ReplicationSettings,
    *,
    window_mode: str = DEFAULT_WINDOW_MODE,
    group_id: str = "cdc_replication",
) -> TaskGroup:
    """
    Add the pipeline as a task group to the DAG being defined (inside ``with DAG(...)``); return the group.

    The group's tasks get ``settings.dag``'s retries; schedule and runs are the DAG's (an
    interval-mode pipeline needs a data-interval timetable, e.g. ``CronDataIntervalTimetable``).
    The Variable ``<dag_id>__<group_id>__tables`` replaces the tables at run time.

    :param settings: the pipeline's settings.
    :param window_mode: ``interval`` or ``watermark``.
    :param group_id: the group's id, the prefix of its task ids.
    """
    _check_window_mode(window_mode)
    with TaskGroup(group_id=group_id, default_args=settings.dag.default_args()) as group:
        variable = tables_variable_key(group.dag.dag_id, group_id)
        add_replication_tasks(settings, window_mode=window_mode, tables_variable=variable)
    return group


def add_replication_tasks(
    settings: ReplicationSettings, *, window_mode: str, tables_variable: str, source_label: str | None = None
) -> dict[str, Any]:
    """
    Add the pipeline's tasks to the DAG or task group being defined; return them by name.

    With ``settings.sources``, one task group per source holds that source's tasks (named
    ``<source>.<name>``; each reads its tables Variable ``<dag_id>__<source>__tables``, not
    ``tables_variable``): pipeline/source_groups.py.

    :param settings: the pipeline's settings.
    :param window_mode: ``interval`` or ``watermark``.
    :param tables_variable: the Variable whose JSON list replaces ``settings.tables`` at run time.
    :param source_label: how the run's failure message names the source (several sources).
    :raises LocalPathError: the staging path or a catalog warehouse is a local path and the tasks'
        executor is distributed (see ``shared_storage``).
    """
    _check_window_mode(window_mode)
    if settings.sources:
        return add_source_groups(
            settings,
            lambda own, group, entry: add_replication_tasks(
                own,
                window_mode=window_mode,
                tables_variable=tables_variable_key(group.dag.dag_id, group.group_id),
                source_label=describe_source(entry, own),
            ),
        )

    @task
    def tables() -> list[str]:
        """The capture instances of this run: the tables Variable if set, else the settings' list."""
        return run_tables(settings.tables, tables_variable)

    @task
    def snapshot_list(names: list[str]) -> list[str]:
        """The capture instances the plan snapshots (a plain XCom, which mapping needs)."""
        return list(names)

    @task
    def extract_list(names: list[str]) -> list[str]:
        """The capture instances the plan extracts a change window for."""
        return list(names)

    source = settings.source.operator_arguments()
    reader = settings.source.operator_arguments(time_zone=True)  # the tasks that read the server's clock
    masking = settings.masking.operator_arguments()
    run_table_list = tables()
    plan = CdcLoadPlanOperator(task_id="plan", capture_instances=run_table_list, **source)
    to_snapshot = snapshot_list(plan.output["snapshot"])
    snapshot = CdcSnapshotOperator.partial(
        task_id="snapshot",
        base_path=settings.staging_path,
        allow_table_lock_fallback=settings.snapshot.allow_table_lock_fallback,
        chunk_rows=settings.snapshot.chunk_rows,
        require_key_columns=settings.merge.target.require_key_columns,  # keyless: a change log
        execution_timeout=_minutes(settings.snapshot.execution_timeout_minutes),
        **reader,
        **masking,
    ).expand(capture_instance=to_snapshot)
    to_extract = extract_list(plan.output["extract"])
    wait = LsnSensor.partial(
        task_id="wait_for_capture",
        window_mode=window_mode,
        deferrable=settings.sensor.deferrable,
        **settings.sensor.operator_arguments(),
        **reader,
    ).expand(capture_instance=to_extract)
    extract = CdcExtractOperator.partial(
        task_id="extract",
        base_path=settings.staging_path,
        window_mode=window_mode,
        row_filter_option=settings.extract.row_filter_option,
        batch_size=settings.extract.batch_size,
        max_file_bytes=settings.extract.max_file_bytes,
        on_gap=settings.extract.on_gap,
        on_schema_change=settings.extract.on_schema_change,
        create_capture_instance=settings.extract.create_capture_instance,
        disable_old_capture_instance=settings.extract.disable_old_capture_instance,
        require_key_columns=settings.merge.target.require_key_columns,  # keyless: a change log
        execution_timeout=_minutes(settings.extract.execution_timeout_minutes),
        **reader,
        **masking,
    ).expand(capture_instance=to_extract)
    wait >> extract
    # Change Tracking tables (docs/change-tracking.md): their own plan/snapshot/wait/extract, same merge and commit
    tracked = (
        add_change_tracking_tasks(settings, window_mode=window_mode)
        if settings.change_tracking.tables
        else []
    )
    if settings.merge.mode == "continuous":
        merge: Any = continuous_apply_task(
            settings, [snapshot.output, extract.output, *(t.output for t in tracked)]
        )
    else:
        merge = batch_merge_task(settings, [snapshot.task_id, extract.task_id, *(t.task_id for t in tracked)])
    commit = watermark_commit_task(merge)
    [snapshot, extract, *tracked] >> merge >> commit
    named = [plan, snapshot, wait, extract, *tracked]
    named_ids = {t.task_id for t in named} | {merge.task_id}
    # Every task the merge waits for, the Change Tracking branch's plan and sensor included.
    others = sorted(
        (t for t in merge.get_flat_relatives(upstream=True) if t.task_id not in named_ids),
        key=lambda t: t.task_id,
    )
    outcome = add_run_outcome_task(
        watched=[*named, *others, merge, commit],
        name_lists={
            snapshot.task_id: to_snapshot.operator.task_id,
            wait.task_id: to_extract.operator.task_id,
            extract.task_id: to_extract.operator.task_id,
        },
        commit=commit,
        source_label=source_label,
    )
    tasks = {
        "plan": plan,
        "snapshot": snapshot,
        "wait": wait,
        "extract": extract,
        "merge": merge,
        "commit": commit,
        "outcome": outcome,
    }
    if settings.retention_headroom.enabled:
        tasks["retention_headroom"] = add_headroom_check(settings, run_table_list, after=commit)
    # Table maintenance compacts Iceberg tables; a PostgreSQL target (merge.target.kind postgres) has none to do.
    if settings.maintenance.enabled and settings.merge.target.kind == "iceberg":
        tasks |= add_maintenance_tasks(settings, after=commit)
    # The reconcile compares Iceberg targets (docs/reconcile.md); its schedule picks the runs that compare.
    if settings.reconcile.schedule and settings.merge.target.kind == "iceberg":
        tasks |= add_reconcile_tasks(settings, run_table_list, after=commit)
    check_shared_paths(
        {"staging_path": settings.staging_path}
        | {f"spark.conf.{key}": path for key, path in catalog_warehouses(settings.spark.conf).items()},
        [t.executor for t in (snapshot, extract, merge)],
    )
    return tasks


def batch_merge_task(settings: ReplicationSettings, extract_task_ids: list[str]) -> CdcSparkMergeOperator:
    """Return the batch mode's merge task: one Spark application merges the run's windows.

    :param settings: the pipeline's settings.
    :param extract_task_ids: the tasks whose XComs list the run's windows.
    """
    return CdcSparkMergeOperator(
        task_id="merge",
        extract_task_ids=list(extract_task_ids),
        namespace=settings.merge.namespace,
        table_name_template=settings.merge.table_name_template,
        delete_mode=settings.merge.delete_mode,
        write_mode=settings.merge.write_mode,
        table_properties=dict(settings.merge.table_properties),
        targets=dict(settings.merge.tables),
        target_kind=settings.merge.target.kind,
        target_conn_id=settings.merge.target.conn_id,
        jdbc_url=settings.merge.target.url,
        jdbc_credentials_file=settings.merge.target.credentials_file,
        jdbc_connections=settings.merge.target.connections,
        partition_buckets=settings.merge.partition_buckets,
        concurrent_tables=settings.merge.concurrent_tables,
        merge_strategy=settings.merge.merge_strategy,
        table_modes=dict(settings.merge.target.table_modes),
        **settings.spark.operator_arguments(),
        execution_timeout=_minutes(settings.merge.execution_timeout_minutes),
        # Once every window task is done, on the windows that exist: a failed extract[i] leaves the others'.
        # (all_done_min_one_success would skip the merge whenever a path had nothing to do.)
        trigger_rule=TriggerRule.ALL_DONE,
        skip_without_windows=True,
        outlets=merge_outlets(settings),
    )


def watermark_commit_task(merge: Any) -> WatermarkCommitOperator:
    """Return ``commit_watermarks``: it commits what the merge (or the wait for the apply) pushed.

    It runs whatever the merge's state (``all_done``): a merge that failed for some target tables
    pushed the committed tables' windows, whose watermarks advance in the same run; a merge that
    pushed none (skipped, or failed before its job wrote a result) skips it. ``run_outcome`` still
    fails the run.

    :param merge: the merge task (``batch_merge_task``, ``continuous_apply_task``).
    """
    return WatermarkCommitOperator(
        task_id="commit_watermarks", merge_task_id=merge.task_id, trigger_rule=TriggerRule.ALL_DONE
    )


def continuous_apply_task(settings: ReplicationSettings, windows: list[Any]) -> WaitForAppliedWindowsOperator:
    """Return the continuous mode's task in the merge's place: wait, deferred, until the run's windows are applied.

    The apply application (``ContinuousApplyOperator`` or the user's platform) runs outside the run.

    :param settings: the pipeline's settings.
    :param windows: the XComs of the tasks that list the run's windows.
    """
    return WaitForAppliedWindowsOperator(
        task_id="wait_for_apply",
        windows=windows,
        staging_path=settings.staging_path,
        timeout_seconds=settings.merge.apply_timeout_seconds,
        poll_interval=settings.merge.apply_poll_seconds,
        retries=0,  # a timeout is an answer (the application is down or behind), not a glitch to retry
        # As the batch merge: once every window task is done, on the windows that exist.
        trigger_rule=TriggerRule.ALL_DONE,
        outlets=merge_outlets(settings),  # the batch merge's assets and events (docs/assets.md)
        target_conn_id=settings.merge.target.conn_id
        if settings.merge.target.kind == POSTGRES_TARGET
        else None,
        jdbc_url=settings.merge.target.url if settings.merge.target.kind == POSTGRES_TARGET else None,
    )


def merge_outlets(settings: ReplicationSettings) -> list[Any]:
    """The merge task's outlets: one per target table of ``settings.tables`` (docs/assets.md).

    Iceberg: its ``iceberg://`` asset. PostgreSQL: its ``postgres://`` asset when ``merge.target.url``
    names the server, else an alias the run resolves through the target's connection (no connection
    is read when the DAG is parsed).
    """
    tables = declared_target_tables(
        settings.tables,
        namespace=settings.merge.namespace,
        table_name_template=settings.merge.table_name_template,
        targets=dict(settings.merge.tables),
        database=settings.source.database,
    )
    if settings.merge.target.kind == "iceberg":
        return [target_asset(table) for table in tables]
    return [postgres_target_outlet(table, settings.merge.target.url) for table in tables]


# --- time to loss (docs/operations.md, "Time to loss") ---------------------------------------------
def retention_headroom_dag(
    settings: ReplicationSettings, *, dag_id: str, schedule: str = "*/15 * * * *", **dag_kwargs: Any
) -> DAG:
    """
    Return a DAG of the time-to-loss check alone, on its own schedule: it alerts while the replication
    DAG is paused, failing or stuck in its sensor (docs/operations.md, "Time to loss").

    :param settings: the replication's settings (source, ``tables``, ``retention_headroom``).
    :param dag_id: the DAG's id.
    :param schedule: how often to check.
    :param dag_kwargs: further DAG arguments.
    """
    arguments = {"start_date": settings.dag.start_date, "catchup": False, "max_active_runs": 1, **dag_kwargs}
    with DAG(dag_id, schedule=schedule, **arguments) as dag:
        if settings.sources:  # one check per source, in its task group
            add_source_groups(
                settings, lambda own, group, entry: {"check": add_headroom_check(own, list(own.tables))}
            )
        else:
            add_headroom_check(settings, list(settings.tables))
    return dag


def add_headroom_check(settings: ReplicationSettings, capture_instances: Any, *, after: Any = None) -> Any:
    """
    Add the ``retention_headroom`` check after ``after``; return it.

    It runs once the run's other tasks are done, whatever their state (a failing run is when the
    headroom shrinks), reads the watermarks they left, and warns or fails (retries 0: its failure
    is an answer) without holding up anything.

    :param settings: the pipeline's settings (``settings.retention_headroom``).
    :param capture_instances: the run's capture instances (the ``tables`` task's output).
    :param after: the task it follows, if any.
    """
    headroom = settings.retention_headroom
    check = CdcRetentionHeadroomOperator(
        task_id="retention_headroom",
        capture_instances=capture_instances,
        warning_minutes=headroom.warning_minutes,
        critical_minutes=headroom.critical_minutes,
        retention_minutes=headroom.retention_minutes,
        change_tracking_tables=list(settings.change_tracking.tables),
        trigger_rule=TriggerRule.ALL_DONE,
        retries=0,
        **settings.source.operator_arguments(time_zone=True),
    )
    if after is not None:
        after >> check
    return check


def add_run_outcome_task(
    *, watched: list[Any], name_lists: dict[str, str], commit: Any, source_label: str | None = None
) -> Any:
    """
    Add ``run_outcome`` after ``watched`` (``all_done``): it fails the run naming each failed capture instance.

    :param watched: the tasks whose failure fails the run (``pipeline.run_outcome``).
    :param name_lists: mapped task id -> the task id whose XCom lists its capture instances by map index.
    :param commit: the watermark commit, whose result names what was committed.
    :param source_label: the source whose tasks these are, named in the failure message (several sources).
    """
    watched_ids = [t.task_id for t in watched]

    @task(task_id="run_outcome", trigger_rule=TriggerRule.ALL_DONE, retries=0)
    def run_outcome() -> list[str]:
        """Fail the run if a capture instance's task failed, naming it, the error and the remedy."""
        return check_run(
            get_current_context()["ti"], watched_ids, name_lists, commit.task_id, source=source_label
        )

    outcome = run_outcome()
    watched >> outcome
    return outcome


# --- table maintenance (docs/maintenance.md) -------------------------------------------------------
def maintenance_due(schedule: str, interval_start: dt.datetime, interval_end: dt.datetime) -> bool:
    """
    Say whether a run's data interval holds a time of the maintenance schedule.

    An empty interval (a run whose timetable gives none) is due when its time is a schedule time.

    :param schedule: cron expression or preset.
    :param interval_start: the run's data interval start.
    :param interval_end: the run's data interval end.
    """
    from croniter import croniter

    after = interval_start if interval_end > interval_start else interval_start - dt.timedelta(microseconds=1)
    return croniter(schedule, after).get_next(dt.datetime) <= interval_end


def add_maintenance_tasks(settings: ReplicationSettings, *, after: Any) -> dict[str, Any]:
    """
    Add the table maintenance (a due check, then CdcTableMaintenanceOperator) after ``after``; return them.

    It runs after the run's merge and watermark commit, so with one active run it never runs beside a
    merge of the same tables; a commit conflict with a merge from elsewhere (a backfill) fails the
    rewrite, and the task's retries run it again.

    :param settings: the pipeline's settings (``settings.maintenance``).
    :param after: the task it follows.
    """
    maintenance = settings.maintenance

    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def maintenance_window(data_interval_start: Any = None, data_interval_end: Any = None) -> bool:
        """Whether this run's data interval holds a time of ``maintenance.schedule``."""
        return maintenance_due(maintenance.schedule, data_interval_start, data_interval_end)

    due = maintenance_window()
    maintain = CdcTableMaintenanceOperator(
        task_id="maintain_tables",
        namespace=settings.merge.namespace,
        thresholds=maintenance.thresholds(),
        snapshot_retention_hours=maintenance.snapshot_retention_hours,
        retain_last=maintenance.retain_last,
        orphan_age_hours=maintenance.orphan_age_hours,
        tombstone_margin_hours=maintenance.tombstone_margin_hours,
        capture_instances=list(settings.tables),
        **settings.spark.operator_arguments(),
        execution_timeout=_minutes(maintenance.execution_timeout_minutes),
        **settings.source.operator_arguments(),
    )
    after >> due >> maintain
    return {"maintenance_window": due, "maintain": maintain}


def add_reconcile_tasks(
    settings: ReplicationSettings, capture_instances: Any, *, after: Any
) -> dict[str, Any]:
    """
    Add the reconcile (a due check, then CdcReconcileOperator mapped over the run's tables) after ``after``.

    It runs after the run's merge and watermark commit, so with one active run its repair never merges
    beside the run's merge; one table's difference or failure is its own mapped task's.

    :param settings: the pipeline's settings (``settings.reconcile``).
    :param capture_instances: the run's capture instances (the ``tables`` task's output).
    :param after: the task it follows.
    """
    reconcile = settings.reconcile
    schedule = str(reconcile.schedule)

    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def reconcile_window(data_interval_start: Any = None, data_interval_end: Any = None) -> bool:
        """Whether this run's data interval holds a time of ``reconcile.schedule``."""
        return maintenance_due(schedule, data_interval_start, data_interval_end)

    due = reconcile_window()
    compare = CdcReconcileOperator.partial(
        task_id="reconcile",
        staging_path=settings.staging_path,
        namespace=settings.merge.namespace,
        table_name_template=settings.merge.table_name_template,
        targets=dict(settings.merge.tables),
        repair=reconcile.repair,
        leaf_rows=reconcile.leaf_rows,
        max_reported_keys=reconcile.max_reported_keys,
        fail_on_difference=reconcile.fail_on_difference,
        allow_table_lock_fallback=settings.snapshot.allow_table_lock_fallback,
        **settings.spark.operator_arguments(),
        execution_timeout=_minutes(reconcile.execution_timeout_minutes),
        **settings.source.operator_arguments(),
    ).expand(capture_instance=capture_instances)
    after >> due >> compare
    return {"reconcile_window": due, "reconcile": compare}


def _check_window_mode(window_mode: str) -> None:
    if window_mode not in WINDOW_MODES:
        raise ValueError(f"window_mode must be one of {WINDOW_MODES}, got {window_mode!r}")


def _minutes(minutes: float) -> dt.timedelta:
    return dt.timedelta(minutes=minutes)
