"""Key filtering of the MERGE's target scan: key range and runtime key filter."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from merge_runs import contents, rows_then_a_few_changes, run
from window_builder import AMOUNT, INT_KEY, NAME, ChangeLog, Column, WindowSpec, flatten, write_window

from airflow_provider_sqlserver_cdc.spark.merge import key_filter
from airflow_provider_sqlserver_cdc.spark.merge.arguments import WRITE_MODES
from airflow_provider_sqlserver_cdc.spark.merge.job import LOG
from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import target_files
from airflow_provider_sqlserver_cdc.spark.merge.net_effect_frame import (
    checkpoint_partitions,
    checkpointed_net_effect,
    net_effect_frame,
)
from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan, plan_schema
from airflow_provider_sqlserver_cdc.spark.merge.statements import merge_sql
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import load_window, read_window


def test_decimal_key_range_bounds_are_literals_of_the_column_type() -> None:
    key_range = key_filter.KeyRange("order no", -(10**37), 10**37, "DECIMAL(38,0)")
    assert key_range.condition("t.") == (
        f"t.`order no` BETWEEN CAST({-(10**37)} AS DECIMAL(38,0)) AND CAST({10**37} AS DECIMAL(38,0))"
    )


NUMERIC_KEY = Column("id", "numeric", pa.decimal128(38, 0), nullable=False, max_length=17, precision=38)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("write_mode", "key", "offset"),
    [
        *[(mode, INT_KEY, 0) for mode in WRITE_MODES],
        ("merge-on-read", NUMERIC_KEY, 10**20),  # numeric(38,0): beyond bigint
    ],
)
def test_key_range_prunes_the_target_scan_and_keeps_rows_outside_it(
    spark: Any, base: Path, namespace: str, table: str, write_mode: str, key: Column, offset: int
) -> None:
    """Rows outside the window's key range share data files with changed rows; none may be lost."""
    columns = (key, NAME, AMOUNT)
    log = ChangeLog()
    first = flatten(log.insert(id=offset + k, name=f"n{k}", amount=None) for k in range(1, 101))
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, first, columns=columns))
    start = log.lsn + 1
    second = flatten(
        [
            log.update({"id": offset + 50, "name": "n50", "amount": None}, name="changed"),
            log.insert(id=offset + 150, name="new"),
        ]
    )
    w2 = write_window(base, WindowSpec("dbo_orders", start, log.lsn, second, columns=columns))
    run(spark, namespace, w1, write_mode=write_mode)

    window = load_window(spark, w2)
    plan = TargetPlan(table, windows=[window])
    plan_schema(plan, None)
    changes = read_window(spark, window, table)
    bounds = key_filter.source_key_range(changes, plan)
    assert bounds == key_filter.KeyRange("id", offset + 50, offset + 150, plan.column_types["id"])
    net_effect_frame(changes, ["id"]).createOrReplaceTempView("range_source")
    statement = merge_sql(table, "range_source", ["id", "name", "amount"], ["id"], False, bounds)
    explained = spark.sql("EXPLAIN " + statement).first()[0]
    # Pushed into the Iceberg scan of the target.
    assert f"filters=id >= {offset + 50}, id <= {offset + 150}" in explained, explained
    files = target_files(spark, table, bounds)
    assert (files.touched_rows, files.scanned_rows) == (100, 51)  # keys offset+50 to offset+100 of one file

    run(spark, namespace, w2, write_mode=write_mode)
    rows = contents(spark, table)
    assert len(rows) == 101
    assert rows[offset + 50] == (False, "changed", None) and rows[offset + 150] == (False, "new", None)
    assert all(rows[offset + k] == (False, f"n{k}", None) for k in range(1, 101) if k != 50)


