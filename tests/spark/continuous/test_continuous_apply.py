"""The continuous apply job in the test's Spark session: windows applied as they land, held, replayed, stopped."""

from __future__ import annotations

import decimal
import json
from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, snapshot_count
from window_builder import ChangeLog, WindowSpec, flatten, write_window

from airflow_provider_sqlserver_cdc.spark.continuous.job import (
    ContinuousApply,
    ContinuousSettings,
    run_continuously,
)
from airflow_provider_sqlserver_cdc.spark.continuous.lock import ApplyLockError
from airflow_provider_sqlserver_cdc.spark.continuous.published_state import (
    APPLIED,
    FAILED,
    ApplyLock,
    ApplyState,
    RunWindow,
    lock_uri,
    run_progress,
    run_result,
    state_uri,
)
from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings

pytestmark = [pytest.mark.spark]
D = decimal.Decimal


def settings(staging: Path, namespace: str) -> ContinuousSettings:
    return ContinuousSettings(str(staging), MergeJobSettings((), namespace=namespace), poll_seconds=0.1)


def published(staging: Path) -> ApplyState:
    return ApplyState.from_json(Path(state_uri(str(staging))).read_text())


def run_window(manifest: str) -> RunWindow:
    data = json.loads(Path(manifest).read_text())
    return RunWindow.from_bounds(
        data["capture_instance"], data["kind"], data["from_lsn"], data["to_lsn"], data.get("applied_through")
    )


def as_run(manifest: str) -> tuple[str, str, str | None]:
    """A window as the waiting task gives it to run_result: capture instance, label, its manifest's created_at."""
    data = json.loads(Path(manifest).read_text())
    return (
        data["capture_instance"],
        f"{data['capture_instance']} {data['from_lsn']}_{data['to_lsn']}",
        data["created_at"],
    )


def current_snapshot(spark: Any, table: str) -> str:
    return str(
        spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    )


def test_windows_apply_as_they_land_a_successor_waits_for_its_predecessor_and_replays_change_nothing(
    spark: Any, staging: Path, namespace: str
) -> None:
    table = f"{namespace}.dbo_orders"
    log = ChangeLog()
    first = flatten([log.insert(id=k, name=f"n{k}", amount=D(k)) for k in (1, 2, 3)])
    w1 = write_window(staging, WindowSpec("dbo_orders", 0x100, log.lsn, first))
    end1 = log.lsn
    customers = write_window(
        staging,
        WindowSpec("sales_customers", 0x1000, 0x10FF, ChangeLog(0x1000).insert(id=7, name="x", amount=None)),
    )
    apply = ContinuousApply(spark, settings(staging, namespace))
    assert apply.poll() == 2
    state = published(staging)
    assert state.last_batch["windows"] == 2 and state.last_batch["tables"] == 2
    assert (
        run_progress(state, None, [run_window(w1), run_window(customers)], staging=str(staging)).status
        == APPLIED
    )

    # The next run's window lands after the one after it: the later one waits for its predecessor.
    log.lsn = 0x200
    second = flatten([log.update({"id": 2, "name": "n2", "amount": D(2)}, name="changed")])
    end2 = log.lsn
    log.lsn = 0x300
    third = flatten([log.delete(id=3, name="n3", amount=D(3)), log.insert(id=4, name="n4", amount=None)])
    w3 = write_window(staging, WindowSpec("dbo_orders", 0x300, log.lsn, third, applied_through=end2))
    assert apply.poll() == 0
    state = published(staging)
    assert [(h["label"].split()[0], h["waits_for"]) for h in state.held] == [("dbo_orders", f"0x{end2:020X}")]
    progress = run_progress(state, None, [run_window(w3)], staging=str(staging))
    assert progress.status == "waiting"
    assert "held back: dbo_orders" in progress.message and "DOWN" in progress.message
    before = snapshot_count(spark, table)
    w2 = write_window(staging, WindowSpec("dbo_orders", 0x200, end2, second, applied_through=end1))
    assert apply.poll() == 2
    assert snapshot_count(spark, table) == before + 1  # both windows in one commit
    expected = {
        1: (False, "n1", D(1)),
        2: (False, "changed", D(2)),
        3: (True, "n3", D(3)),
        4: (False, "n4", None),
    }
    assert contents(spark, table) == expected
    state = published(staging)
    assert state.held == []
    assert (
        run_progress(state, None, [run_window(w) for w in (w1, w2, w3)], staging=str(staging)).status
        == APPLIED
    )
    entry = state.tables[table]
    assert entry["rows"]["update_after"] == 1 and entry["snapshot_id"] > 0
    # The waiting task's asset events: the snapshot that applied the run's last window, and which windows
    # this extraction brought (a run of w1 alone names the first micro-batch's snapshot, not the newest).
    both = current_snapshot(spark, table)
    assert run_result(state, [as_run(w2), as_run(w3)])[table] == {
        "status": "committed",
        "applied": [as_run(w2)[1], as_run(w3)[1]],
        "version": both,
        "seconds": entry["seconds"],
    }
    first_snapshot = run_result(state, [as_run(w1)])[table]["version"]
    assert first_snapshot not in (None, both)

    # A re-extracted window (a retry rewrites its manifest) and an older backfill change nothing.
    write_window(staging, WindowSpec("dbo_orders", 0x100, end1, first))
    assert apply.poll() == 0
    again_w1 = run_result(published(staging), [as_run(w1)])[table]
    assert again_w1 == {"status": "committed", "applied": [], "version": first_snapshot, "seconds": None}
    old = ChangeLog(0x50)
    write_window(
        staging,
        WindowSpec(
            "dbo_orders", 0x50, 0x60, old.update({"id": 1, "name": "n1", "amount": D(1)}, name="stale")
        ),
    )
    assert apply.poll() == 1
    assert contents(spark, table) == expected  # the LSN guard: an older change never replaces a newer one
    assert (
        published(staging)
        .tables[table]["applied_lsn_ranges"]["dbo_orders"]
        .startswith("0x00000000000000000050-")
    )

    # A restart resumes from what the tables hold: nothing is applied again.
    again = ContinuousApply(spark, settings(staging, namespace))
    snapshots = snapshot_count(spark, table)
    assert again.poll() == 0
    assert snapshot_count(spark, table) == snapshots


