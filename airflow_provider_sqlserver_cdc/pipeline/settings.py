"""
The settings of a replication pipeline: every default, and why it is safe, in this one place.

A YAML file (or a mapping) only overrides these defaults; unknown keys and wrong types are
refused with the dotted key in the message, and ``${NAME}`` / ``${NAME:-default}`` in a value
is replaced from the environment. Where a setting is an operator argument, its default *is*
the operator's: both take it from ``task_defaults`` (spark-submit's are read from
``SparkSubmitOperator``'s signature by :func:`operator_default`), so the two cannot disagree:

- ``extract.batch_size`` 50,000 rows per Arrow batch: the size the extract and snapshot
  benchmarks measured (peak RSS about 350 MB, flat as a window grows; docs/extraction.md).
- ``snapshot.chunk_rows`` 500,000: a failed snapshot resumes after its last whole chunk, so a
  smaller chunk loses less work; each chunk costs one more keyset query (an index seek).
- ``merge.write_mode`` ``merge-on-read``: the measured faster MERGE (1.4-1.5x of a rewrite for
  1M changes against 2-3x for copy-on-write, docs/merge-job.md#performance); compact the
  targets regularly. Set ``copy-on-write`` for tables that are read far more than written.
- ``merge.delete_mode`` ``soft``: deleted rows stay flagged, so windows may be merged in any
  order (backfills, retries); ``hard`` needs windows strictly in LSN order (Iceberg; a PostgreSQL
  target keeps deleted keys and takes any order).

The other defaults are the pipeline's (factory.py explains why each is safe): a sensor in
``reschedule`` mode poking every 60 s for at most an hour, extract and snapshot timeouts of
30 minutes, a merge timeout of 60 minutes, 3 retries 120 s apart, one active run.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_provider_sqlserver_cdc.pipeline.identifiers import (
    check_source_names,
    check_table_name_template,
    check_target_name,
)
from airflow_provider_sqlserver_cdc.pipeline.maintenance_settings import TableMaintenanceSettings
from airflow_provider_sqlserver_cdc.pipeline.masking_settings import MaskingSettings
from airflow_provider_sqlserver_cdc.pipeline.reconcile_settings import ReconcileSettings
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import (
    Section,
    SettingsError,
    read_section,
)
from airflow_provider_sqlserver_cdc.pipeline.source_settings import SourceGroupSettings, check_sources
from airflow_provider_sqlserver_cdc.spark.merge.arguments import (
    POSTGRES_TARGET,
    TARGET_KINDS,
    parse_table_properties,
)
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import MERGE_STRATEGIES
from airflow_provider_sqlserver_cdc.spark.merge.scale_options import (
    CONCURRENT_TABLES_RULE,
    PARTITION_BUCKETS_RULE,
    concurrent_tables_value,
    partition_buckets_value,
)
from airflow_provider_sqlserver_cdc.spark.merge.table_modes import (
    DEFAULT_KEYLESS,
    KEYLESS_CHOICES,
    TABLE_MODES,
)
from airflow_provider_sqlserver_cdc.task_defaults import (
    DEFAULT_ALLOW_TABLE_LOCK_FALLBACK,
    DEFAULT_APPLY_POLL_SECONDS,
    DEFAULT_APPLY_TIMEOUT_SECONDS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_CHUNK_ROWS,
    DEFAULT_CONCURRENT_TABLES,
    DEFAULT_CREATE_CAPTURE_INSTANCE,
    DEFAULT_DELETE_MODE,
    DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE,
    DEFAULT_HEADROOM_CRITICAL_MINUTES,
    DEFAULT_HEADROOM_WARNING_MINUTES,
    DEFAULT_JDBC_CONNECTIONS,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MERGE_MODE,
    DEFAULT_MERGE_STRATEGY,
    DEFAULT_ON_GAP,
    DEFAULT_ON_SCHEMA_CHANGE,
    DEFAULT_PARTITION_BUCKETS,
    DEFAULT_ROW_FILTER_OPTION,
    DEFAULT_SQLSERVER_CDC_CONN_ID,
    DEFAULT_TABLE_NAME_TEMPLATE,
    DEFAULT_TARGET_KIND,
    DEFAULT_WRITE_MODE,
    MERGE_MODES,
)
from airflow_provider_sqlserver_cdc.window.contiguity import ON_GAP
from airflow_provider_sqlserver_cdc.window.schema_drift import ON_SCHEMA_CHANGE

SENSOR_MODES = ("reschedule", "poke")


def operator_default(operator: type, parameter: str) -> Any:
    """
    Return the default of ``parameter`` in ``operator``'s constructor (the one place it is stated).

    An argument an operator takes from its base class has the base class's default.

    :param operator: the operator class.
    :param parameter: the constructor parameter.
    """
    for cls in operator.__mro__:
        declared = inspect.signature(cls.__init__).parameters.get(parameter)
        if declared is not None and "__init__" in vars(cls):
            return declared.default
    raise TypeError(f"{operator.__name__} takes no argument {parameter!r}")


@dataclass(frozen=True)
class SourceSettings(Section):
    """
    The SQL Server to read.

    :param conn_id: Airflow connection of type ``mssql`` (schema = database).
    :param database: source database; None: the connection's schema.
    :param server_time_zone: IANA zone of the server, only when its zone observes daylight-saving time.
    """

    key: ClassVar[str] = "source"
    conn_id: str = DEFAULT_SQLSERVER_CDC_CONN_ID
    database: str | None = None
    server_time_zone: str | None = None

    def operator_arguments(self, *, time_zone: bool = False) -> dict[str, Any]:
        """
        The source operators' connection arguments: ``sqlserver_cdc_conn_id`` and ``database``.

        :param time_zone: also ``server_time_zone``, for the tasks that turn server times into UTC.
        """
        arguments = {"sqlserver_cdc_conn_id": self.conn_id, "database": self.database}
        return arguments | {"server_time_zone": self.server_time_zone} if time_zone else arguments


@dataclass(frozen=True)
class SensorSettings(Section):
    """
    How LsnSensor waits for the capture job (never retried: its timeout is an answer, not a glitch).

    :param mode: ``reschedule`` (frees the worker slot between pokes) or ``poke``.
    :param deferrable: wait in the triggerer instead.
    :param poke_interval_seconds: seconds between checks.
    :param timeout_seconds: give up after this long; the error says how far behind the capture job is.
    """

    key: ClassVar[str] = "sensor"
    mode: str = "reschedule"
    deferrable: bool = False
    poke_interval_seconds: float = 60.0
    timeout_seconds: float = 3600.0

    def check(self) -> None:
        """Refuse an unknown mode and non-positive times."""
        self._require("mode", self.mode in SENSOR_MODES, f"must be one of {SENSOR_MODES}, got {self.mode!r}")
        self._require("poke_interval_seconds", self.poke_interval_seconds > 0, "must be positive")
        self._require("timeout_seconds", self.timeout_seconds > 0, "must be positive")

    def operator_arguments(self) -> dict[str, Any]:
        """The wait tasks' sensor arguments; ``retries`` 0: a timeout is an answer (the source is behind), not a glitch."""
        return {
            "mode": self.mode,
            "poke_interval": self.poke_interval_seconds,
            "timeout": self.timeout_seconds,
            "retries": 0,
        }


