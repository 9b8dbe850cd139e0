"""The Iceberg target: table properties, scan planning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, rows_then_a_few_changes, run
from window_builder import ChangeLog, WindowSpec, flatten, write_window

from airflow_provider_sqlserver_cdc.spark.merge import merge_strategy
from airflow_provider_sqlserver_cdc.spark.merge.key_filter import KeyRange
from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import TargetFiles, target_files
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import (
    SUMMARY_RANGES,
    IcebergTarget,
    applied_state,
    iceberg_table,
    reconcile_applied_state,
    summary_properties,
    with_commit_properties,
)

pytestmark = pytest.mark.spark


def test_table_properties_are_set_on_tables_the_job_creates_only(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    w1, w2 = rows_then_a_few_changes(base)
    run(
        spark,
        namespace,
        w1,
        table_properties={"write.merge.distribution-mode": "none", "write.delete.granularity": "file"},
    )
    properties = iceberg_table(spark, table).properties()
    assert properties.get("write.merge.distribution-mode") == "none"
    assert properties.get("write.merge.mode") == "merge-on-read"
    # The job's defaults for bounded metadata and sized files; a user's property replaces one.
    assert properties.get("write.metadata.delete-after-commit.enabled") == "true"
    assert properties.get("write.metadata.previous-versions-max") == "20"
    assert properties.get("write.distribution-mode") == "hash"
    assert properties.get("write.delete.granularity") == "file"
    run(spark, namespace, w2, table_properties={"write.merge.distribution-mode": "hash"})
    properties = iceberg_table(spark, table).properties()
    assert properties.get("write.merge.distribution-mode") == "none"  # an existing table keeps its own
    assert contents(spark, table)[7] == (False, "changed", None)


@pytest.mark.parametrize("on_driver", [True, False], ids=["manifests-on-the-driver", "data-files-query"])
def test_target_files_count_the_records_of_the_files_the_key_range_overlaps(
    spark: Any, base: Path, namespace: str, table: str, on_driver: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not on_driver:  # a table above the limit: the metadata table query reads the manifests
        monkeypatch.setattr(merge_strategy, "DRIVER_STATISTICS_MAX_FILES", 0)
    log = ChangeLog()
    low = flatten(log.insert(id=k, name="x", amount=None) for k in range(1, 31))
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, low))
    start = log.lsn + 1
    high = flatten(log.insert(id=k, name="x", amount=None) for k in range(1001, 1011))
    w2 = write_window(base, WindowSpec("dbo_orders", start, log.lsn, high))
    run(spark, namespace, w1)
    run(spark, namespace, w2)  # a second data file: keys 1001-1010
    iceberg = iceberg_table(spark, table)
    assert target_files(spark, table, None, iceberg) == TargetFiles(2, 40, 2, 40, 40)
    # keys 1005-1010: the range covers 6 of the second file's 10 keys
    assert target_files(spark, table, KeyRange("id", 1005, 2000, "INT"), iceberg) == TargetFiles(
        2, 40, 1, 10, 6
    )
    # keys 16-30 of the first file, 1001 of the second
    assert target_files(spark, table, KeyRange("id", 16, 1001, "INT"), iceberg) == TargetFiles(
        2, 40, 2, 40, 16
    )
    assert target_files(spark, table, KeyRange("id", 5000, 6000, "INT"), iceberg) == TargetFiles(
        2, 40, 0, 0, 0
    )


@pytest.mark.parametrize("key_type", ["BIGINT", "DECIMAL(38,0)"])
def test_target_files_read_on_the_driver_match_the_data_files_query(
    spark: Any, namespace: str, key_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways of reading the statistics give the same figures, for keys beyond a long too."""
    table = f"{namespace}.wide_{key_type[:3].lower()}"
    spark.sql(
        f"CREATE TABLE {table} (id {key_type}, name string) USING iceberg "
        "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')"
    )
    big = 10**20 if key_type.startswith("DECIMAL") else 2**61  # 3 * big still fits a long
    for first, last in ((1, 300), (big, big + 99), (big * 2, big * 2 + 9)):  # three data files
        spark.sql(
            f"INSERT INTO {table} SELECT /*+ COALESCE(1) */ CAST({first} AS {key_type}) + id, 'x' "
            f"FROM range(0, {last - first + 1})"
        )
    assert spark.sql(f"SELECT count(*), max(id) FROM {table}").first() == (410, big * 2 + 9)
    spark.sql(f"DELETE FROM {table} WHERE id = 5")  # a delete file: not a data file, its rows still count
    iceberg = iceberg_table(spark, table)
    ranges = [None, KeyRange("id", 100, big + 49, key_type), KeyRange("id", big * 2 + 5, big * 3, key_type)]
    on_driver = [target_files(spark, table, r, iceberg) for r in ranges]
    monkeypatch.setattr(merge_strategy, "DRIVER_STATISTICS_MAX_FILES", 0)
    assert [target_files(spark, table, r, iceberg) for r in ranges] == on_driver
    assert on_driver[1] == TargetFiles(3, 410, 2, 400, 251)  # keys 100-300 and big..big+49
    assert on_driver[2] == TargetFiles(3, 410, 1, 10, 5)


def test_raced_commits_end_with_a_state_holding_both(spark: Any, namespace: str) -> None:
    # Two merges read the same state {..200}; A records ..200 + 300-400, then B, not seeing A,
    # records ..200 + 500-600. Iceberg accepts both commits: the newest summary lacks A's range.
    table = f"{namespace}.raced"
    spark.sql(f"CREATE TABLE {table} (id int) USING iceberg")
    read = {"dbo_orders": [(0, 200)]}
    for ranges in (read, {"dbo_orders": [(0, 200), (300, 400)]}, {"dbo_orders": [(0, 200), (500, 600)]}):
        with_commit_properties(
            spark, summary_properties(ranges), lambda: spark.sql(f"INSERT INTO {table} VALUES (1)")
        )
    assert applied_state(spark, table)[SUMMARY_RANGES + "dbo_orders"].count("-") == 2

    # Each writer reconciles after its commit: the newest state then holds every committed range.
    both = {"dbo_orders": [(0, 200), (300, 400), (500, 600)]}
    assert reconcile_applied_state(spark, table, {"dbo_orders": [(0, 200), (500, 600)]}, read) == both
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").first().n
    assert reconcile_applied_state(spark, table, {"dbo_orders": [(0, 200), (300, 400)]}, read) == both
    assert spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").first().n == snapshots  # nothing to add
    assert IcebergTarget(spark).applied_ranges(table) == both
    assert spark.table(table).count() == 3  # the bookkeeping commit adds no data
