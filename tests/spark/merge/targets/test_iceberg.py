"""The Iceberg target: table properties, scan planning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, rows_then_a_few_changes, run
from window_builder import ChangeLog, WindowSpec, flatten, write_window

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


def test_target_files_count_the_records_of_the_files_the_key_range_overlaps(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    log = ChangeLog()
    low = flatten(log.insert(id=k, name="x", amount=None) for k in range(1, 31))
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, low))
    start = log.lsn + 1
    high = flatten(log.insert(id=k, name="x", amount=None) for k in range(1001, 1011))
    w2 = write_window(base, WindowSpec("dbo_orders", start, log.lsn, high))
    run(spark, namespace, w1)
    run(spark, namespace, w2)  # a second data file: keys 1001-1010
    assert target_files(spark, table, None) == TargetFiles(2, 40, 2, 40, 40)
    # keys 1005-1010: the range covers 6 of the second file's 10 keys
    assert target_files(spark, table, KeyRange("id", 1005, 2000, "INT")) == TargetFiles(2, 40, 1, 10, 6)
    # keys 16-30 of the first file, 1001 of the second
    assert target_files(spark, table, KeyRange("id", 16, 1001, "INT")) == TargetFiles(2, 40, 2, 40, 16)
    assert target_files(spark, table, KeyRange("id", 5000, 6000, "INT")) == TargetFiles(2, 40, 0, 0, 0)


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
