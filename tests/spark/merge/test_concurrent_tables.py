"""Several target tables merged at once (``--concurrent-tables``): exact, and one failure stops no other table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from merge_runs import EXPECTED_AFTER_TWO, contents, run, two_windows
from window_builder import ChangeLog, WindowSpec, write_window

from airflow_provider_sqlserver_cdc.spark.merge.errors import TableMergeError
from airflow_provider_sqlserver_cdc.window.manifest import ManifestError

pytestmark = pytest.mark.spark


def test_tables_merged_at_once_commit_exactly_and_a_failed_one_stops_no_other(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    w1, w2 = two_windows(base)
    customers = write_window(
        base,
        WindowSpec("sales_customers", 0x1000, 0x10FF, ChangeLog(0x1000).insert(id=7, name="x", amount=None)),
    )
    notes = write_window(
        base, WindowSpec("sales_notes", 0x2000, 0x20FF, ChangeLog(0x2000).insert(id=1, name="n", amount=None))
    )
    doc = json.loads(Path(notes).read_text())
    doc["files"][0]["rows"] += 1
    doc["row_count"] += 1
    doc["operation_counts"]["insert"] += 1
    Path(notes).write_text(json.dumps(doc))  # a corrupt window: its files hold fewer rows than it says

    with pytest.raises(TableMergeError) as raised:
        run(spark, namespace, w1, customers, notes, w2, concurrent_tables=3)
    notes_table = f"{namespace}.sales_notes"
    assert raised.value.failed_tables == [notes_table]
    assert isinstance(raised.value.failures[notes_table], ManifestError)
    assert raised.value.result[table]["status"] == "committed"
    assert contents(spark, table) == EXPECTED_AFTER_TWO
    assert contents(spark, f"{namespace}.sales_customers") == {7: (False, "x", None)}
    assert not spark.catalog.tableExists(notes_table)