def test_a_table_whose_window_cannot_be_applied_stops_alone_with_its_error_published(
    spark: Any, staging: Path, namespace: str
) -> None:
    log = ChangeLog()
    bad = write_window(
        staging, WindowSpec("dbo_orders", 0x100, 0x1FF, log.insert(id=1, name="a", amount=None))
    )
    part = next(Path(bad).parent.glob("part-*.parquet"))
    part.write_bytes(part.read_bytes()[:-10])  # a corrupt (cut short) file
    good = write_window(
        staging,
        WindowSpec("sales_customers", 0x1000, 0x10FF, ChangeLog(0x1000).insert(id=7, name="x", amount=None)),
    )
    apply = ContinuousApply(spark, settings(staging, namespace))
    apply.poll()
    state = published(staging)
    orders = state.tables[f"{namespace}.dbo_orders"]
    assert orders["status"] == FAILED and "bytes, the manifest says" in orders["error"]
    assert state.tables[f"{namespace}.sales_customers"]["status"] == "committed"
    assert run_progress(state, None, [run_window(good)], staging=str(staging)).status == APPLIED
    progress = run_progress(state, None, [run_window(bad)], staging=str(staging))
    assert progress.status == FAILED
    assert f"target table {namespace}.dbo_orders is stopped:" in progress.message
    assert "restart the apply application" in progress.message
    # Stopped until a restart: later polls leave it alone; a restart (after the fix) applies it.
    assert apply.poll() == 0
    write_window(
        staging, WindowSpec("dbo_orders", 0x100, 0x1FF, ChangeLog().insert(id=1, name="a", amount=None))
    )
    assert apply.poll() == 0
    assert ContinuousApply(spark, settings(staging, namespace)).poll() == 1
    assert contents(spark, f"{namespace}.dbo_orders") == {1: (False, "a", None)}


def test_a_second_application_on_the_staging_path_refuses_to_start(
    spark: Any, staging: Path, namespace: str
) -> None:
    lock = Path(lock_uri(str(staging)))
    lock.parent.mkdir(parents=True)
    from airflow_provider_sqlserver_cdc.spark.continuous.published_state import utc_now

    now = utc_now().isoformat()
    lock.write_text(ApplyLock("app-other", "elsewhere", 4242, now, now, 60.0).to_json())
    with pytest.raises(ApplyLockError) as raised:
        run_continuously(spark, settings(staging, namespace), stop=lambda: True)
    assert "another continuous apply application holds staging path" in str(raised.value)
    assert "application app-other (driver pid 4242 on elsewhere" in str(raised.value)
    assert "stop the other one first" in str(raised.value)

    # A lock whose heartbeat is stale (its holder was killed) is taken over, and released at the end.
    lock.write_text(
        ApplyLock("app-other", "elsewhere", 4242, now, "2020-01-01T00:00:00+00:00", 60.0).to_json()
    )
    run_continuously(spark, settings(staging, namespace), stop=lambda: True)
    assert not lock.exists()


def test_the_heartbeat_goes_on_during_a_long_micro_batch(
    spark: Any, staging: Path, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    beats: list[str] = []

    def slow_poll(self: ContinuousApply) -> int:
        for _ in range(4):  # a micro-batch four times longer than the lock's staleness
            time.sleep(0.25)
            beats.append(ApplyLock.from_json(Path(lock_uri(str(staging))).read_text()).heartbeat_at)
        return 0

    monkeypatch.setattr(ContinuousApply, "poll", slow_poll)
    quick = ContinuousSettings(
        str(staging), MergeJobSettings((), namespace=namespace), poll_seconds=0.05, stale_after_seconds=0.2
    )
    run_continuously(spark, quick, stop=lambda: True)
    assert len(set(beats)) >= 3, beats  # renewed while the poll ran
