"""The Iceberg target: tables in an Iceberg catalog of the Spark session, written with MERGE INTO.

The applied LSN ranges live in the snapshot summary of the commit that applies the windows
(``sqlserver-cdc.applied-lsn-ranges.<capture instance>``), so data and bookkeeping commit together;
a copy in the table properties outlives snapshot expiry (``iceberg_state``, docs/maintenance.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.merge.changelog_append import changelog_frame
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.executed_plan import log_merge
from airflow_provider_sqlserver_cdc.spark.merge.history_merge import (
    HISTORY_SOURCE_VIEW,
    history_merge_frame,
    history_merge_sql,
)
from airflow_provider_sqlserver_cdc.spark.merge.key_filter import (
    RUNTIME_KEY_FILTER_MIN_RATIO,
    RUNTIME_KEY_FILTER_MIN_RATIO_BUCKETED,
    KeyRange,
    runtime_key_filter_conf,
    runtime_key_filter_pays,
    session_conf,
    source_key_range,
)
from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import (
    DEFAULT_MERGE_STRATEGY,
    DEFAULT_WRITE_MODE,
    choose_strategy,
    target_files,
)
from airflow_provider_sqlserver_cdc.spark.merge.net_effect_frame import (
    checkpoint_partitions,
    checkpointed_net_effect,
    net_effect_frame,
)
from airflow_provider_sqlserver_cdc.spark.merge.partition_layout import (
    StagingLayout,
    bucket_count,
    creation_partitioning,
    staging_layout,
)
from airflow_provider_sqlserver_cdc.spark.merge.scale_options import DEFAULT_PARTITION_BUCKETS
from airflow_provider_sqlserver_cdc.spark.merge.spark_types import source_type_comment
from airflow_provider_sqlserver_cdc.spark.merge.staged_merge import SPJ_CONF, staged_net_effect
from airflow_provider_sqlserver_cdc.spark.merge.statements import (
    merge_sql,
    quote,
    quote_table,
    snapshot_clause,
)
from airflow_provider_sqlserver_cdc.spark.merge.table_modes import (
    CHANGELOG,
    CURRENT,
    HISTORY,
    TABLE_MODE_PROPERTY,
    TABLE_MODES,
    identifier_columns,
    meta_columns,
    mode_conflict,
    source_key_columns,
)
from airflow_provider_sqlserver_cdc.spark.merge.table_rewrite import (
    REWRITE_CONF,
    broadcast_fits,
    current_snapshot_id,
    overwrite_table,
    rewrite_sql,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.base import AppliedRanges, ChangeBatch, MergeTarget
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg_state import (
    STATE_PREFIX,
    RecordedState,
    ancestors,
    drop_marker,
    entries_for,
    mark_merge_started,
    newest_summary_state,
    ranges_of,
    read_state,
    record_state,
    state_entries,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg_state import (
    SUMMARY_MAX_LSN as SUMMARY_MAX_LSN,  # re-exported: the summary keys, by their historical home
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg_state import (
    SUMMARY_RANGES as SUMMARY_RANGES,
)
from airflow_provider_sqlserver_cdc.spark.merge.temporary_view import temporary_view
from airflow_provider_sqlserver_cdc.spark.merge.write_distribution import (
    UNSHUFFLED_WRITE_CONF,
    writes_delete_files_per_partition,
)
from airflow_provider_sqlserver_cdc.window.lsn_ranges import add_range, covers, format_ranges

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan

LOG = logging.getLogger("sqlserver_cdc.merge_job")

#: The start of the name of a MERGE's source view (``temporary_view`` makes it unique per merge).
MERGE_SOURCE_VIEW = "sqlserver_cdc_merge_source"
#: How often a bookkeeping commit is tried when other merges keep committing beside it.
COMMIT_ATTEMPTS = 5


def job_table_properties(write_mode: str) -> dict[str, str]:
    """Return the Iceberg table properties the job itself sets on the tables it creates.

    :param write_mode: ``merge-on-read`` or ``copy-on-write``.
    """
    return {
        "format-version": "2",
        "write.merge.mode": write_mode,
        "write.update.mode": write_mode,
        "write.delete.mode": write_mode,
    }


#: Properties of the tables the job creates that ``--table-property`` may replace (docs/maintenance.md).
DEFAULT_TABLE_PROPERTIES = {
    # Every commit writes a new metadata.json; keep a few, not all (a minutely merge makes thousands a day).
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
    # Rows are shuffled to the writers, so a write makes files near the target size, not one per task.
    "write.distribution-mode": "hash",
    "write.target-file-size-bytes": str(128 * 1024 * 1024),
    # One position-delete file per write task, not one per data file a merge touches (measured:
    # docs/maintenance.md, "Files sized on write").
    "write.delete.granularity": "partition",
}


def is_job_table_property(key: str) -> bool:
    """Say whether the job sets this table property itself (a user may not give it).

    :param key: the property name.
    """
    return key.lower() in job_table_properties("") or key.lower().startswith(STATE_PREFIX)


def summary_properties(applied: AppliedRanges) -> dict[str, str]:
    """Return the snapshot-summary entries that record the applied LSN ranges.

    :param applied: capture instance -> joined LSN ranges.
    """
    return entries_for(applied)


def format_state(ranges: AppliedRanges) -> str:
    """Return applied ranges for messages: ``ci: 0x…-0x…; …``."""
    return "; ".join(f"{ci}: {format_ranges(r)}" for ci, r in sorted(ranges.items())) or "none"


def iceberg_table(spark: SparkSession, table: str) -> Any:
    """Return the Iceberg ``Table`` (Java API, through py4j) behind a dotted Spark table name."""
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, quote_table(table))


def snapshot_state(snapshot: Any) -> dict[str, str]:
    """Return the job's entries of one snapshot's summary (empty for another writer's snapshot)."""
    return state_entries(snapshot.summary())


def job_snapshots(iceberg: Any) -> Iterator[dict[str, str]]:
    """Yield the job's state of each snapshot holding one, newest first, along the main branch's history."""
    for snapshot in ancestors(iceberg):
        state = snapshot_state(snapshot)
        if state:
            yield state


def recorded_state(spark: SparkSession, table: str) -> RecordedState:
    """Return the table's applied state and where it was read (``iceberg_state.read_state``): metadata only.

    :raises AppliedStateLostError: the table has snapshots but its state cannot be read exactly.
    """
    return read_state(iceberg_table(spark, table), table)


def applied_state(spark: SparkSession, table: str) -> dict[str, str]:
    """Return the table's applied-state entries: the newest retained summary's, else the exact property copy.

    :raises AppliedStateLostError: the table has snapshots but its state cannot be read exactly.
    """
    return recorded_state(spark, table).entries


def ranges_in_state(state: Mapping[str, str]) -> AppliedRanges:
    """Return capture instance -> applied LSN ranges of a snapshot's job entries."""
    return ranges_of(state)


def _joined(ranges: AppliedRanges, more: AppliedRanges) -> AppliedRanges:
    joined = {ci: list(r) for ci, r in ranges.items()}
    for ci, extra in more.items():
        for first, last in extra:
            joined[ci] = add_range(joined.get(ci, []), first, last)
    return joined


def _holds(ranges: AppliedRanges, other: AppliedRanges) -> bool:
    return all(
        covers(ranges.get(ci, []), first, last) for ci, extra in other.items() for first, last in extra
    )


def reconcile_applied_state(
    spark: SparkSession, table: str, written: AppliedRanges, read: AppliedRanges
) -> AppliedRanges:
    """Make the newest job state hold ``written`` and every job commit that raced it; return that state.

    Two merges of one table read the same state, and Iceberg lets both commit when their data does
    not conflict: the later commit's summary then lacks the earlier one's ranges. After its commit,
    each job walks the history back from the newest snapshot, joining the ranges of the job commits
    made since the state it read (those the state read already holds are that state or older), and
    commits the union with an empty append when the newest state lacks part of it. Every writer does
    this, so the newest state ends up holding every committed window. Ranges only grow, so the
    order of these commits does not matter.

    :param written: the ranges this job's commit recorded.
    :param read: the ranges the job read before its commit (``written`` builds on them).
    """
    for _ in range(COMMIT_ATTEMPTS):
        iceberg = iceberg_table(spark, table)
        iceberg.refresh()  # the catalog may cache the table: see other writers' commits
        union = {ci: list(r) for ci, r in written.items()}
        newest: AppliedRanges | None = None
        for state in job_snapshots(iceberg):
            ranges = ranges_in_state(state)
            newest = ranges if newest is None else newest
            if _holds(read, ranges):
                break
            union = _joined(union, ranges)
        if newest is not None and _holds(newest, union):
            return newest
        LOG.warning(
            "target %s: another merge committed beside this one; recording the applied LSN ranges of both",
            table,
        )
        append = iceberg.newFastAppend()
        for key, value in summary_properties(union).items():
            append = append.set(key, value)
        append.commit()
    raise MergeJobError(
        f"target table {table}: the applied LSN ranges could not be recorded after {COMMIT_ATTEMPTS} attempts, "
        "other merges kept committing to the table. The data is committed; re-run the task to record them"
    )


def with_commit_properties(
    spark: SparkSession, properties: dict[str, str], action: Callable[[], None]
) -> None:
    """Run ``action`` so that the Iceberg commit it makes carries ``properties`` in its snapshot summary.

    Uses Iceberg's public ``CommitMetadata.withCommitProperties``; the commit runs on the JVM thread
    that serves this Python thread (PySpark's pinned-thread mode), which is where the thread-local
    properties are set.
    """
    jvm = spark.sparkContext._jvm
    java_properties = jvm.java.util.HashMap()
    for key, value in properties.items():
        java_properties.put(key, value)

    class _Action:
        error: BaseException | None = None

        def call(self) -> None:
            try:
                action()
            except BaseException as err:
                self.error = err
                raise

        class Java:
            implements = ["java.util.concurrent.Callable"]

    runner = _Action()
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            java_properties, runner, jvm.java.lang.RuntimeException._java_lang_class
        )
    except Exception:
        if runner.error is not None:
            raise runner.error from None
        raise


