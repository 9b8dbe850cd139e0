"""A merge-on-read MERGE writes its rows as its tasks hold them, where that keeps delete files few."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, rows_then_a_few_changes, run

from airflow_provider_sqlserver_cdc.spark.merge.job import LOG
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table
from airflow_provider_sqlserver_cdc.spark.merge.write_distribution import writes_delete_files_per_partition

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("granularity", ["partition", "file"])
def test_the_merge_output_is_shuffled_only_where_tasks_would_write_a_delete_file_per_data_file(
    spark: Any, base: Path, namespace: str, table: str, caplog: pytest.LogCaptureFixture, granularity: str
) -> None:
    w1, w2 = rows_then_a_few_changes(base)
    run(spark, namespace, w1, table_properties={"write.delete.granularity": granularity})
    # "partition" is the job's default; with "file" every unshuffled task would delete in every data file.
    assert writes_delete_files_per_partition(iceberg_table(spark, table)) is (granularity == "partition")
    with caplog.at_level(logging.INFO, logger=LOG.name):
        run(spark, namespace, w2)
    if granularity == "partition":
        # Only the target is shuffled, for the join: not the changes again, not the rows written.
        assert "executed plan: 1 Exchange(s), 1 on the target's side" in caplog.text
    # (With "file" the table's hash distribution applies; how many shuffles that takes depends on the
    # join's partitions: one partition already satisfies it.)
    assert contents(spark, table)[7] == (False, "changed", None)
    assert spark.sql(f"SELECT count(*) AS n FROM {table}.delete_files").first().n == 1
