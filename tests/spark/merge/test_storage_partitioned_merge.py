"""The storage-partitioned MERGE: no shuffle of the target when both sides are bucketed alike, else the plain one."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from merge_runs import EXPECTED_AFTER_TWO, contents, run, two_windows
from window_builder import INT_KEY, NAME, ChangeLog, Column, WindowSpec, flatten, write_window

from airflow_provider_sqlserver_cdc.spark.merge import staging_cleanup
from airflow_provider_sqlserver_cdc.spark.merge.executed_plan import MERGE_REPORT_ATTRIBUTE, MergeReport
from airflow_provider_sqlserver_cdc.spark.merge.partition_layout import StagingLayout, staging_layout
from airflow_provider_sqlserver_cdc.spark.merge.staged_merge import staging_table_name
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table

pytestmark = pytest.mark.spark


@pytest.fixture
def merge_reports(caplog: pytest.LogCaptureFixture) -> Callable[[], list[MergeReport]]:
    """Return the reports of the MERGEs run so far in the test (from the job's log records)."""
    caplog.set_level(logging.INFO, logger="sqlserver_cdc.merge_job")
    return lambda: [
        getattr(r, MERGE_REPORT_ATTRIBUTE) for r in caplog.records if hasattr(r, MERGE_REPORT_ATTRIBUTE)
    ]


def tables_in(spark: Any, namespace: str) -> list[str]:
    return sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {namespace}").collect())


def test_bucketed_tables_merge_without_shuffling_the_target(
    spark: Any,
    base: Path,
    namespace: str,
    table: str,
    merge_reports: Callable[[], list[MergeReport]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Merge-on-read, the default (copy-on-write tables take the same path in test_job's parametrized runs)."""
    w1, w2 = two_windows(base)
    run(spark, namespace, w1, partition_buckets=4)
    assert str(iceberg_table(spark, table).spec().fields().get(0).transform()) == "bucket[4]"
    # A staging table a crashed driver left (test_staging_cleanup.py): dropped first, once old enough.
    orphan = staging_table_name(table)
    spark.sql(f"CREATE TABLE {orphan} (id int) USING iceberg")
    monkeypatch.setattr(staging_cleanup, "ORPHAN_AGE", dt.timedelta(0))  # as if a day had passed
    run(spark, namespace, w2)
    assert f"dropped the staging table {orphan}, left " in caplog.text
    assert contents(spark, table) == EXPECTED_AFTER_TWO
    report = merge_reports()[-1]
    assert (report.strategy, report.reason) == ("storage-partitioned", "bucket(4, `id`)")
    assert report.shuffles.table_scanned
    assert report.shuffles.exchanges == 0  # neither the target, nor the staged window, nor the write
    assert tables_in(spark, namespace) == ["dbo_orders"]  # the staging table is dropped


def test_an_unpartitioned_table_falls_back_to_the_plain_merge_and_says_why(
    spark: Any, base: Path, namespace: str, table: str, merge_reports: Callable[[], list[MergeReport]]
) -> None:
    w1, w2 = two_windows(base)
    run(spark, namespace, w1, partition_buckets=0)
    run(spark, namespace, w2)
    assert contents(spark, table) == EXPECTED_AFTER_TWO
    report = merge_reports()[-1]
    assert report.strategy == "plain"
    assert "not partitioned" in report.reason
    assert report.shuffles.table_exchanges >= 1  # what the storage-partitioned join saves


def test_a_string_first_key_of_a_composite_key_is_bucketed_and_joined_in_place(
    spark: Any, base: Path, namespace: str, table: str, merge_reports: Callable[[], list[MergeReport]]
) -> None:
    region = Column("region", "char", pa.string(), nullable=False, max_length=2)
    columns, keys = (region, INT_KEY, NAME), ("region", "id")
    log = ChangeLog()
    first = flatten(
        [log.insert(region="EU", id=k, name="a") for k in range(5)] + [log.insert(region="US", id=1)]
    )
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, 0x1FF, first, columns=columns, key_columns=keys))
    log.lsn = 0x200
    second = flatten(
        [log.update({"region": "US", "id": 1, "name": None}, name="bb"), log.insert(region="US", id=2)]
    )
    w2 = write_window(base, WindowSpec("dbo_orders", 0x200, 0x2FF, second, columns=columns, key_columns=keys))
    run(spark, namespace, w1, partition_buckets=2)
    run(spark, namespace, w2)
    assert sorted((r.region, r.id, r.name) for r in spark.table(table).collect()) == [
        *[("EU", k, "a") for k in range(5)],
        ("US", 1, "bb"),
        ("US", 2, None),
    ]
    report = merge_reports()[-1]
    assert (report.strategy, report.shuffles.table_exchanges) == ("storage-partitioned", 0)


def test_partitions_off_the_key_or_an_evolved_spec_rule_the_staged_merge_out(
    spark: Any, namespace: str
) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    on_key = f"{namespace}.on_key"
    spark.sql(
        f"CREATE TABLE {on_key} (id bigint, name string) USING iceberg PARTITIONED BY (truncate(10, id))"
    )
    assert staging_layout(iceberg_table(spark, on_key), ["id"]) == StagingLayout(("truncate(10, `id`)",))
    off_key = f"{namespace}.off_key"
    spark.sql(
        f"CREATE TABLE {off_key} (id bigint, name string) USING iceberg PARTITIONED BY (bucket(4, name))"
    )
    assert "is not on a key column" in staging_layout(iceberg_table(spark, off_key), ["id"])
    spark.sql(f"ALTER TABLE {on_key} ADD PARTITION FIELD bucket(4, id)")
    assert "has had 2 partition specs" in staging_layout(iceberg_table(spark, on_key), ["id"])