@dataclass(frozen=True)
class ExtractSettings(Section):
    """
    CdcExtractOperator, one mapped task per capture instance.

    :param row_filter_option: ``all update old`` (keeps update before-images) or ``all``.
    :param batch_size: rows per Arrow batch; bounds the task's memory.
    :param max_file_bytes: roll to a new Parquet file at this size.
    :param execution_timeout_minutes: stop a hung extract (its retry rewrites the same window).
    :param on_gap: changes missed before a run's interval (scheduler down, DAG paused): ``heal``
        takes them into the run's window, ``fail`` fails the run naming the backfill to run.
    :param on_schema_change: a DDL that makes a capture instance miss data (column added, captured
        column dropped or retyped): ``fail`` stops that table's extract naming the DDL and the remedy
        (a second capture instance); ``ignore`` replicates the captured columns as they are.
    :param create_capture_instance: when a DDL needs a second capture instance, create it
        (``sys.sp_cdc_enable_table``; the source login needs db_owner). Off: a DBA creates it and the
        next run picks it up. Either way the table switches at its start LSN (docs/schema-changes.md).
    :param disable_old_capture_instance: disable the old capture instance once the target holds every
        change up to the switch (db_owner), which leaves room for the next schema change's instance.
    """

    key: ClassVar[str] = "extract"
    row_filter_option: str = DEFAULT_ROW_FILTER_OPTION
    batch_size: int = DEFAULT_BATCH_SIZE
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    execution_timeout_minutes: float = 30.0
    on_gap: str = DEFAULT_ON_GAP
    on_schema_change: str = DEFAULT_ON_SCHEMA_CHANGE
    create_capture_instance: bool = DEFAULT_CREATE_CAPTURE_INSTANCE
    disable_old_capture_instance: bool = DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE

    def check(self) -> None:
        """Refuse non-positive sizes and times, and an unknown ``on_gap``."""
        for name in ("batch_size", "max_file_bytes", "execution_timeout_minutes"):
            self._require(name, getattr(self, name) > 0, "must be positive")
        self._require("on_gap", self.on_gap in ON_GAP, f"must be one of {ON_GAP}, got {self.on_gap!r}")
        self._require(
            "on_schema_change",
            self.on_schema_change in ON_SCHEMA_CHANGE,
            f"must be one of {ON_SCHEMA_CHANGE}, got {self.on_schema_change!r}",
        )


