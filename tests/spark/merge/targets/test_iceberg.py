"""The Iceberg target: table properties, scan planning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, rows_then_a_few_changes, run
from window_builder import ChangeLog, WindowSpec, flatten, write_window

from airflow_provider_sqlserver_cdc.spark.merge.key_filter import KeyRange
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table, target_rows_scanned

pytestmark = pytest.mark.spark


def test_table_properties_are_set_on_tables_the_job_creates_only(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    w1, w2 = rows_then_a_few_changes(base)
    run(spark, namespace, w1, table_properties={"write.merge.distribution-mode": "none"})
    properties = iceberg_table(spark, table).properties()
    assert properties.get("write.merge.distribution-mode") == "none"
    assert properties.get("write.merge.mode") == "merge-on-read"
    run(spark, namespace, w2, table_properties={"write.merge.distribution-mode": "hash"})
    properties = iceberg_table(spark, table).properties()
    assert properties.get("write.merge.distribution-mode") == "none"  # an existing table keeps its own
    assert contents(spark, table)[7] == (False, "changed", None)


def test_target_rows_scanned_counts_the_records_of_the_files_the_key_range_keeps(
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
    assert target_rows_scanned(spark, table, None) == 40
    assert target_rows_scanned(spark, table, KeyRange("id", 1005, 2000, "INT")) == 10
    assert target_rows_scanned(spark, table, KeyRange("id", 5000, 6000, "INT")) == 0
