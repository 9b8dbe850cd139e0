"""The PostgreSQL target: tables in a PostgreSQL database, reached over JDBC (docs/targets-postgres.md).

A batch is applied in two steps. Spark writes the batch's net effect (one row per key) into an
unlogged staging table, hash-partitioned by key over several JDBC connections at once (every
key's row in one partition). Then one transaction on the driver applies the staging table
set-based (``postgres_sql.ApplyStatements``: older rows out, newer rows in, the LSN-position
guard on every key) and records the applied LSN ranges in the schema's bookkeeping table: the
data and the ranges commit together, or neither does. A crash before the commit leaves the
target as it was (PostgreSQL rolls back a transaction whose connection is gone); the staging
table is dropped afterwards, unless the driver itself died: then the next apply of the table drops
the unlogged ``_cdc_stage_*`` table once it is a day old.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import (
    COMMIT_TIME,
    DELETED,
    OPERATION,
    SEQVAL,
    START_LSN,
)
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.net_effect_frame import net_effect_frame
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote as spark_quote
from airflow_provider_sqlserver_cdc.spark.merge.targets.base import AppliedRanges, ChangeBatch, MergeTarget
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import (
    JdbcCredentials,
    check_jdbc_url,
    jdbc_connection,
    jdbc_error_text,
    jdbc_sql_state,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.postgres_sql import (
    STAGE_PREFIX,
    ApplyStatements,
    applied_ranges_table,
    create_applied_ranges_sql,
    create_deleted_keys_sql,
    create_stage_sql,
    create_table_sql,
    last_apply_transaction_sql,
    postgres_type,
    quote,
    quote_table,
    sibling_table,
    spark_type_of,
    split_table,
    stage_type,
    upsert_applied_ranges_sql,
)
from airflow_provider_sqlserver_cdc.window.lsn_ranges import add_range, format_ranges, parse_ranges

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan
    from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import JdbcConnection

LOG = logging.getLogger("sqlserver_cdc.merge_job")

UNIQUE_VIOLATION = "23505"
#: Rows per JDBC batch of the staging load (the driver rewrites a batch into multi-row INSERTs).
STAGE_BATCH_ROWS = 10_000
_AS_TEXT = ("TIMESTAMP_NTZ", "TIMESTAMP", "DATE")
#: Safe in-place widenings of an existing column: (current, planned) type families.
_WIDER_INTEGERS = ("smallint", "integer", "bigint")


@dataclass(eq=False)
class PostgresTarget(MergeTarget):
    """PostgreSQL tables ``schema.table`` of the database the JDBC URL names.

    :param spark: the session; its JVM needs the PostgreSQL JDBC driver (``spark.jars``).
    :param url: the JDBC URL, without credentials: ``jdbc:postgresql://host:port/database``.
    :param credentials: the login (from the environment or a credentials file, never the command line).
    :param connections: JDBC connections that load the staging table at once (partitions by key hash).
    """

    #: Hard deletes keep the key and the delete's position in ``<table>_cdc_deleted_keys``: windows in any order.
    remembers_hard_deletes = True

    spark: SparkSession
    url: str
    credentials: JdbcCredentials
    connections: int = 4

    def __post_init__(self) -> None:
        check_jdbc_url(self.url)
        if self.connections < 1:
            raise MergeJobError(f"--jdbc-connections must be at least 1, got {self.connections}")

    def check_session(self) -> None:
        """Fail unless the session's JVM can load the PostgreSQL JDBC driver."""
        try:
            jvm = self.spark.sparkContext._jvm
            loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
            jvm.java.lang.Class.forName(check_jdbc_url(self.url), True, loader)
        except Exception:
            raise MergeJobError(
                "the Spark session cannot load the PostgreSQL JDBC driver (org.postgresql.Driver): add its jar to "
                "spark.jars (Debian: /usr/share/java/postgresql.jar from libpostgresql-jdbc-java)"
            ) from None

    def _connect(self) -> Any:
        return jdbc_connection(self.spark, self.url, self.credentials)

    def exists(self, table: str) -> bool:
        """Say whether ``schema.table`` exists."""
        with self._connect() as conn:
            return bool(conn.query("SELECT to_regclass(?) IS NOT NULL", [quote_table(table)])[0][0])

    def version(self, table: str) -> str | None:
        """Return the id of the transaction that last applied windows to ``table`` (None before the first)."""
        schema, _ = split_table(table)
        with self._connect() as conn:
            if not conn.query("SELECT to_regclass(?) IS NOT NULL", [applied_ranges_table(schema)])[0][0]:
                return None
            rows = conn.query(last_apply_transaction_sql(schema), [table])
        return str(rows[0][0]) if rows else None

    def applied_ranges(self, table: str) -> AppliedRanges:
        """Return the applied LSN ranges the schema's bookkeeping table holds for ``table``."""
        with self._connect() as conn:
            return _recorded_ranges(conn, table, lock=False)

    def table_schema(self, table: str) -> dict[str, str]:
        """Return lower-cased column name -> Spark SQL type of the table's columns."""
        schema, name = split_table(table)
        with self._connect() as conn:
            rows = conn.query(
                "SELECT column_name, data_type, numeric_precision, numeric_scale FROM information_schema.columns "
                "WHERE table_schema = ? AND table_name = ?",
                [schema, name],
            )
        return {
            str(r[0]).lower(): spark_type_of(str(r[1]), _int(r[2]), _int(r[3]))
            for r in rows
            if r[0] is not None
        }

    def identifier_fields(self, table: str) -> list[str]:
        """Return the table's primary key columns, in key order."""
        with self._connect() as conn:
            return [str(r[0]) for r in conn.query(_PRIMARY_KEY_SQL, [quote_table(table)])]

    def create_table(self, plan: TargetPlan) -> None:
        """Create the schema, the table (captured columns, change columns, primary key) and the bookkeeping table."""
        columns = {name: pg_type for name, (_, pg_type) in planned_columns(plan).items()}
        schema, _ = split_table(plan.table)
        LOG.info("creating target table %s in PostgreSQL", plan.table)
        with self._connect() as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")
            conn.execute(create_table_sql(plan.table, columns, plan.key_columns))
            conn.execute(create_applied_ranges_sql(schema))
            conn.commit()

    def evolve_table(self, plan: TargetPlan) -> None:
        """Add the new columns, widen integer, decimal and text columns the windows need wider."""
        planned = planned_columns(plan)
        schema, _ = split_table(plan.table)
        with self._connect() as conn:
            current = {
                str(r[0]).lower(): str(r[1])
                for r in conn.query(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                    "WHERE a.attrelid = to_regclass(?) AND a.attnum > 0 AND NOT a.attisdropped",
                    [quote_table(plan.table)],
                )
            }
            for column, (_, pg_type) in planned.items():
                have = current.get(column.lower())
                if have is None:
                    LOG.info("target %s: adding column %s %s", plan.table, column, pg_type)
                    conn.execute(
                        f"ALTER TABLE {quote_table(plan.table)} ADD COLUMN {quote(column)} {pg_type}"
                    )
                elif _widens(have, pg_type):
                    LOG.info("target %s: widening column %s from %s to %s", plan.table, column, have, pg_type)
                    conn.execute(
                        f"ALTER TABLE {quote_table(plan.table)} ALTER COLUMN {quote(column)} TYPE {pg_type}"
                    )
            conn.execute(create_applied_ranges_sql(schema))
            conn.commit()

    def apply(self, batch: ChangeBatch) -> None:
        """Stage the batch's net effect over several connections, then apply it and its LSN ranges in one transaction."""
        plan = batch.plan
        planned = planned_columns(plan)
        columns = {name: planned[name] for name in _table_names(plan, batch.columns)}
        staged = self._staged_frame(batch, columns)
        stage = sibling_table(plan.table, prefix=STAGE_PREFIX, suffix="_" + secrets.token_hex(4))
        with self._connect() as conn:
            _drop_stale_stages(conn, plan.table)
            conn.execute(
                create_stage_sql(stage, {f.name: stage_type(_spark(f)) for f in staged.schema.fields})
            )
            conn.execute(f"COMMENT ON TABLE {stage} IS '{STAGE_COMMENT}{int(time.time())}'")
            conn.commit()
        try:
            started = time.monotonic()
            self._load_stage(staged, stage)
            loaded = time.monotonic()
            LOG.info(
                "target %s: net effect staged over %d connection(s) in %.1f s",
                plan.table,
                self.connections,
                loaded - started,
            )
            self._apply_stage(batch, columns, stage)
            LOG.info(
                "target %s: apply transaction committed in %.1f s", plan.table, time.monotonic() - loaded
            )
        finally:
            try:
                with self._connect() as conn:
                    conn.execute(f"DROP TABLE IF EXISTS {stage}")
                    conn.commit()
            except Exception as err:  # never hide the apply's own error behind the clean-up's
                LOG.warning(
                    "target %s: could not drop the staging table %s (%s); drop it later",
                    plan.table,
                    stage,
                    err,
                )

    def _staged_frame(self, batch: ChangeBatch, columns: Mapping[str, Any]) -> DataFrame:
        from pyspark.sql import functions as F

        plan = batch.plan
        net = net_effect_frame(batch.changes, plan.key_columns)
        selected = []
        for name in [*columns, START_LSN, SEQVAL, OPERATION, COMMIT_TIME, DELETED]:
            field = net.schema[name]
            value = F.col(spark_quote(name))
            selected.append(value.cast("string").alias(name) if _spark(field) in _AS_TEXT else value)
        keys = [F.col(spark_quote(k)) for k in plan.key_columns]
        return net.select(*selected).repartition(self.connections, *keys)

    def _load_stage(self, staged: DataFrame, stage: str) -> None:
        properties = {
            "user": self.credentials.user,
            "password": self.credentials.password,
            "driver": check_jdbc_url(self.url),
            "batchsize": str(STAGE_BATCH_ROWS),
            "reWriteBatchedInserts": "true",
            "isolationLevel": "READ_COMMITTED",
        }
        staged.write.jdbc(self.url, stage, mode="append", properties=properties)

    def _apply_stage(self, batch: ChangeBatch, columns: Mapping[str, tuple[Any, str]], stage: str) -> None:
        plan = batch.plan
        statements = ApplyStatements(plan.table, stage, columns, plan.key_columns, batch.hard)
        schema, _ = split_table(plan.table)
        with self._connect() as conn:
            # One apply at a time per table (readers go on); later appliers see this one's rows.
            conn.execute(f"LOCK TABLE {quote_table(plan.table)} IN SHARE ROW EXCLUSIVE MODE")
            conn.execute(f"ANALYZE {stage}")
            if batch.hard:
                key_types = {k: columns[k][1] for k in plan.key_columns}
                conn.execute(create_deleted_keys_sql(plan.table, key_types))
            sql = list(statements.remove_older()) + list(statements.insert_newer())
            if batch.snapshot is not None:
                sql.insert(0, statements.retire_absent(batch.snapshot.manifest.to_lsn))
            for statement in sql:
                try:
                    conn.execute(statement)
                except Exception as err:
                    raise _apply_error(plan.table, batch, err) from None
            conn.execute(create_applied_ranges_sql(schema))
            recorded = _recorded_ranges(conn, plan.table, lock=True)
            for ci, ranges in batch.applied.items():
                for low, high in ranges:
                    recorded[ci] = add_range(recorded.get(ci, []), low, high)
            for ci, ranges in recorded.items():
                conn.update(
                    upsert_applied_ranges_sql(schema),
                    [plan.table, ci, format_ranges(ranges), _max_lsn_hex(ranges)],
                )
            self._before_commit(conn)
            conn.commit()

    def _before_commit(self, conn: JdbcConnection) -> None:
        """Run just before the apply transaction commits (tests stop the job here)."""


