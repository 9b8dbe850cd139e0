"""A merge-on-read MERGE writes its rows as its tasks hold them, where that keeps delete files few."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, rows_then_a_few_changes, run

from airflow_provider_sqlserver_cdc.spark.merge.job import LOG

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    ("granularity", "exchanges"),
    [
        ("partition", 1),  # the job's default: only the target is shuffled, for the join
        (
            "file",
            2,
        ),  # and the written rows too, grouped by data file, or every task would delete in every file
    ],
)
def test_the_merge_output_is_shuffled_only_where_tasks_would_write_a_delete_file_per_data_file(
    spark: Any,
    base: Path,
    namespace: str,
    table: str,
    caplog: pytest.LogCaptureFixture,
    granularity: str,
    exchanges: int,
) -> None:
    w1, w2 = rows_then_a_few_changes(base)
    run(spark, namespace, w1, table_properties={"write.delete.granularity": granularity})
    with caplog.at_level(logging.INFO, logger=LOG.name):
        run(spark, namespace, w2)
    assert f"executed plan: {exchanges} Exchange(s), {exchanges} on the target's side" in caplog.text
    assert contents(spark, table)[7] == (False, "changed", None)
    assert spark.sql(f"SELECT count(*) AS n FROM {table}.delete_files").first().n == 1
