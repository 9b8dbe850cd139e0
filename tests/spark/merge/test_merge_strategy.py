"""The rewrite strategy gives the MERGE's table; ``auto`` rewrites for a heavy window and MERGEs a light one."""

from __future__ import annotations

import decimal
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from merge_runs import EXPECTED_AFTER_TWO, contents, rows_then_a_few_changes, run, snapshot_count, two_windows
from window_builder import ChangeLog, WindowSpec, flatten, lsn_hex, write_window

from airflow_provider_sqlserver_cdc.spark.merge import merge_strategy
from airflow_provider_sqlserver_cdc.spark.merge.errors import is_commit_conflict
from airflow_provider_sqlserver_cdc.spark.merge.executed_plan import MERGE_REPORT_ATTRIBUTE, MergeReport
from airflow_provider_sqlserver_cdc.spark.merge.net_effect_frame import net_effect_frame
from airflow_provider_sqlserver_cdc.spark.merge.table_rewrite import (
    current_snapshot_id,
    overwrite_table,
    rewrite_sql,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table
from airflow_provider_sqlserver_cdc.spark.merge.temporary_view import temporary_view
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import load_window, read_window

pytestmark = pytest.mark.spark

#: (strategy, write mode) of the tables compared: the MERGE's table is the reference. The rewrite
#: writes alike in both modes (an overwrite of every file), so the mode only names the table's later MERGEs.
ARMS = (("merge", "merge-on-read"), ("rewrite", "merge-on-read"), ("rewrite", "copy-on-write"))


@pytest.fixture
def merge_reports(caplog: pytest.LogCaptureFixture) -> Callable[[], list[MergeReport]]:
    """Return the reports of the MERGEs (and rewrites) run so far in the test."""
    caplog.set_level(logging.INFO, logger="sqlserver_cdc.merge_job")
    return lambda: [
        getattr(r, MERGE_REPORT_ATTRIBUTE) for r in caplog.records if hasattr(r, MERGE_REPORT_ATTRIBUTE)
    ]


def all_columns(spark: Any, table: str) -> dict[Any, dict[str, Any]]:
    """key -> every column of the row, LSN columns included."""
    return {r["id"]: r.asDict() for r in spark.table(table).collect()}


def arm_namespace(namespace: str, strategy: str, write_mode: str) -> str:
    return f"{namespace}_{strategy}_{write_mode.replace('-', '_')}"


def test_rewrite_gives_the_merge_s_table_for_out_of_order_windows_and_replays(
    spark: Any, base: Path, namespace: str, merge_reports: Callable[[], list[MergeReport]]
) -> None:
    w1, w2 = two_windows(base)
    for strategy, write_mode in ARMS:
        # The newer window first (it creates the table), then the older one (a backfill): the LSN guard.
        for window in (w2, w1):
            options = {"write_mode": write_mode, "merge_strategy": strategy}
            run(spark, arm_namespace(namespace, strategy, write_mode), window, **options)
    # A window overlapping the applied ranges is merged again: the guard makes it a no-op.
    doc = json.loads(Path(w2).read_text())
    doc["from_lsn"] = lsn_hex(0x50)
    Path(w2).write_text(json.dumps(doc))
    tables = []
    for strategy, write_mode in ARMS:
        ns = arm_namespace(namespace, strategy, write_mode)
        run(spark, ns, w2, write_mode=write_mode, merge_strategy=strategy)
        tables.append(f"{ns}.dbo_orders")
    assert contents(spark, tables[0]) == EXPECTED_AFTER_TWO
    assert all_columns(spark, tables[1]) == all_columns(spark, tables[0])
    assert all_columns(spark, tables[2]) == all_columns(spark, tables[0])
    strategies = {r.table: r.strategy for r in merge_reports()}
    assert [strategies[t].startswith("rewrite") for t in tables] == [False, True, True]


def test_rewrite_gives_the_merge_s_table_under_hard_deletes(spark: Any, base: Path, namespace: str) -> None:
    w1, w2 = two_windows(base)
    log = ChangeLog(start=0x9000)
    third = flatten(
        [
            log.delete(id=2, name="bb", amount=None),
            log.insert(id=3, name="back", amount=None),  # deleted in w2, inserted again
            log.insert(id=5, name="e", amount=None),
            log.delete(id=5, name="e", amount=None),  # inserted and deleted within the window
        ]
    )
    w3 = write_window(base, WindowSpec("dbo_orders", 0x9000, log.lsn, third))
    tables = []
    for strategy, write_mode in (ARMS[0], ARMS[2]):
        ns = arm_namespace(namespace, strategy, write_mode)
        options = {"write_mode": write_mode, "merge_strategy": strategy, "delete_mode": "hard"}
        run(spark, ns, w1, **options)
        run(spark, ns, w2, w3, **options)
        tables.append(f"{ns}.dbo_orders")
    assert all_columns(spark, tables[1]) == all_columns(spark, tables[0])
    assert sorted(contents(spark, tables[1])) == [3, 4, 10]


def test_auto_rewrites_for_a_heavy_window_and_merges_a_light_one(
    spark: Any,
    base: Path,
    namespace: str,
    table: str,
    merge_reports: Callable[[], list[MergeReport]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same rule as on large tables (test_strategy_choice), with the floor on the target's size lowered."""
    monkeypatch.setattr(merge_strategy, "REWRITE_MIN_TARGET_ROWS", 100)
    first, light = rows_then_a_few_changes(base)
    run(spark, namespace, first)
    spark.sql(f"UPDATE {table} SET name = 'x' WHERE id = 1")  # merge-on-read: a delete file to drop
    spark.sql(f"UPDATE {table} SET name = 'n1' WHERE id = 1")
    run(spark, namespace, light)
    report = merge_reports()[-1]
    assert not report.strategy.startswith("rewrite"), report
    assert f"{table}: MERGE, not a rewrite: 3 change rows = 1.5% of 202 target rows" in caplog.text

    log = ChangeLog(start=0x5000)
    changes = flatten(
        log.update({"id": k, "name": f"n{k}", "amount": None}, name="heavy") for k in range(1, 121)
    )
    heavy = write_window(base, WindowSpec("dbo_orders", 0x5000, log.lsn, changes))
    snapshots = snapshot_count(spark, table)
    run(spark, namespace, heavy)
    report = merge_reports()[-1]
    assert report.strategy == "rewrite, net effect broadcast", report
    assert report.shuffles.table_scanned
    assert "240 change rows = " in report.reason and "1 of 1 data files" not in report.reason
    values = contents(spark, table)
    assert values[7] == (False, "heavy", None) and values[150] == (False, "n150", None)
    assert values[300] == (False, None, None)
    # One commit, carrying the applied LSN ranges; the delete files are gone with their data files.
    assert snapshot_count(spark, table) == snapshots + 1
    newest = spark.sql(f"SELECT operation, summary FROM {table}.snapshots ORDER BY committed_at DESC").first()
    assert newest.operation == "overwrite"
    assert newest.summary["sqlserver-cdc.max-applied-lsn.dbo_orders"] == lsn_hex(log.lsn)
    assert spark.sql(f"SELECT count(*) AS n FROM {table}.delete_files").first().n == 0


def test_a_rewrite_fails_as_a_commit_conflict_when_another_writer_committed_since_its_snapshot(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    first, _ = rows_then_a_few_changes(base)
    run(spark, namespace, first)
    read_at = current_snapshot_id(iceberg_table(spark, table))
    rows = spark.table(table).where("id <= 10").localCheckpoint()
    spark.sql(f"UPDATE {table} SET name = 'concurrent' WHERE id = 20")  # another writer commits
    with pytest.raises(Exception) as raised:
        overwrite_table(rows, table, read_at)
    assert is_commit_conflict(raised.value), raised.value
    assert spark.table(table).count() == 200


def test_the_narrow_and_the_column_by_column_rewrite_give_the_same_rows(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    """The rewrite replaces whole rows when the window writes every column, else fills the others from the target."""
    w1, w2 = two_windows(base)
    run(spark, namespace, w1)
    target_columns = [(f.name, f.dataType.simpleString()) for f in spark.table(table).schema.fields]
    changes = read_window(spark, load_window(spark, w2), table)
    columns = [c for c in changes.columns if not c.startswith("_cdc_")]
    with temporary_view(net_effect_frame(changes, ["id"]), "rewrite_source") as view:
        for hard in (False, True):
            queries = [
                rewrite_sql(table, target_columns, view, columns, ["id"], hard, broadcast=True),
                # A column the window lacks: the column-by-column form (its value kept from the target).
                rewrite_sql(table, target_columns, view, columns[:-1], ["id"], hard, broadcast=False),
            ]
            narrow, wide = ({r.id: r for r in spark.sql(q).collect()} for q in queries)
            assert narrow.keys() == wide.keys() == ({2, 4, 10} if hard else {1, 2, 3, 4, 10})
            new_keys = {4, 10}  # not in the target: the wide form has no value for the missing column
            assert {k: r.asDict() for k, r in narrow.items() if k not in new_keys} == {
                k: r.asDict() for k, r in wide.items() if k not in new_keys
            }
            assert (narrow[10].amount, wide[10].amount) == (decimal.Decimal("1.00"), None)