@dataclass(frozen=True)
class SnapshotSettings(Section):
    """
    CdcSnapshotOperator: the consistent initial copy of a capture instance without a watermark.

    :param allow_table_lock_fallback: copy under a shared table lock (writers wait) when the
        database does not allow snapshot isolation, instead of failing.
    :param chunk_rows: rows per key-range chunk; a failed snapshot resumes after the last whole one.
    :param execution_timeout_minutes: stop a hung snapshot (its retry resumes); raise it for large tables.
    """

    key: ClassVar[str] = "snapshot"
    allow_table_lock_fallback: bool = DEFAULT_ALLOW_TABLE_LOCK_FALLBACK
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    execution_timeout_minutes: float = 30.0

    def check(self) -> None:
        """Refuse non-positive sizes and times."""
        for name in ("chunk_rows", "execution_timeout_minutes"):
            self._require(name, getattr(self, name) > 0, "must be positive")


@dataclass(frozen=True)
class TargetSettings(Section):
    """
    Where the merge writes: Iceberg (default) or a PostgreSQL database over JDBC (docs/targets-postgres.md).

    One target database per pipeline; ``merge.namespace`` is then the schema, and ``merge.tables``
    names each capture instance's table.

    :param kind: ``iceberg`` or ``postgres``.
    :param conn_id: Airflow connection (type ``postgres``) of the target database: the job gets its
        URL, and the login in a private file on the worker, removed afterwards (client deploy mode).
    :param url: the JDBC URL instead of a connection, with ``credentials_file``.
    :param credentials_file: a mode-600 file (``user=``/``password=``) where the Spark driver runs.
    :param connections: JDBC connections that load each batch at once (rows hashed by key).
    :param table_modes: capture instance -> what its target table holds (docs/history-targets.md):
        ``current`` (the current rows; every table not named), ``history`` (every version, SCD type 2)
        or ``changelog`` (every change row, appended once). Iceberg only.
    :param keyless: a capture instance without key columns (no primary key, no ``@index_name``):
        ``changelog`` (default) replicates it as a change log, ``refuse`` fails its extract
        (NoKeyColumnsError). A PostgreSQL target always refuses it.
    """

    key: ClassVar[str] = "merge.target"
    kind: str = DEFAULT_TARGET_KIND
    conn_id: str | None = None
    url: str | None = None
    credentials_file: str | None = None
    connections: int = DEFAULT_JDBC_CONNECTIONS
    # History and change-log targets (issue 35, docs/history-targets.md).
    table_modes: Mapping[str, str] = field(default_factory=dict)
    keyless: str = DEFAULT_KEYLESS

    def check(self) -> None:
        """Refuse an unknown kind, a PostgreSQL target without a login, and fewer than one connection."""
        self._require(
            "kind",
            self.kind != "jdbc",
            f"'jdbc' is now called {POSTGRES_TARGET!r} (the one relational target): set kind: {POSTGRES_TARGET}",
        )
        self._require("kind", self.kind in TARGET_KINDS, f"must be one of {TARGET_KINDS}, got {self.kind!r}")
        self._require(
            "conn_id",
            self.kind != POSTGRES_TARGET or bool(self.conn_id or (self.url and self.credentials_file)),
            f"a {POSTGRES_TARGET} target needs conn_id (or url with credentials_file)",
        )
        self._require("connections", self.connections >= 1, "must be at least 1")
        self.check_table_modes()

    def check_table_modes(self) -> None:
        """Refuse unknown table modes and keyless choices, and history or change-log tables outside Iceberg."""
        for instance, mode in self.table_modes.items():
            self._require(
                f"table_modes[{instance!r}]",
                mode in TABLE_MODES,
                f"must be one of {TABLE_MODES}, got {mode!r}",
            )
            self._require(
                f"table_modes[{instance!r}]",
                mode == "current" or self.kind == "iceberg",
                f"{mode} tables need an Iceberg target (kind iceberg)",
            )
        check_source_names(f"{self.key}.table_modes", self.table_modes)
        self._require(
            "keyless",
            self.keyless in KEYLESS_CHOICES,
            f"must be one of {KEYLESS_CHOICES}, got {self.keyless!r}",
        )

    @property
    def require_key_columns(self) -> bool:
        """Whether the extract refuses a capture instance without key columns (a change log needs Iceberg)."""
        return self.keyless != "changelog" or self.kind != "iceberg"