#: The comment of a staging table, then its creation time (Unix seconds); one older than STALE_STAGE_HOURS was left by a
#: driver that died (a live run drops its own staging table when it ends).
STAGE_COMMENT = "sqlserver-cdc staging table created "
STALE_STAGE_HOURS = 24
_STALE_STAGES_SQL = (
    "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = ? AND c.relkind = 'r' AND starts_with(c.relname, ?) "
    "AND starts_with(coalesce(obj_description(c.oid, 'pg_class'), ''), ?) "
    "AND to_timestamp(substr(obj_description(c.oid, 'pg_class'), ?)::bigint) < now() - make_interval(hours => ?)"
)


def _drop_stale_stages(conn: JdbcConnection, table: str) -> None:
    """Drop the table's staging tables that drivers which died left more than STALE_STAGE_HOURS ago."""
    schema, _ = split_table(table)
    prefix = sibling_table(table, prefix=STAGE_PREFIX, suffix="_00000000").split(".", 1)[1].strip('"')[:-8]
    parameters = [schema, prefix, STAGE_COMMENT, len(STAGE_COMMENT) + 1, STALE_STAGE_HOURS]
    for (name,) in conn.query(_STALE_STAGES_SQL, parameters):
        LOG.warning("target %s: dropping the staging table %s a failed run left behind", table, name)
        conn.execute(f"DROP TABLE IF EXISTS {name}")


