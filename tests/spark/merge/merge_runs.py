"""Merge runs for the Spark tests of the merge job: run the job, read a target back, the usual windows."""

from __future__ import annotations

import decimal
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from window_builder import ChangeLog, WindowSpec, flatten, write_window

from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.errors import TableMergeError
from airflow_provider_sqlserver_cdc.spark.merge.job import run as run_job


def run(spark: Any, namespace: str, *manifests: str, **options: Any) -> dict[str, Any]:
    return run_job(spark, MergeJobSettings(manifests=tuple(manifests), namespace=namespace, **options))


@contextmanager
def merge_fails(table: str, error: type[BaseException], match: str) -> Iterator[pytest.ExceptionInfo]:
    """Expect the run to fail for ``table`` only, with ``error`` whose message matches ``match``."""
    with pytest.raises(TableMergeError) as raised:
        yield raised
    assert raised.value.failed_tables == [table]
    assert isinstance(raised.value.failures[table], error), raised.value.failures[table]
    assert re.search(match, str(raised.value.failures[table])), str(raised.value.failures[table])
    assert re.search(match, str(raised.value))  # the job's error carries the table's reason
    assert raised.value.result[table]["status"] == "failed"


def contents(spark: Any, table: str) -> dict[Any, tuple]:
    """key -> (deleted, values...) without the LSN columns."""
    frame = spark.table(table)
    columns = [c for c in frame.columns if not c.startswith("_cdc_") and c != "id"]
    return {r["id"]: (r["_cdc_deleted"], *[r[c] for c in columns]) for r in frame.collect()}


def snapshot_count(spark: Any, table: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").first().n


def two_windows(base: Path) -> tuple[str, str]:
    log = ChangeLog()
    first = flatten(
        [
            log.insert(id=1, name="a", amount=decimal.Decimal("1.00")),
            log.insert(id=2, name="b", amount=decimal.Decimal("2.00")),
            log.insert(id=3, name="c", amount=decimal.Decimal("3.00")),
        ]
    )
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, first))
    start = log.lsn + 1
    second = flatten(
        [
            log.update({"id": 2, "name": "b", "amount": decimal.Decimal("2.00")}, name="bb"),
            log.delete(id=3, name="c", amount=decimal.Decimal("3.00")),
            log.insert(id=4, name="d", amount=None),
            log.update({"id": 1, "name": "a", "amount": decimal.Decimal("1.00")}, id=10),
        ]
    )
    w2 = write_window(base, WindowSpec("dbo_orders", start, log.lsn, second))
    return w1, w2


EXPECTED_AFTER_TWO = {
    1: (True, "a", decimal.Decimal("1.00")),
    2: (False, "bb", decimal.Decimal("2.00")),
    3: (True, "c", decimal.Decimal("3.00")),
    4: (False, "d", None),
    10: (False, "a", decimal.Decimal("1.00")),
}


def rows_then_a_few_changes(base: Path) -> tuple[str, str]:
    """Write two windows: inserts of ids 1-200, then an update of id 7 and an insert of id 300."""
    log = ChangeLog()
    first = flatten(log.insert(id=k, name=f"n{k}", amount=None) for k in range(1, 201))
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, first))
    start = log.lsn + 1
    second = flatten(
        [log.update({"id": 7, "name": "n7", "amount": None}, name="changed"), log.insert(id=300)]
    )
    return w1, write_window(base, WindowSpec("dbo_orders", start, log.lsn, second))