@dataclass(frozen=True)
class MergeSettings(Section):
    """
    CdcSparkMergeOperator: one Spark application merges every window of a run.

    :param namespace: ``catalog.namespace`` of the target tables (required).
    :param table_name_template: target table name; ``{schema}``, ``{table}``, ``{capture_instance}``
        and ``{database}`` are replaced.
    :param delete_mode: ``soft`` (flag deleted rows; windows in any order) or ``hard`` (remove
        them; into Iceberg windows strictly in LSN order, no backfills; PostgreSQL takes any order).
    :param write_mode: ``merge-on-read`` or ``copy-on-write``, set when a target table is created.
    :param table_properties: further Iceberg properties of the tables the merge creates.
    :param execution_timeout_minutes: stop a hung merge (its retry skips windows already applied).
    :param tables: capture instance -> target table (``namespace.table``), overriding the template.
    :param target: the kind of target (Iceberg or a JDBC database) and how to reach it.
    :param partition_buckets: ``bucket(N, first key)`` of the tables the merge creates (``auto``: from
        their size; 0: unpartitioned), for the storage-partitioned MERGE (docs/merge-performance.md).
    :param concurrent_tables: target tables merged at once in the one Spark application.
    :param merge_strategy: Iceberg: ``auto`` (MERGE or rewrite the table per window), ``merge`` or ``rewrite``.
    :param mode: ``batch`` (a Spark application per run merges its windows) or ``continuous`` (a
        long-running apply application merges windows as they land; the run waits for them,
        docs/continuous-apply.md).
    :param apply_timeout_seconds: continuous mode: how long a run waits for its windows to be applied.
    :param apply_poll_seconds: continuous mode: how often the waiting task reads the applied state.
    """

    key: ClassVar[str] = "merge"
    namespace: str
    table_name_template: str = DEFAULT_TABLE_NAME_TEMPLATE
    delete_mode: str = DEFAULT_DELETE_MODE
    write_mode: str = DEFAULT_WRITE_MODE
    table_properties: Mapping[str, str] = field(default_factory=dict)
    execution_timeout_minutes: float = 60.0
    tables: Mapping[str, str] = field(default_factory=dict)
    target: TargetSettings = field(default_factory=TargetSettings)
    # Scale (issue 16): text, so that YAML's 8 and auto both fit; a number is taken as its text.
    partition_buckets: str = str(DEFAULT_PARTITION_BUCKETS)
    concurrent_tables: int = DEFAULT_CONCURRENT_TABLES

    def __post_init__(self) -> None:
        if isinstance(self.partition_buckets, int) and not isinstance(self.partition_buckets, bool):
            object.__setattr__(self, "partition_buckets", str(self.partition_buckets))
        super().__post_init__()

    # The adaptive MERGE-or-rewrite choice (issue 16, docs/merge-performance.md).
    merge_strategy: str = DEFAULT_MERGE_STRATEGY
    # Continuous apply (issue 31, docs/continuous-apply.md).
    mode: str = DEFAULT_MERGE_MODE
    apply_timeout_seconds: float = DEFAULT_APPLY_TIMEOUT_SECONDS
    apply_poll_seconds: float = DEFAULT_APPLY_POLL_SECONDS

    def check(self) -> None:
        """Refuse a non-positive timeout and bad scale options (the operator checks the modes)."""
        self._require("execution_timeout_minutes", self.execution_timeout_minutes > 0, "must be positive")
        for name, check, rule in (
            ("partition_buckets", partition_buckets_value, PARTITION_BUCKETS_RULE),
            ("concurrent_tables", concurrent_tables_value, CONCURRENT_TABLES_RULE),
        ):
            try:
                check(getattr(self, name))
            except ValueError:
                self._require(name, False, f"must be {rule}, got {getattr(self, name)!r}")
        self._require(
            "merge_strategy", self.merge_strategy in MERGE_STRATEGIES, f"must be one of {MERGE_STRATEGIES}"
        )
        self._require("mode", self.mode in MERGE_MODES, f"must be one of {MERGE_MODES}, got {self.mode!r}")
        for name in ("apply_timeout_seconds", "apply_poll_seconds"):
            self._require(name, getattr(self, name) > 0, "must be positive")
        self.check_names()

    def check_names(self) -> None:
        """Refuse target names the merge job could not create (pipeline/identifiers.py says what each allows)."""
        jdbc = self.target.kind == POSTGRES_TARGET
        check_target_name(
            f"{self.key}.namespace",
            self.namespace,
            parts=(1, 1) if jdbc else (1, None),
            jdbc=jdbc,
            example="cdc (the PostgreSQL schema)" if jdbc else "lake.cdc (catalog.namespace)",
        )
        check_table_name_template(f"{self.key}.table_name_template", self.table_name_template)
        check_source_names(f"{self.key}.tables", self.tables)
        for instance, table in self.tables.items():
            check_target_name(
                f"{self.key}.tables[{instance!r}]",
                table,
                parts=(1, 2) if jdbc else (1, None),
                jdbc=jdbc,
                example="crm.customers (schema.table)" if jdbc else "lake.crm.customers",
            )
        try:
            parse_table_properties(f"{k}={v}" for k, v in self.table_properties.items())
        except MergeJobError as err:
            raise SettingsError(f"{self.key}.table_properties", str(err)) from None


