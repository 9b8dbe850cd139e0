"""The maintenance run: per table, refresh the applied state's copy, read the figures, run Iceberg's procedures."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.maintenance import procedures
from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import MaintenanceSettings, parse_args
from airflow_provider_sqlserver_cdc.spark.maintenance.table_health import (
    TableHealth,
    large_file_bytes,
    read_health,
    tombstone_count,
)
from airflow_provider_sqlserver_cdc.spark.maintenance.tombstones import purge_floor, purge_tombstones
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.staging_cleanup import drop_orphaned_staging_tables
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote_table
from airflow_provider_sqlserver_cdc.spark.merge.table_modes import CURRENT, TABLE_MODE_PROPERTY
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg_state import ranges_of, refresh_state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG = logging.getLogger("sqlserver_cdc.maintenance_job")

RESULT_MARKER = "SQLSERVER_CDC_MAINTENANCE_RESULT"
#: The table property the merge job sets on the tables it creates (how ``--namespace`` finds them).
SOURCE_TABLE_PROPERTY = "sqlserver-cdc.source-table"


def provider_tables(spark: SparkSession, namespace: str) -> list[str]:
    """Return the tables of a namespace that the merge job created, sorted.

    :param namespace: ``catalog.namespace``.
    """
    tables = []
    for row in spark.sql(f"SHOW TABLES IN {quote_table(namespace)}").collect():
        if row["isTemporary"]:
            continue
        table = f"{namespace}.{row['tableName']}"
        if iceberg_table(spark, table).properties().get(SOURCE_TABLE_PROPERTY) is not None:
            tables.append(table)
    return sorted(tables)


def maintain_table(
    spark: SparkSession, table: str, settings: MaintenanceSettings, now: dt.datetime
) -> dict[str, Any]:
    """Maintain one table when its figures pass a threshold (or a purge or ``force`` asks); return its entry.

    The applied state's copy in the table properties is refreshed first, so the snapshots that
    carry it may be expired (``iceberg_state``); no merge of the table may run meanwhile.

    :param table: the dotted table name.
    :param settings: the job's settings.
    :param now: the run's time, from which the retention ages count.
    """
    iceberg = iceberg_table(spark, table)
    state = refresh_state(iceberg, table)
    health = read_health(spark, table, iceberg)
    before, reasons = health.as_dict(), health.needs_maintenance(settings.thresholds)
    entry: dict[str, Any] = {"state": state.source, "before": before}
    # Staging tables of merges whose driver crashed (merges that no longer stage leave them for good).
    dropped = drop_orphaned_staging_tables(spark, table, now_millis=int(now.timestamp() * 1000))
    if dropped:
        entry["staging_tables_dropped"] = dropped
    purged = 0
    # A history table's tombstones are part of its history, and a change log has none (docs/history-targets.md).
    mode = str(iceberg.properties().get(TABLE_MODE_PROPERTY) or CURRENT)
    tombstones = settings.tombstone_margin_hours is not None and mode == CURRENT
    if tombstones:
        before["tombstones"] = tombstone_count(spark, table)
        floor = purge_floor(ranges_of(state.entries), settings.cdc_min_lsn)
        if floor is None:
            LOG.warning(
                "table %s: no tombstone purge: no min LSN given for its capture instances %s",
                table,
                sorted(ranges_of(state.entries)),
            )
        else:
            purged = purge_tombstones(
                spark, table, floor, now - dt.timedelta(hours=settings.tombstone_margin_hours)
            )
            if purged:
                reasons.append(f"{purged} tombstones purged")
    if settings.force:
        reasons.append("forced")
    entry |= {"reasons": reasons, "tombstones_purged": purged}
    expire_before = now - dt.timedelta(hours=settings.snapshot_retention_hours)
    if not reasons:
        if not expirable(iceberg, health, expire_before, settings.retain_last):
            LOG.info("table %s: no maintenance needed: %s", table, json.dumps(before))
            return entry | {"status": "skipped"}
        # Nothing to compact, but snapshots past the time-travel window pin files (a copy-on-write
        # merge's, a compaction's inputs): expire them and drop what they leave unreferenced.
        LOG.info("table %s: no compaction needed, expiring snapshots: %s", table, json.dumps(before))
        procedures.expire_snapshots(spark, table, expire_before, settings.retain_last)
        entry["status"] = "expired"
    else:
        full = health.deleted_ratio >= settings.thresholds.full_rewrite_delete_ratio
        LOG.info(
            "table %s: maintenance (%s), %s compaction (%.1f %% of the rows deleted by position deletes); "
            "before: %s",
            table,
            "; ".join(reasons),
            "full" if full else "light",
            100 * health.deleted_ratio,
            json.dumps(before),
        )
        keys = [str(name) for name in iceberg.schema().identifierFieldNames()]
        procedures.rewrite_data_files(
            spark, table, sorted(keys), None if full else large_file_bytes(iceberg, health.data_bytes)
        )
        procedures.rewrite_position_delete_files(spark, table)
        procedures.expire_snapshots(spark, table, expire_before, settings.retain_last)
        procedures.rewrite_manifests(spark, table)
        # Orphans come from failed commits only; listing the table's files is left to these runs.
        procedures.remove_orphan_files(spark, table, now - dt.timedelta(hours=settings.orphan_age_hours))
        entry |= {"status": "maintained", "compaction": "full" if full else "light"}
    after = read_health(spark, table, iceberg).as_dict()
    if tombstones:
        after["tombstones"] = tombstone_count(spark, table)
    LOG.info("table %s: after maintenance: %s", table, json.dumps(after))
    return entry | {"after": after}


def expirable(iceberg: Any, health: TableHealth, older_than: dt.datetime, retain_last: int) -> bool:
    """Say whether ``expire_snapshots`` would remove a snapshot: more than ``retain_last``, one older than the window.

    :param iceberg: the Iceberg ``Table``.
    :param health: its figures (``snapshots``).
    :param older_than: the time-travel window's start.
    :param retain_last: snapshots kept whatever their age.
    """
    if health.snapshots <= retain_last:
        return False
    oldest_ms = min(int(snapshot.timestampMillis()) for snapshot in iceberg.snapshots())
    return oldest_ms < older_than.timestamp() * 1000


def run(spark: SparkSession, settings: MaintenanceSettings, now: dt.datetime | None = None) -> dict[str, Any]:
    """Maintain every table of the settings, each on its own; return table -> entry.

    :param settings: the job's settings.
    :param now: the run's time (default: now).
    :raises MergeJobError: some tables failed (the others were maintained); the message names them.
    """
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    now = now or dt.datetime.now(dt.UTC)
    tables = list(
        dict.fromkeys(
            [*settings.tables, *(provider_tables(spark, settings.namespace) if settings.namespace else [])]
        )
    )
    result: dict[str, Any] = {}
    failures = {}
    for table in tables:
        try:
            result[table] = maintain_table(spark, table, settings, now)
        except Exception as err:  # one table's failure does not stop the others
            LOG.error(
                "table %s: maintenance failed: %s", table, err, exc_info=not isinstance(err, MergeJobError)
            )
            failures[table] = err
            result[table] = {"status": "failed", "error": str(err).strip().splitlines()[0][:1000]}
    if failures:
        raise MaintenanceError(
            "maintenance failed for "
            + "; ".join(f"{table}: {err}" for table, err in failures.items())
            + ". Nothing of a failed table's data changed (each procedure commits atomically); fix the cause "
            "and re-run. A commit conflict with a merge is retried by the task's retries",
            result,
        )
    return result


class MaintenanceError(MergeJobError):
    """Some tables could not be maintained; ``result`` has every table's entry."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job as spark-submit does; print the result line; exit 2 when a table failed.

    :param argv: the arguments; default ``sys.argv[1:]``.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = parse_args(sys.argv[1:] if argv is None else argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("sqlserver-cdc-maintenance").getOrCreate()
    try:
        result = run(spark, settings)
    except MaintenanceError as err:
        print(f"{RESULT_MARKER} {json.dumps(err.result, sort_keys=True)}")
        print(f"ERROR: {err}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    print(f"{RESULT_MARKER} {json.dumps(result, sort_keys=True)}")
    return 0