_PRIMARY_KEY_SQL = (
    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
    "WHERE i.indrelid = to_regclass(?) AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)"
)


def planned_columns(plan: TargetPlan) -> dict[str, tuple[dict[str, Any], str]]:
    """Return captured column name -> (manifest entry, PostgreSQL type) of the plan's windows, in column order."""
    entries: dict[str, dict[str, Any]] = {}
    for window in plan.windows:
        for column in window.manifest.columns:
            entries.setdefault(column["name"].lower(), column)
    return {
        column["name"]: (column, postgres_type(column, plan.column_types[lower]))
        for lower, column in entries.items()
    }


def _table_names(plan: TargetPlan, names: Sequence[str]) -> list[str]:
    by_lower = {name.lower(): name for name in planned_columns(plan)}
    return [by_lower[name.lower()] for name in names]


def _spark(field: Any) -> str:
    return field.dataType.simpleString().upper().replace("INTEGER", "INT")


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _max_lsn_hex(ranges: Sequence[tuple[int, int]]) -> str:
    from airflow_provider_sqlserver_cdc.lsn import Lsn

    return Lsn.from_int(max(high for _, high in ranges)).hex


def _recorded_ranges(conn: JdbcConnection, table: str, *, lock: bool) -> AppliedRanges:
    """Read the table's rows of its schema's bookkeeping table (none when that table does not exist)."""
    schema, _ = split_table(table)
    if not conn.query("SELECT to_regclass(?) IS NOT NULL", [applied_ranges_table(schema)])[0][0]:
        return {}
    rows = conn.query(
        f"SELECT capture_instance, applied_lsn_ranges FROM {applied_ranges_table(schema)} WHERE target_table = ?"
        + (" FOR UPDATE" if lock else ""),
        [table],
    )
    return {str(ci): parse_ranges(str(ranges)) for ci, ranges in rows}