@dataclass(frozen=True)
class SparkSettings(Section):
    """
    spark-submit of the Spark jobs (merge, maintenance, reconcile, continuous apply).

    :param conn_id: Airflow connection of type ``spark``.
    :param jars: comma-separated jars (the Iceberg runtime); None when the cluster provides them.
    :param conf: Spark settings: Iceberg's SQL extensions and the ``spark.sql.catalog.*`` of the
        target catalog, unless the cluster's ``spark-defaults.conf`` has them.
    """

    key: ClassVar[str] = "spark"
    conn_id: str = operator_default(SparkSubmitOperator, "conn_id")
    jars: str | None = operator_default(SparkSubmitOperator, "jars")
    conf: Mapping[str, str] = field(default_factory=dict)

    def operator_arguments(self) -> dict[str, Any]:
        """spark-submit's arguments of every Spark task (merge, maintenance, reconcile, continuous apply)."""
        return {"conn_id": self.conn_id, "jars": self.jars, "conf": dict(self.conf)}


@dataclass(frozen=True)
class DagSettings(Section):
    """
    The DAG that cdc_replication_dag() builds (a task group takes only ``retries`` and ``retry_delay_seconds``).

    :param schedule: cron or preset of an ``interval``-mode DAG (a CronDataIntervalTimetable).
    :param watermark_schedule: cron or preset of a ``watermark``-mode DAG.
    :param start_date: the first data interval; with catchup off it only bounds backfills.
    :param max_active_runs: runs at a time (must be 1 in watermark mode).
    :param retries: retries of every task but the sensor (every step is idempotent).
    :param retry_delay_seconds: wait before a retry.
    """

    key: ClassVar[str] = "dag"
    schedule: str = "@hourly"
    watermark_schedule: str = "*/15 * * * *"
    start_date: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    max_active_runs: int = 1
    retries: int = 3
    retry_delay_seconds: float = 120.0

    def check(self) -> None:
        """Refuse a non-positive number of runs and negative retries."""
        self._require("max_active_runs", self.max_active_runs >= 1, "must be at least 1")
        self._require("retries", self.retries >= 0, "must not be negative")
        self._require("retry_delay_seconds", self.retry_delay_seconds >= 0, "must not be negative")

    def default_args(self) -> dict[str, Any]:
        """The ``default_args`` of the pipeline's tasks: retries and their delay."""
        return {"retries": self.retries, "retry_delay": dt.timedelta(seconds=self.retry_delay_seconds)}


