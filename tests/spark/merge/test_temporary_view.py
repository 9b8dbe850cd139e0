"""Tests of the merge's temporary views: one per merge, so merges sharing a session never read each other's rows."""

from __future__ import annotations

import threading
from typing import Any

from airflow_provider_sqlserver_cdc.spark.merge.temporary_view import temporary_view, unique_view_name


def test_view_names_are_unique_valid_identifiers() -> None:
    names = {unique_view_name("sqlserver_cdc_merge_source") for _ in range(1000)}
    assert len(names) == 1000
    assert all(name.startswith("sqlserver_cdc_merge_source_") and name.isidentifier() for name in names)


def test_two_views_open_at_once_keep_their_own_rows_and_are_dropped(spark: Any) -> None:
    first, second = spark.range(0, 3), spark.range(10, 12)
    with temporary_view(first, "merge_source") as a, temporary_view(second, "merge_source") as b:
        assert a != b
        assert sorted(r.id for r in spark.sql(f"SELECT id FROM {a}").collect()) == [0, 1, 2]
        assert sorted(r.id for r in spark.sql(f"SELECT id FROM {b}").collect()) == [10, 11]
    assert not spark.catalog.tableExists(a)
    assert not spark.catalog.tableExists(b)


def test_threads_of_one_session_read_their_own_view(spark: Any) -> None:
    """The failure this prevents: with one fixed name, a thread's MERGE read the other thread's source."""
    barrier = threading.Barrier(4)
    seen: dict[int, list[int]] = {}

    def work(n: int) -> None:
        with temporary_view(spark.range(n * 100, n * 100 + 5), "merge_source") as view:
            barrier.wait()  # every thread's view exists before any reads
            seen[n] = sorted(r.id for r in spark.sql(f"SELECT id FROM {view}").collect())

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {n: list(range(n * 100, n * 100 + 5)) for n in range(4)}


def test_view_is_dropped_when_the_block_fails(spark: Any) -> None:
    name = ""
    try:
        with temporary_view(spark.range(1), "merge_source") as name:
            raise RuntimeError("the MERGE failed")
    except RuntimeError:
        pass
    assert name and not spark.catalog.tableExists(name)