def _widens(have: str, want: str) -> bool:
    """Say whether ALTER COLUMN TYPE from ``have`` to ``want`` only widens (no value can be lost)."""
    if have == want:
        return False
    if have in _WIDER_INTEGERS and want in _WIDER_INTEGERS:
        return _WIDER_INTEGERS.index(want) > _WIDER_INTEGERS.index(have)
    if have.startswith("character varying(") and want == "text":
        return True
    for family in ("character varying(", "numeric("):
        if have.startswith(family) and want.startswith(family):
            old = [int(p) for p in have[len(family) : -1].split(",")]
            new = [int(p) for p in want[len(family) : -1].split(",")]
            return new[0] > old[0] and old[1:] == new[1:]
    return False


def _apply_error(table: str, batch: ChangeBatch, err: BaseException) -> MergeJobError:
    text = jdbc_error_text(err)
    if jdbc_sql_state(err) == UNIQUE_VIOLATION:
        return MergeJobError(
            f"target table {table}: applying {batch.labels} violates a unique index of the target ({text}). The apply "
            "releases every value a changed row held before any row takes one, so this means the target lacks "
            "changes between the windows it holds (a window was skipped): merge the missing windows, or rebuild "
            "the table from a snapshot. Nothing of this batch was committed"
        )
    return MergeJobError(
        f"target table {table}: applying {batch.labels} failed ({text}); nothing of this batch was committed. "
        "Re-running is safe (changes only apply when newer)"
    )