# --- Change Tracking source (docs/change-tracking.md) ---------------------------------------------


@dataclass(frozen=True)
class ChangeTrackingSettings(Section):
    """
    Tables replicated through Change Tracking instead of CDC, next to the CDC ``tables`` of the same pipeline.

    :param tables: tracked tables as ``schema.table`` (their windows, watermarks and targets are named
        ``schema_table``); they share the merge and watermark tasks with the CDC tables.
    :param auto_resnapshot: when a table's changes after its watermark were cleaned up (retention),
        snapshot it again instead of failing the run.
    """

    key: ClassVar[str] = "change_tracking"
    tables: tuple[str, ...] = ()
    auto_resnapshot: bool = False

    def check(self) -> None:
        """Refuse empty or repeated table names."""
        self._require("tables", all(self.tables), f"table names must not be empty: {self.tables}")
        repeated = sorted({name for name in self.tables if self.tables.count(name) > 1})
        self._require("tables", not repeated, f"lists a table twice: {', '.join(repeated)}")
        check_source_names(f"{self.key}.tables", self.tables)


# --- time to loss (docs/operations.md, "Time to loss") ---------------------------------------------
@dataclass(frozen=True)
class RetentionHeadroomSettings(Section):
    """
    CdcRetentionHeadroomOperator: each run checks how long until the CDC cleanup passes the watermarks.

    :param enabled: add the ``retention_headroom`` task after ``commit_watermarks`` (it runs whatever
        the run's other tasks did, and its failure fails the run, not the replication).
    :param warning_minutes: log a warning below this many minutes left.
    :param critical_minutes: fail the task below this many minutes left (and once the cleanup passed a watermark).
    :param retention_minutes: the cleanup retention to assume when the source login cannot read
        ``msdb.dbo.cdc_jobs`` nor ``sys.sp_cdc_help_jobs``; None: the task fails naming the grant.
    """

    key: ClassVar[str] = "retention_headroom"
    enabled: bool = True
    warning_minutes: float = DEFAULT_HEADROOM_WARNING_MINUTES
    critical_minutes: float = DEFAULT_HEADROOM_CRITICAL_MINUTES
    retention_minutes: int | None = None

    def check(self) -> None:
        """Refuse negative or inverted thresholds and a non-positive retention."""
        self._require("critical_minutes", self.critical_minutes >= 0, "must not be negative")
        self._require(
            "warning_minutes",
            self.warning_minutes >= self.critical_minutes,
            "must not be below critical_minutes",
        )
        self._require(
            "retention_minutes",
            self.retention_minutes is None or self.retention_minutes > 0,
            "must be positive",
        )


