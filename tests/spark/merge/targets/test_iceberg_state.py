"""The applied state of an Iceberg target survives Iceberg's maintenance, run by anyone, and stops when it cannot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, run, snapshot_count
from window_builder import rolling_windows

from airflow_provider_sqlserver_cdc.spark.merge.errors import TableMergeError
from airflow_provider_sqlserver_cdc.spark.merge.targets import iceberg as iceberg_target
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table, recorded_state
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg_state import (
    SUMMARY_MAX_LSN,
    AppliedStateLostError,
    merge_markers,
    refresh_state,
)

pytestmark = pytest.mark.spark


def _call(spark: Any, table: str, procedure: str, *arguments: str) -> None:
    catalog, _, name = table.partition(".")
    spark.sql(f"CALL {catalog}.system.{procedure}(table => '{name}'{''.join(', ' + a for a in arguments)})")


def rewrite_data_files(spark: Any, table: str) -> None:
    _call(spark, table, "rewrite_data_files", "options => map('rewrite-all', 'true')")


def rewrite_position_delete_files(spark: Any, table: str) -> None:
    _call(spark, table, "rewrite_position_delete_files", "options => map('rewrite-all', 'true')")


def rewrite_manifests(spark: Any, table: str) -> None:
    _call(spark, table, "rewrite_manifests")


def expire_all_but_current(spark: Any, table: str) -> None:
    """Iceberg's ExpireSnapshots, as ``expire_snapshots(retain_last => 1)`` runs it, without its Spark job."""
    iceberg_table(spark, table).expireSnapshots().expireOlderThan(32503680000000).retainLast(1).commit()


def remove_orphan_files(spark: Any, table: str) -> None:
    # The procedure refuses an age under a day; the action API (what it runs) takes any.
    jvm = spark.sparkContext._jvm
    action = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    action.deleteOrphanFiles(iceberg_table(spark, table)).olderThan(32503680000000).execute()


#: Each maintenance action, then expiry of every snapshot but the current one (which removes
#: every snapshot whose summary carried the state once a rewrite has committed).
MAINTENANCE: list[tuple[str, Callable[[Any, str], None]]] = [
    ("rewrite_data_files", rewrite_data_files),
    ("rewrite_position_delete_files", rewrite_position_delete_files),
    ("rewrite_manifests", rewrite_manifests),
    ("remove_orphan_files", remove_orphan_files),
]


def _max_lsn(spark: Any, table: str) -> str:
    return recorded_state(spark, table).entries[SUMMARY_MAX_LSN + "dbo_orders"]


def _windows(base: Path, count: int) -> list[str]:
    """Windows of 8 keys each: inserts, then updates and deletes of the previous window's keys."""
    return rolling_windows(base, count, keys=8, updates=3, deletes=2)


#: Every delete mode with every write mode: what a rewrite does to the files differs (copy-on-write has no
#: delete files; soft deletes keep tombstones that a replay must not undo, hard deletes nothing).
@pytest.mark.parametrize("write_mode", ["merge-on-read", "copy-on-write"])
@pytest.mark.parametrize("delete_mode", ["soft", "hard"])
def test_replays_after_each_maintenance_action_are_skipped(
    spark: Any, base: Path, namespace: str, table: str, delete_mode: str, write_mode: str
) -> None:
    windows = _windows(base, len(MAINTENANCE) + 1)
    options = {"delete_mode": delete_mode, "write_mode": write_mode}
    run(spark, namespace, windows[0], **options)
    max_lsns = [_max_lsn(spark, table)]
    for number, (action_name, action) in enumerate(MAINTENANCE, start=1):
        run(spark, namespace, windows[number], **options)
        action(spark, table)
        expire_all_but_current(spark, table)
        before, snapshots = contents(spark, table), snapshot_count(spark, table)
        state = recorded_state(spark, table)
        if iceberg_table(spark, table).currentSnapshot().operation() == "replace":  # the action committed
            assert state.source.startswith("table properties"), (action_name, state.source)
        max_lsns.append(state.entries[SUMMARY_MAX_LSN + "dbo_orders"])
        # Every window so far again, oldest and newest: all skipped, no commit, nothing changes.
        result = run(spark, namespace, *windows[: number + 1], **options)
        assert result[table]["applied"] == [], (action_name, result)
        assert len(result[table]["skipped"]) == number + 1
        assert contents(spark, table) == before, action_name
        assert snapshot_count(spark, table) == snapshots, action_name
        assert _max_lsn(spark, table) == max_lsns[-1]
    assert max_lsns == sorted(max_lsns) and len(set(max_lsns)) == len(max_lsns)
    live = {k for k, row in contents(spark, table).items() if not row[0]}
    last = len(MAINTENANCE)
    # Every window's keys but those the next window deleted.
    expected = set(range(last * 8, last * 8 + 8)) | {
        k for n in range(last) for k in range(n * 8, n * 8 + 8) if k % 8 not in (3, 4)
    }
    assert live == expected
    if delete_mode == "hard":
        assert len(contents(spark, table)) == len(expected)


