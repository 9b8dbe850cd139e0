"""The partitioning of the tables the job creates: how many key buckets, and the clause."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.spark.merge.partition_layout import (
    MAX_BUCKETS,
    bucket_count,
    creation_partitioning,
)


@pytest.mark.parametrize(
    ("rows", "parallelism", "setting", "expected"),
    [
        (0, 2, None, 2),  # at least one bucket a core: a bucket is one task of the MERGE
        (5_000_000, 2, None, 8),  # one bucket per million rows, rounded up to a power of two
        (1_000_001, 2, None, 2),
        (3_000_000, 16, None, 16),
        (10**12, 2, None, MAX_BUCKETS),
        (5_000_000, 2, 3, 3),  # the setting wins
        (5_000_000, 2, 0, 0),  # 0: unpartitioned
    ],
)
def test_bucket_count(rows: int, parallelism: int, setting: int | None, expected: int) -> None:
    assert bucket_count(rows, parallelism, setting) == expected


def test_creation_partitioning_buckets_the_first_key_column() -> None:
    assert creation_partitioning(("region", "id"), 8) == " PARTITIONED BY (bucket(8, `region`))"
    assert creation_partitioning(("id",), 0) == ""