@dataclass(frozen=True)
class ReplicationSettings(Section):
    """
    Everything the replication pipeline needs; only ``tables``, ``staging_path`` and ``merge.namespace`` are required.

    :param tables: capture instances to replicate; the Airflow Variable ``<dag_id>__tables``
        (a JSON list) replaces them at run time. Empty when ``sources`` lists them.
    :param staging_path: where windows are written: a local path or an fsspec URI (``s3://...``)
        that the workers and the Spark cluster both reach.
    :param merge: the merge (``merge.namespace`` is required).
    :param source: the source server.
    :param sensor: how the sensor waits.
    :param extract: the change-window extraction.
    :param snapshot: the initial copy.
    :param spark: spark-submit.
    :param dag: schedule, retries and runs of the DAG.
    :param change_tracking: tables read through Change Tracking instead of CDC.
    :param maintenance: the table maintenance task (off unless enabled).
    :param retention_headroom: the time-to-loss check of every run.
    :param reconcile: the scheduled comparison (and repair) of the targets with the source (off by default).
    :param masking: column masking before Parquet is written (none by default).
    :param sources: several sources, each with its tables, a task group each (docs/several-sources.md).
    """

    tables: tuple[str, ...] = field(default=(), kw_only=True)
    staging_path: str
    merge: MergeSettings
    source: SourceSettings = field(default_factory=SourceSettings)
    sensor: SensorSettings = field(default_factory=SensorSettings)
    extract: ExtractSettings = field(default_factory=ExtractSettings)
    snapshot: SnapshotSettings = field(default_factory=SnapshotSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    dag: DagSettings = field(default_factory=DagSettings)
    change_tracking: ChangeTrackingSettings = field(default_factory=ChangeTrackingSettings)
    maintenance: TableMaintenanceSettings = field(default_factory=TableMaintenanceSettings)
    retention_headroom: RetentionHeadroomSettings = field(default_factory=RetentionHeadroomSettings)
    reconcile: ReconcileSettings = field(default_factory=ReconcileSettings)
    masking: MaskingSettings = field(default_factory=MaskingSettings)
    sources: tuple[SourceGroupSettings, ...] = field(default=(), kw_only=True)

    def check(self) -> None:
        """Refuse empty or repeated capture instance names, an empty staging path, reconcile with masking."""
        self._require("tables", all(self.tables), f"capture instance names must not be empty: {self.tables}")
        repeated = sorted({name for name in self.tables if self.tables.count(name) > 1})
        self._require("tables", not repeated, f"lists a capture instance twice: {', '.join(repeated)}")
        check_source_names("tables", self.tables)
        self._require("staging_path", bool(self.staging_path.strip()), "must not be empty")
        self._require(
            "reconcile.schedule",
            self.reconcile.schedule is None or not self.masking.columns,
            "cannot be set with masking.columns: a reconcile compares the source's values in clear, and its "
            "repair would write them to the target in clear (docs/reconcile.md)",
        )
        check_sources(self)

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
    ) -> ReplicationSettings:
        """
        Build the settings from a nested mapping that overrides the documented defaults.

        :param data: e.g. ``{"tables": ["dbo_orders"], "staging_path": "s3://...", "merge": {"namespace": "lake.cdc"}}``.
        :param environ: the environment for ``${NAME}`` references (default ``os.environ``).
        :raises SettingsError: naming the unknown, missing or wrong key.
        """
        return read_section(cls, data, "", environ)

    @classmethod
    def from_yaml(cls, path: str | Path, *, environ: Mapping[str, str] | None = None) -> ReplicationSettings:
        """
        Read the settings from a YAML file of overrides (see :meth:`from_mapping`).

        :param path: the YAML file.
        :param environ: the environment for ``${NAME}`` references (default ``os.environ``).
        :raises SettingsError: naming the file and the bad key.
        """
        import yaml

        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
            return cls.from_mapping({} if data is None else data, environ=environ)
        except SettingsError as err:
            raise SettingsError(f"{path.name}: {err.key}" if err.key else path.name, err.problem) from None