@dataclass(eq=False)
class IcebergTarget(MergeTarget):
    """Iceberg tables of the session's catalogs, created with identifier fields and merged with MERGE INTO.

    :param spark: the session, with Iceberg's SQL extensions and the target catalog configured.
    :param write_mode: ``merge-on-read`` or ``copy-on-write``, set on the tables the job creates.
    :param table_properties: further Iceberg table properties for the tables the job creates.
    :param partition_buckets: key buckets of the tables the job creates (0: unpartitioned, the default);
        None: from their size (``partition_layout.bucket_count``).
    :param merge_strategy: ``auto`` (MERGE or rewrite per window, ``merge_strategy``), ``merge`` or ``rewrite``.
    :param table_mode: what the tables hold (``table_modes``): ``current`` rows, their ``history``, or a
        ``changelog``.
    """

    spark: SparkSession
    write_mode: str = DEFAULT_WRITE_MODE
    table_properties: Mapping[str, str] | None = None
    partition_buckets: int | None = DEFAULT_PARTITION_BUCKETS
    merge_strategy: str = DEFAULT_MERGE_STRATEGY
    table_mode: str = CURRENT

    def __post_init__(self) -> None:
        if self.table_mode not in TABLE_MODES:
            raise MergeJobError(f"table mode {self.table_mode!r}: expected one of {TABLE_MODES}")
        self.table_properties = dict(self.table_properties or {})
        # History and change-log tables keep deletes as rows: they take windows in any order.
        self.remembers_hard_deletes = self.table_mode != CURRENT

    def for_mode(self, mode: str) -> IcebergTarget:
        """Return this target writing tables of table mode ``mode`` (history, change log or current)."""
        return self if mode == self.table_mode else replace(self, table_mode=mode)

    def check_table_mode(self, table: str) -> None:
        """Refuse an existing table created in another table mode (``sqlserver-cdc.table-mode``)."""
        recorded = iceberg_table(self.spark, table).properties().get(TABLE_MODE_PROPERTY)
        problem = mode_conflict(table, None if recorded is None else str(recorded), self.table_mode)
        if problem is not None:
            raise MergeJobError(problem)

    def check_session(self) -> None:
        """Fail unless PySpark pins threads (commit properties) and Iceberg's SQL extensions are on."""
        from py4j.clientserver import ClientServer

        if not isinstance(self.spark.sparkContext._gateway, ClientServer):
            raise MergeJobError(
                "PySpark runs without pinned threads (PYSPARK_PIN_THREAD=false); the job needs them to record "
                "the applied LSN ranges in the same Iceberg commit as the data. Unset PYSPARK_PIN_THREAD"
            )
        extensions = self.spark.conf.get("spark.sql.extensions", "") or ""
        if "IcebergSparkSessionExtensions" not in extensions:
            raise MergeJobError(
                "the Spark session lacks Iceberg's SQL extensions (needed for MERGE INTO and identifier "
                "fields): set spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
            )

    def version(self, table: str) -> str | None:
        """The id of the table's current snapshot."""
        iceberg = iceberg_table(self.spark, table)
        iceberg.refresh()
        snapshot_id = current_snapshot_id(iceberg)
        return None if snapshot_id is None else str(snapshot_id)

    def exists(self, table: str) -> bool:
        """Say whether the dotted table name resolves in its catalog."""
        try:
            return bool(self.spark.catalog.tableExists(table))
        except Exception:
            return False

    def applied_ranges(self, table: str) -> AppliedRanges:
        """Return the applied LSN ranges: the newest retained snapshot summary, else the exact property copy."""
        state = recorded_state(self.spark, table)
        LOG.info("target %s: applied state read from %s", table, state.source)
        return ranges_of(state.entries)

    def table_schema(self, table: str) -> dict[str, str]:
        """Return lower-cased column name -> Spark SQL type of the table."""
        return {f.name.lower(): f.dataType.simpleString() for f in self.spark.table(table).schema.fields}

    def identifier_fields(self, table: str) -> list[str]:
        """Return the source key columns among the table's Iceberg identifier fields."""
        fields = [str(name) for name in iceberg_table(self.spark, table).schema().identifierFieldNames()]
        return source_key_columns(self.table_mode, fields)

    def create_table(self, plan: TargetPlan) -> None:
        """Create the target table with the windows' schema, metadata columns and identifier fields."""
        windows_columns: dict[str, dict[str, Any]] = {}
        for window in plan.windows:
            for column in window.manifest.columns:
                windows_columns.setdefault(column["name"].lower(), column)
        keys = {k.lower() for k in plan.key_columns}
        definitions = []
        for name, column in windows_columns.items():
            not_null = " NOT NULL" if name in keys else ""
            comment = source_type_comment(column).replace("'", "")
            definitions.append(
                f"{quote(column['name'])} {plan.column_types[name]}{not_null} COMMENT '{comment}'"
            )
        for name, sql_type, nullable in meta_columns(self.table_mode):
            definitions.append(f"{name} {sql_type}{'' if nullable else ' NOT NULL'}")
        first = plan.windows[0].manifest
        source = ".".join(str(first.source.get(k, "")) for k in ("database", "schema", "table"))
        properties = {
            **DEFAULT_TABLE_PROPERTIES,
            **job_table_properties(self.write_mode),
            "sqlserver-cdc.source-table": source,
            **({TABLE_MODE_PROPERTY: self.table_mode} if self.table_mode != CURRENT else {}),
            **self.table_properties,
        }
        props = ", ".join(f"'{k}'='{v.replace(chr(39), '')}'" for k, v in properties.items())
        rows = sum(w.manifest.row_count for w in plan.windows)
        buckets = bucket_count(rows, self.spark.sparkContext.defaultParallelism, self.partition_buckets)
        LOG.info(
            "creating target table %s (%s, %s, %d key buckets)",
            plan.table,
            self.table_mode,
            self.write_mode,
            buckets,
        )
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {quote_table(plan.table)} ({', '.join(definitions)}) "
            f"USING iceberg{creation_partitioning(plan.key_columns, buckets)} TBLPROPERTIES ({props})"
        )
        identifier = identifier_columns(self.table_mode, plan.key_columns)
        if identifier:
            self.spark.sql(
                f"ALTER TABLE {quote_table(plan.table)} SET IDENTIFIER FIELDS "
                + ", ".join(quote(k) for k in identifier)
            )

    def evolve_table(self, plan: TargetPlan) -> None:
        """Apply the planned column additions and widenings, and record widened SQL Server types."""
        for name, column_type, comment in plan.add_columns:
            LOG.info("target %s: adding column %s %s", plan.table, name, column_type)
            self.spark.sql(
                f"ALTER TABLE {quote_table(plan.table)} ADD COLUMN {quote(name)} {column_type} "
                f"COMMENT '{comment.replace(chr(39), '')}'"
            )
        for name, column_type in plan.widen_columns:
            LOG.info("target %s: widening column %s to %s", plan.table, name, column_type)
            self.spark.sql(
                f"ALTER TABLE {quote_table(plan.table)} ALTER COLUMN {quote(name)} TYPE {column_type}"
            )
        for name, comment in plan.comment_columns:  # the widened SQL Server type (source_type_changes)
            self.spark.sql(
                f"ALTER TABLE {quote_table(plan.table)} ALTER COLUMN {quote(name)} "
                f"COMMENT '{comment.replace(chr(39), '')}'"
            )

    def apply(self, batch: ChangeBatch) -> None:
        """MERGE the batch's net effect with the applied state in its snapshot summary, then copy it to the properties.

        The marker set before the MERGE and removed with the property copy after it tells a later
        reader that the copy may lack this merge (``iceberg_state``).
        """
        plan, snapshot = batch.plan, batch.snapshot
        properties = summary_properties(batch.applied)
        iceberg = iceberg_table(self.spark, plan.table)
        marker = mark_merge_started(iceberg)
        try:
            if self.table_mode == HISTORY:
                self._merge_history(batch, properties)
            elif self.table_mode == CHANGELOG:
                self._append_changes(batch, properties)
            elif snapshot is not None:
                # A snapshot retires every target row it lacks: the join keeps all target rows, so a filter of
                # the source keys could not prune any, and the snapshot (the whole table) is not checkpointed.
                frame = net_effect_frame(batch.changes, plan.key_columns)
                with temporary_view(frame, MERGE_SOURCE_VIEW) as source_view:
                    statement = self._merge_statement(batch, source_view, None)
                    statement += snapshot_clause(snapshot.manifest.to_lsn, batch.hard)
                    log_merge(LOG, plan.table, "snapshot", self._run_merge(statement, properties))
            else:
                self._merge_changes(batch, properties)
        except Exception as err:
            # Failed before or at its commit: nothing committed, unless Iceberg cannot tell (then it stays).
            if "CommitStateUnknownException" not in f"{type(err).__name__}: {err}":
                drop_marker(iceberg, marker)
            raise
        recorded = reconcile_applied_state(self.spark, plan.table, batch.applied, batch.applied_before)
        if not _holds(recorded, batch.applied):
            raise MergeJobError(
                f"target table {plan.table}: the MERGE of {batch.labels} committed but the table's newest state "
                f"does not carry its applied LSN ranges (found {format_state(recorded)}). Re-running is safe "
                "(changes only apply when newer)"
            )
        newest = newest_summary_state(iceberg)
        if newest is not None:
            plan.snapshot_id = newest[0]
            record_state(iceberg, newest[1], newest[0], markers=[marker])

    def _merge_history(self, batch: ChangeBatch, properties: dict[str, str]) -> None:
        """Insert the batch's versions into a history table and close the versions they follow (``history_merge``)."""
        plan, snapshot = batch.plan, batch.snapshot
        at = None if snapshot is None else (snapshot.manifest.to_lsn, snapshot.manifest.to_time)
        # The key range bounds the table rows read and joined; a snapshot retires keys outside it too.
        bounds = None if snapshot is not None else source_key_range(batch.changes, plan, batch.key_bounds)
        source = history_merge_frame(
            self.spark, plan.table, batch.changes, plan.key_columns, at, bounds, batch.change_rows
        )
        with temporary_view(source, HISTORY_SOURCE_VIEW) as source_view:
            statement = history_merge_sql(plan.table, source_view, batch.columns, plan.key_columns, bounds)
            frame = self._run_merge(statement, properties)
        log_merge(LOG, plan.table, "history", frame, "history table (docs/history-targets.md)")

    def _append_changes(self, batch: ChangeBatch, properties: dict[str, str]) -> None:
        """Append the batch's change rows the change log lacks, with the applied ranges in the same commit."""
        plan, frame = batch.plan, changelog_frame(self.spark, batch)
        with_commit_properties(
            self.spark, properties, lambda: frame.writeTo(quote_table(plan.table)).append()
        )
        LOG.info("target %s: change log appended (%s)", plan.table, batch.labels)

    def _merge_changes(self, batch: ChangeBatch, properties: dict[str, str]) -> None:
        """MERGE change windows, with the key range and, where it pays, the runtime key filter."""
        plan, spark = batch.plan, self.spark
        bounds = source_key_range(batch.changes, plan, batch.key_bounds)
        iceberg = iceberg_table(spark, plan.table)
        write_mode = str(iceberg.properties().get("write.merge.mode") or "copy-on-write")
        files = target_files(spark, plan.table, bounds, iceberg)
        choice = choose_strategy(self.merge_strategy, files, batch.change_rows, write_mode)
        chosen, other = ("rewrite", "MERGE") if choice.rewrite else ("MERGE", "rewrite")
        LOG.info("target %s: %s, not a %s: %s", plan.table, chosen, other, choice.reason)
        if choice.rewrite:
            self._rewrite(batch, properties, choice.reason)
            return
        layout = staging_layout(iceberg, plan.key_columns)
        # Spark only filters a merge-on-read target: copy-on-write keeps every row of the files it rewrites.
        merge_on_read = write_mode == "merge-on-read"
        scanned = files.scanned_rows if merge_on_read else None
        bucketed = isinstance(layout, StagingLayout)
        min_ratio = RUNTIME_KEY_FILTER_MIN_RATIO_BUCKETED if bucketed else RUNTIME_KEY_FILTER_MIN_RATIO
        filter_pays = runtime_key_filter_pays(scanned, batch.change_rows, min_ratio)
        if bucketed and not filter_pays:
            self._merge_storage_partitioned(batch, properties, bounds, layout)
            return
        reason = (
            f"the runtime key filter pays more than a storage-partitioned join ({scanned} target rows to scan, "
            f"{batch.change_rows} change rows; docs/merge-performance.md)"
            if bucketed
            else f"no storage-partitioned join: {layout}"
        )
        strategy = "plain"
        with ExitStack() as stack:
            if filter_pays:
                strategy = "plain, runtime key filter"
                LOG.info(
                    "target %s: runtime key filter on (%s target rows to scan, %s change rows)",
                    plan.table,
                    scanned,
                    batch.change_rows,
                )
                partitions = checkpoint_partitions(
                    batch.change_bytes,
                    int(spark.conf.get("spark.sql.shuffle.partitions") or 200),
                    spark.sparkContext.defaultParallelism,
                )
                source = stack.enter_context(
                    checkpointed_net_effect(batch.changes, plan.key_columns, partitions)
                )
                stack.enter_context(session_conf(spark, runtime_key_filter_conf(batch.change_rows)))
            else:
                source = net_effect_frame(batch.changes, plan.key_columns)
            if merge_on_read and writes_delete_files_per_partition(iceberg):
                stack.enter_context(session_conf(spark, UNSHUFFLED_WRITE_CONF))
            source_view = stack.enter_context(temporary_view(source, MERGE_SOURCE_VIEW))
            statement = self._merge_statement(batch, source_view, bounds)
            frame = self._run_merge(statement, properties)
        log_merge(LOG, plan.table, strategy, frame, reason)

    def _merge_storage_partitioned(
        self, batch: ChangeBatch, properties: dict[str, str], bounds: KeyRange | None, layout: StagingLayout
    ) -> None:
        """MERGE from a staging table partitioned like the target, joined bucket by bucket (``staged_merge``)."""
        plan, spark = batch.plan, self.spark
        net_effect = net_effect_frame(batch.changes, plan.key_columns)
        with (
            staged_net_effect(spark, plan.table, net_effect, layout) as staging,
            session_conf(spark, SPJ_CONF),
        ):
            statement = merge_sql(
                plan.table, quote_table(staging), batch.columns, plan.key_columns, batch.hard, bounds
            )
            frame = self._run_merge(statement, properties)
        report = log_merge(LOG, plan.table, "storage-partitioned", frame, ", ".join(layout.transforms))
        if report.shuffles.table_exchanges > 0:
            LOG.warning(
                "target %s: the MERGE shuffled the target although both sides are partitioned alike (%s); "
                "the merge is exact but slower",
                plan.table,
                ", ".join(layout.transforms),
            )

    def _rewrite(self, batch: ChangeBatch, properties: dict[str, str], reason: str) -> None:
        """Rewrite the table once with the batch's net effect applied (``table_rewrite``), instead of a MERGE."""
        plan, spark = batch.plan, self.spark
        iceberg = iceberg_table(spark, plan.table)
        iceberg.refresh()  # the snapshot the overwrite validates from: the one the rows are read from, or older
        snapshot_id = current_snapshot_id(iceberg)
        target_columns = [
            (f.name, f.dataType.simpleString()) for f in spark.table(quote_table(plan.table)).schema.fields
        ]
        broadcast = broadcast_fits(spark, batch.change_rows)
        with (
            checkpointed_net_effect(batch.changes, plan.key_columns) as net_effect,  # read three times
            temporary_view(net_effect, MERGE_SOURCE_VIEW) as source_view,
            session_conf(spark, REWRITE_CONF),
        ):
            statement = rewrite_sql(
                plan.table,
                target_columns,
                source_view,
                batch.columns,
                plan.key_columns,
                batch.hard,
                broadcast,
            )
            frame = spark.sql(statement)
            with_commit_properties(spark, properties, lambda: overwrite_table(frame, plan.table, snapshot_id))
        strategy = "rewrite, net effect broadcast" if broadcast else "rewrite, target shuffled"
        log_merge(LOG, plan.table, strategy, frame, reason)

    def _run_merge(self, statement: str, properties: dict[str, str]) -> DataFrame:
        """Run a MERGE statement whose commit carries ``properties``; return its result (for its plan)."""
        result: list[DataFrame] = []
        with_commit_properties(self.spark, properties, lambda: result.append(self.spark.sql(statement)))
        return result[0]

    @staticmethod
    def _merge_statement(batch: ChangeBatch, source_view: str, bounds: KeyRange | None) -> str:
        plan = batch.plan
        return merge_sql(plan.table, source_view, batch.columns, plan.key_columns, batch.hard, bounds)