@pytest.mark.spark
def test_merge_on_read_filters_the_target_scan_by_the_source_keys(
    spark: Any, base: Path, namespace: str, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The MERGE's target scan carries a Bloom filter of the source keys, built from the checkpointed net effect."""
    w1, w2 = rows_then_a_few_changes(base)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        # Unpartitioned: a bucketed table takes the storage-partitioned MERGE, which needs no key filter.
        run(spark, namespace, w1, write_mode="merge-on-read", partition_buckets=0)
    assert "runtime key filter on" not in caplog.text  # the table was empty: nothing to filter

    window = load_window(spark, w2)
    plan = TargetPlan(table, windows=[window])
    plan_schema(plan, None)
    changes = read_window(spark, window, table)
    threshold = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(threshold)
    persistent_rdds = spark.sparkContext._jsc.getPersistentRDDs
    held = persistent_rdds().size()
    with checkpointed_net_effect(changes, ["id"]) as source:
        assert persistent_rdds().size() == held + 1
        source.createOrReplaceTempView("keyed_source")
        statement = merge_sql(table, "keyed_source", ["id", "name", "amount"], ["id"], False)
        with key_filter.session_conf(spark, key_filter.runtime_key_filter_conf(window.manifest.row_count)):
            explained = spark.sql("EXPLAIN " + statement).first()[0]
            assert spark.conf.get(threshold) == "-1"
        default_plan = spark.sql("EXPLAIN " + statement).first()[0]
    assert persistent_rdds().size() == held and spark.conf.get(threshold) == before
    bloom = re.search(r"Filter might_contain\(.*xxhash64\((id#\d+L?), 42\)\)", explained)
    assert bloom, explained
    target_scan = re.search(rf"BatchScan {re.escape(table)}\[{bloom.group(1)},", explained)
    assert target_scan, explained  # it tests the key the target's scan reads
    assert "might_contain" not in default_plan  # Spark's defaults would not add it for a small source
    sized_for_3_keys = r"bloom_filter_agg\(xxhash64\(id#\d+L?, 42\), 3, 24,"
    assert re.search(sized_for_3_keys, explained), explained

    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOG.name):
        run(spark, namespace, w2, write_mode="merge-on-read")
    assert (
        "runtime key filter on (194 target rows to scan, 3 change rows)" in caplog.text
    )  # keys 7-200 of ids 1-200: the range [7, 300]
    # The checkpoint keeps its partitioning by key: the join shuffles the target's rows, not the changes again.
    assert "executed plan: 1 Exchange(s), 1 on the target's side" in caplog.text
    rows = contents(spark, table)
    assert len(rows) == 201 and rows[7] == (False, "changed", None) and rows[300][0] is False
    assert all(rows[k] == (False, f"n{k}", None) for k in range(1, 201) if k != 7)


@pytest.mark.spark
def test_copy_on_write_targets_merge_without_the_runtime_key_filter(
    spark: Any, base: Path, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    w1, w2 = rows_then_a_few_changes(base)
    run(spark, namespace, w1, write_mode="copy-on-write")
    with caplog.at_level(logging.INFO, logger=LOG.name):
        run(spark, namespace, w2, write_mode="copy-on-write")
    assert "MERGE of" in caplog.text and "runtime key filter on" not in caplog.text
    assert contents(spark, f"{namespace}.dbo_orders")[7] == (False, "changed", None)


@pytest.mark.parametrize(
    ("target_rows", "change_rows", "pays"),
    [(200, 100, True), (199, 100, False), (None, 100, False), (0, 1, False)],
)
def test_runtime_key_filter_pays_from_two_target_rows_per_change_row(
    target_rows: int | None, change_rows: int, pays: bool
) -> None:
    assert key_filter.runtime_key_filter_pays(target_rows, change_rows) is pays


def test_runtime_key_filter_is_sized_for_the_change_rows_within_sparks_cap() -> None:
    small = key_filter.runtime_key_filter_conf(1000)
    assert small["spark.sql.optimizer.runtime.bloomFilter.expectedNumItems"] == "1000"
    assert small["spark.sql.optimizer.runtime.bloomFilter.numBits"] == "8000"
    huge = key_filter.runtime_key_filter_conf(10**9)
    assert huge["spark.sql.optimizer.runtime.bloomFilter.numBits"] == str(key_filter.BLOOM_FILTER_MAX_BITS)


@pytest.mark.parametrize("key_type", ["STRING", "DECIMAL(18,2)", "TIMESTAMP_NTZ", "BINARY"])
def test_source_key_range_is_only_for_whole_number_keys(key_type: str) -> None:
    plan = TargetPlan("lake.ns.t", key_columns=("code",), column_types={"code": key_type})
    assert key_filter.source_key_range(None, plan) is None  # and no Spark job
    assert key_filter.source_key_range(None, plan, known=(1, 9)) is None


@pytest.mark.parametrize("key_type", ["INT", "BIGINT", "DECIMAL(38,0)"])
def test_source_key_range_takes_the_bounds_read_while_the_windows_were_checked(key_type: str) -> None:
    plan = TargetPlan("lake.ns.t", key_columns=("id",), column_types={"id": key_type})
    # changes=None: no Spark job may run
    assert key_filter.source_key_range(None, plan, known=(-5, 10**20)) == key_filter.KeyRange(
        "id", -5, 10**20, key_type
    )


@pytest.mark.parametrize(
    ("window_bytes", "shuffle_partitions", "cores", "partitions"),
    [
        (0, 200, 2, 1),
        (1_000_000, 200, 2, 1),  # a minutely window: one task, one data file, one delete file
        (16 * 1024 * 1024, 200, 2, 1),  # Parquet bytes x 4 in memory: 64 MB
        (16 * 1024 * 1024 + 1, 200, 2, 2),
        (40 * 1024 * 1024, 200, 2, 4),  # 3 partitions on 2 cores: a whole second wave
        (40 * 1024 * 1024, 200, 100, 3),  # one wave anyway
        (10**12, 8, 2, 8),
    ],
)
def test_a_checkpoint_has_a_partition_per_64_mb_of_change_rows_in_whole_waves(
    window_bytes: int, shuffle_partitions: int, cores: int, partitions: int
) -> None:
    assert checkpoint_partitions(window_bytes, shuffle_partitions, cores) == partitions
