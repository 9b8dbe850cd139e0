"""The maintenance job on real Iceberg tables: thresholds, procedures, figures, the state kept, tombstones."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, run
from window_builder import ChangeLog, WindowSpec, flatten, rolling_windows, write_window

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import MaintenanceSettings, Thresholds
from airflow_provider_sqlserver_cdc.spark.maintenance.job import run as maintain
from airflow_provider_sqlserver_cdc.spark.merge import staging_cleanup
from airflow_provider_sqlserver_cdc.spark.merge.staged_merge import staging_table_name
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table, recorded_state

pytestmark = pytest.mark.spark

#: The retention ages count from now: every snapshot is older than a time-travel window of 0 hours.
NO_TIME_TRAVEL = {"snapshot_retention_hours": 0.0, "retain_last": 1}


def _windows(base: Path, count: int, log: ChangeLog | None = None) -> list[str]:
    """Windows of 6 inserts each, then an update and a delete of the previous window's keys."""
    return rolling_windows(base, count, keys=6, updates=1, deletes=1, updated_name="u", log=log)


def test_maintenance_compacts_expires_and_keeps_the_applied_state(
    spark: Any, base: Path, namespace: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    windows = _windows(base, 5)
    for window in windows[:4]:
        run(spark, namespace, window)
    settings = MaintenanceSettings(
        namespace=namespace, thresholds=Thresholds(delete_files=3), **NO_TIME_TRAVEL
    )
    before = contents(spark, table)
    # Under the thresholds: figures logged, nothing committed.
    quiet = MaintenanceSettings(namespace=namespace, thresholds=Thresholds(delete_files=100))
    metadata = iceberg_table(spark, table).operations().current().metadataFileLocation()
    # A staging table a crashed merge left (merges of this unpartitioned table never stage, so only
    # the maintenance finds it): dropped once old enough (test_staging_cleanup.py).
    orphan = staging_table_name(table)
    spark.sql(f"CREATE TABLE {orphan} (id int) USING iceberg")
    monkeypatch.setattr(staging_cleanup, "ORPHAN_AGE", dt.timedelta(0))  # as if a day had passed
    quiet_entry = maintain(spark, quiet, dt.datetime.now(dt.UTC))[table]
    assert quiet_entry["status"] == "skipped"
    assert quiet_entry["staging_tables_dropped"] == [orphan]
    assert not spark.catalog.tableExists(orphan)
    iceberg_table(spark, table).refresh()
    # Not even a metadata commit: the merge's own property copy already holds the state.
    assert iceberg_table(spark, table).operations().current().metadataFileLocation() == metadata

    entry = maintain(spark, settings, dt.datetime.now(dt.UTC))[table]
    assert entry["status"] == "maintained" and entry["reasons"] == ["delete files 3 >= 3"]
    assert entry["before"]["delete_files"] == 3 and entry["before"]["data_files"] == 4
    assert entry["after"]["delete_files"] == 0 and entry["after"]["data_files"] == 1
    assert entry["after"]["snapshots"] == 2  # the rewrite (retained, the last one) and the manifest rewrite
    assert entry["after"]["metadata_bytes"] < entry["before"]["metadata_bytes"]
    assert entry["after"]["state_chars"] > 0
    assert contents(spark, table) == before
    assert recorded_state(spark, table).source.startswith("table properties")
    # Every applied window is still skipped; the next one merges.
    result = run(spark, namespace, *windows)
    assert len(result[table]["skipped"]) == 4 and len(result[table]["applied"]) == 1
    after = contents(spark, table)
    assert after[6] == (False, "u", decimal.Decimal(6)) and after[7] == (True, "n7", decimal.Decimal(7))
    assert after[24] == (False, "n24", decimal.Decimal(24))  # window 4, merged after the maintenance


def test_tombstones_below_the_source_retention_are_purged_and_stay_gone_on_replay(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    log = ChangeLog()
    w0, w1, w2 = _windows(base, 3, log)  # w1 deletes key 1, w2 deletes key 7
    for window in (w0, w1, w2):
        run(spark, namespace, window)
    assert {k for k, row in contents(spark, table).items() if row[0]} == {1, 7}
    # The source's cleanup has removed w0 and w1's changes: its min LSN is w2's first LSN.
    min_lsn = Lsn.from_hex(Path(w2).parent.name.split("_")[0])
    settings = MaintenanceSettings(
        namespace=namespace, cdc_min_lsn={"dbo_orders": min_lsn}, tombstone_margin_hours=1.0, **NO_TIME_TRAVEL
    )
    entry = maintain(spark, settings, dt.datetime.now(dt.UTC))[table]
    assert entry["tombstones_purged"] == 1 and entry["after"]["tombstones"] == 1
    assert 1 not in contents(spark, table) and contents(spark, table)[7][0]
    # The oldest replayable window (from the min LSN on) and every older one: skipped, nothing comes back.
    result = run(spark, namespace, w2, w1, w0)
    assert len(result[table]["skipped"]) == 3
    assert 1 not in contents(spark, table)
    # Off by default, and never without the capture instance's min LSN.
    assert (
        maintain(spark, MaintenanceSettings(namespace=namespace, force=True), dt.datetime.now(dt.UTC))[table][
            "tombstones_purged"
        ]
        == 0
    )


def _data_files(spark: Any, table: str) -> dict[str, int]:
    """Live data file path -> bytes."""
    rows = spark.sql(f"SELECT file_path, file_size_in_bytes FROM {table}.files WHERE content = 0").collect()
    return {row["file_path"]: row["file_size_in_bytes"] for row in rows}


def test_a_light_compaction_leaves_the_large_files_the_retained_snapshots_share(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    log = ChangeLog()
    start = log.lsn + 1
    load = flatten(log.insert(id=k, name=f"n{k}", amount=decimal.Decimal(k)) for k in range(3000))
    windows = [write_window(base, WindowSpec("dbo_orders", start, log.lsn, load))]
    for number in range(4):  # an update and a delete of loaded keys each: 0.2 % of the rows deleted by 3
        start, k = log.lsn + 1, 10 * number
        rows = [
            log.update({"id": k, "name": f"n{k}", "amount": decimal.Decimal(k)}, name="u"),
            log.delete(id=k + 1, name=f"n{k + 1}", amount=decimal.Decimal(k + 1)),
        ]
        windows.append(write_window(base, WindowSpec("dbo_orders", start, log.lsn, flatten(rows))))
    for window in windows[:4]:
        run(spark, namespace, window)
    # The load's file is "large" (a quarter of the table's bytes, far under 1/16 of the target size).
    loaded = _data_files(spark, table)
    large = max(loaded, key=loaded.__getitem__)
    assert loaded[large] > sum(loaded.values()) // 4
    before = contents(spark, table)

    light = MaintenanceSettings(namespace=namespace, thresholds=Thresholds(delete_files=3), **NO_TIME_TRAVEL)
    entry = maintain(spark, light, dt.datetime.now(dt.UTC))[table]
    assert entry["compaction"] == "light", entry
    after = _data_files(spark, table)
    assert after[large] == loaded[large]  # not copied: the expired snapshots' file is the live one
    assert len(after) == 2 and entry["after"]["delete_files"] == 1  # the small files and deletes compacted
    assert contents(spark, table) == before

    # Once position deletes reach the ratio, the large files are rewritten with their deletes applied.
    full = Thresholds(delete_files=1, full_rewrite_delete_ratio=0.001)
    entry = maintain(
        spark,
        MaintenanceSettings(namespace=namespace, thresholds=full, **NO_TIME_TRAVEL),
        dt.datetime.now(dt.UTC),
    )[table]
    assert entry["compaction"] == "full" and entry["after"]["delete_files"] == 0
    assert large not in _data_files(spark, table) and len(_data_files(spark, table)) == 1
    assert contents(spark, table) == before

    # Under every threshold, snapshots past the time-travel window are still expired.
    result = run(spark, namespace, *windows)
    assert len(result[table]["skipped"]) == 4 and len(result[table]["applied"]) == 1
    quiet = MaintenanceSettings(
        namespace=namespace, thresholds=Thresholds(delete_files=100), **NO_TIME_TRAVEL
    )
    entry = maintain(spark, quiet, dt.datetime.now(dt.UTC))[table]
    assert entry["status"] == "expired" and entry["before"]["snapshots"] > 1 == entry["after"]["snapshots"]
    assert len(run(spark, namespace, *windows)[table]["skipped"]) == 5