def _interrupted_merge(
    spark: Any, base: Path, namespace: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """Merge w1, then w2 whose job dies after its commit, before it copies the state; compact; return w1-w3."""
    windows = _windows(base, 3)
    run(spark, namespace, windows[0], delete_mode="hard")
    with monkeypatch.context() as patched:
        patched.setattr(iceberg_target, "record_state", lambda *args, **kwargs: None)
        run(spark, namespace, windows[1], delete_mode="hard")
    assert merge_markers(iceberg_table(spark, table).properties())
    rewrite_data_files(spark, table)
    return windows


def test_an_interrupted_merge_whose_snapshots_were_expired_stops_the_next_merge(
    spark: Any, base: Path, namespace: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, w2, w3 = _interrupted_merge(spark, base, namespace, table, monkeypatch)
    expire_all_but_current(spark, table)
    before = contents(spark, table)
    with pytest.raises(TableMergeError) as raised:
        run(spark, namespace, w2, w3, delete_mode="hard")
    error = raised.value.failures[table]
    assert isinstance(error, AppliedStateLostError)
    assert "was interrupted" in str(error) and "ALTER TABLE" in str(error)
    assert contents(spark, table) == before  # nothing merged, nothing brought back


def test_the_maintenance_refresh_before_expiry_heals_an_interrupted_merge(
    spark: Any, base: Path, namespace: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    windows = _interrupted_merge(spark, base, namespace, table, monkeypatch)
    refresh_state(iceberg_table(spark, table), table)  # what the provider's maintenance does first
    assert not merge_markers(iceberg_table(spark, table).properties())
    expire_all_but_current(spark, table)
    result = run(spark, namespace, *windows, delete_mode="hard")
    assert len(result[table]["skipped"]) == 2 and len(result[table]["applied"]) == 1


def test_a_table_without_any_state_copy_stops_once_its_summaries_are_expired(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    w1, w2 = _windows(base, 2)
    run(spark, namespace, w1)
    # As a table last merged by a provider version that kept the state in snapshot summaries only.
    properties = [str(k) for k in iceberg_table(spark, table).properties().keySet() if "applied" in str(k)]
    spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES ({', '.join(repr(k) for k in properties)})")
    rewrite_data_files(spark, table)
    expire_all_but_current(spark, table)
    with pytest.raises(TableMergeError, match="no retained snapshot") as raised:
        run(spark, namespace, w1, w2)
    assert isinstance(raised.value.failures[table], AppliedStateLostError)
    assert raised.value.result[table]["applied"] == []


def test_a_rollback_behind_the_recorded_state_is_read_from_the_retained_summary(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    w1, w2 = _windows(base, 2)
    run(spark, namespace, w1)
    first = iceberg_table(spark, table).currentSnapshot().snapshotId()
    run(spark, namespace, w2)
    catalog, _, name = table.partition(".")
    spark.sql(f"CALL {catalog}.system.rollback_to_snapshot('{name}', {first})")
    # The properties say w2 is applied; the data and its retained summary say it is not.
    result = run(spark, namespace, w1, w2)
    assert len(result[table]["applied"]) == 1 and len(result[table]["skipped"]) == 1


def test_a_merge_that_fails_before_its_commit_leaves_no_marker(
    spark: Any, base: Path, namespace: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    w1, w2 = _windows(base, 2)
    run(spark, namespace, w1)

    def conflict(*args: Any) -> None:
        raise RuntimeError("org.apache.iceberg.exceptions.ValidationException: found conflicting files")

    with monkeypatch.context() as patched:
        patched.setattr(iceberg_target.IcebergTarget, "_merge_changes", conflict)
        with pytest.raises(TableMergeError):
            run(spark, namespace, w2)
    # Else a later expiry would leave a marker no retained snapshot explains, and merges would stop.
    assert not merge_markers(iceberg_table(spark, table).properties())


class _CountingTable:
    """Iceberg's Java ``Table`` that counts the snapshots asked for by id (walks of the history)."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self.snapshots_read = 0

    def snapshot(self, snapshot_id: Any) -> Any:
        self.snapshots_read += 1
        return self._table.snapshot(snapshot_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def test_reading_the_state_does_not_walk_a_long_history(spark: Any, namespace: str) -> None:
    """A minutely DAG retains 1,440 snapshots a day: a read stops at the newest one with the state."""
    from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg_state import (
        newest_summary_state,
        read_state,
    )

    table = f"{namespace}.long_history"
    spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg")
    iceberg = iceberg_table(spark, table)
    for _ in range(50):  # other writers' commits, without the state
        iceberg.newFastAppend().commit()
    for last in (100, 201):  # two merges: the newest state is the current snapshot's
        append = iceberg.newFastAppend()
        for key, value in iceberg_target.summary_properties({"dbo_t": [(0, last)]}).items():
            append = append.set(key, value)
        append.commit()
    counting = _CountingTable(iceberg_table(spark, table))
    assert read_state(counting, table).entries == recorded_state(spark, table).entries
    assert newest_summary_state(counting) is not None
    assert counting.snapshots_read == 0
    iceberg.newFastAppend().commit()  # a compaction after the merge: one step back
    counting = _CountingTable(iceberg_table(spark, table))
    assert iceberg_target.ranges_in_state(read_state(counting, table).entries) == {"dbo_t": [(0, 201)]}
    assert counting.snapshots_read == 1
