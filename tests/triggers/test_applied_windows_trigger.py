"""AppliedWindowsTrigger and WaitForAppliedWindowsOperator: what the continuous apply application published, read back."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from airflow.exceptions import AirflowException
from airflow.sdk.exceptions import TaskDeferred
from manifest_columns import int_key_column

from airflow_provider_sqlserver_cdc.operators.continuous_apply import WaitForAppliedWindowsOperator
from airflow_provider_sqlserver_cdc.spark.continuous.published_state import (
    ApplyLock,
    ApplyState,
    RunWindow,
    lock_uri,
    state_uri,
    utc_now,
)
from airflow_provider_sqlserver_cdc.triggers.applied_windows import AppliedWindowsTrigger

LSN = "0x{:020X}".format


def empty_window(
    staging: Path, source: dict[str, str], manifest_extra: dict[str, Any] | None = None, **window_fields: Any
) -> Any:
    """Write the manifest of an empty ``dbo_orders`` window 0x101..0x200 (one int key ``id``) under
    ``staging``; return its ``ChangeWindow`` (state key ``k``, with ``window_fields``)."""
    from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

    window_dir = staging / "dbo_orders" / f"{LSN(0x101)}_{LSN(0x200)}"
    window_dir.mkdir(parents=True)
    manifest = {
        "format_version": 1,
        "kind": "changes",
        "capture_instance": "dbo_orders",
        "source": source,
        "from_lsn": LSN(0x101),
        "to_lsn": LSN(0x200),
        "from_time": None,
        "to_time": None,
        "mode": "interval",
        "row_filter_option": "all update old",
        "key_columns": ["id"],
        "columns": [int_key_column("id")],
        "files": [],
        "row_count": 0,
        "operation_counts": {"delete": 0, "insert": 0, "update_before": 0, "update_after": 0},
        **(manifest_extra or {}),
    }
    (window_dir / "_manifest.json").write_text(json.dumps(manifest))
    return ChangeWindow(
        "dbo_orders",
        source,
        "changes",
        "interval",
        LSN(0x101),
        LSN(0x200),
        str(window_dir),
        str(window_dir / "_manifest.json"),
        "k",
        **window_fields,
    )


WINDOW = RunWindow("dbo_orders", 0x101, 0x200, f"dbo_orders {LSN(0x101)}_{LSN(0x200)}")


def trigger(staging: Path, timeout_at: str = "2999-01-01T00:00:00+00:00") -> AppliedWindowsTrigger:
    return AppliedWindowsTrigger(
        staging_path=str(staging), windows=[WINDOW.to_dict()], poll_interval=0.05, timeout_at=timeout_at
    )


def first_event(t: AppliedWindowsTrigger) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in t.run():
            return event.payload
        raise AssertionError("no event")

    return asyncio.run(first())


def publish(staging: Path, ranges: str, *, status: str = "committed", error: str | None = None) -> None:
    state = ApplyState(
        application_id="app-1",
        updated_at=utc_now().isoformat(),
        tables={
            "lake.cdc.dbo_orders": {
                "status": status,
                "applied_lsn_ranges": {"dbo_orders": ranges},
                "error": error,
            }
        },
        capture_instances={"dbo_orders": "lake.cdc.dbo_orders"},
        last_batch={"number": 3, "windows": 1, "seconds": 1.5, "finished_at": "2026-11-28T15:00:00+00:00"},
    )
    Path(state_uri(str(staging))).parent.mkdir(parents=True, exist_ok=True)
    Path(state_uri(str(staging))).write_text(state.to_json())


def hold_lock(staging: Path, heartbeat_age_seconds: float, pid: int | None = None) -> None:
    beat = (utc_now() - dt.timedelta(seconds=heartbeat_age_seconds)).isoformat()
    lock = ApplyLock("app-1", socket.gethostname(), pid or os.getpid(), beat, beat, 60.0)
    Path(lock_uri(str(staging))).parent.mkdir(parents=True, exist_ok=True)
    Path(lock_uri(str(staging))).write_text(lock.to_json())


def test_serialize_round_trips_through_json_and_airflow_serde(tmp_path: Path) -> None:
    from airflow.sdk.serde import deserialize, serialize

    classpath, kwargs = trigger(tmp_path).serialize()
    assert classpath == "airflow_provider_sqlserver_cdc.triggers.applied_windows.AppliedWindowsTrigger"
    assert AppliedWindowsTrigger(**json.loads(json.dumps(kwargs))).serialize() == (classpath, kwargs)
    assert AppliedWindowsTrigger(**deserialize(serialize(kwargs))).serialize() == (classpath, kwargs)


def test_the_windows_applied_end_the_wait_with_the_ranges(tmp_path: Path) -> None:
    publish(tmp_path, f"{LSN(0x1)}-{LSN(0x250)}")
    payload = first_event(trigger(tmp_path))
    assert payload["status"] == "applied"
    assert payload["applied_lsn_ranges"] == {"dbo_orders": f"{LSN(0x1)}-{LSN(0x250)}"}


def test_a_stopped_table_fails_the_wait_at_once_with_its_error(tmp_path: Path) -> None:
    publish(
        tmp_path,
        f"{LSN(0x1)}-{LSN(0x100)}",
        status="failed",
        error="window dbo_orders ...: file part-00000.parquet has 90 bytes",
    )
    payload = first_event(trigger(tmp_path))
    assert payload["status"] == "failed"
    assert (
        "target table lake.cdc.dbo_orders is stopped: window dbo_orders ...: file part-00000"
        in payload["message"]
    )


def test_a_timeout_says_whether_the_application_is_down_or_behind(tmp_path: Path) -> None:
    past = (utc_now() - dt.timedelta(seconds=1)).isoformat()
    publish(tmp_path, f"{LSN(0x1)}-{LSN(0x100)}")
    message = first_event(trigger(tmp_path, past))["message"]
    assert (
        f"not applied yet: {WINDOW.label} (the table holds {LSN(0x1)}-{LSN(0x100)} of dbo_orders)" in message
    )
    assert "the continuous apply application is DOWN: no application holds" in message
    assert "Start it" in message
    hold_lock(tmp_path, heartbeat_age_seconds=300)
    message = first_event(trigger(tmp_path, past))["message"]
    assert "is DOWN: application app-1" in message and "last reported 300 s ago" in message
    hold_lock(tmp_path, heartbeat_age_seconds=2)
    message = first_event(trigger(tmp_path, past))["message"]
    assert "is BEHIND: application app-1" in message
    assert "its last micro-batch (3) applied 1 window(s) in 1.5 s" in message


def test_the_operator_defers_and_fails_loudly_on_a_timeout(tmp_path: Path) -> None:
    window = empty_window(tmp_path, {"server": "s", "database": "d", "schema": "dbo", "table": "orders"})
    operator = WaitForAppliedWindowsOperator(
        task_id="wait_for_apply",
        windows=[window.to_xcom(), None],
        staging_path=str(tmp_path),
        timeout_seconds=30,
    )
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute({"ti": None})
    assert deferred.value.trigger.windows == [WINDOW.to_dict()]
    with pytest.raises(AirflowException) as raised:
        operator.execute_complete(
            {}, {"status": "timeout", "message": "the continuous apply application is DOWN: ..."}
        )
    assert str(raised.value).startswith(
        f"wait_for_apply: the run's windows were not applied within 30 s (staging path {tmp_path}):\n"
        "the continuous apply application is DOWN"
    )

    class TaskInstance:
        pushed: dict[str, Any] = {}

        def xcom_push(self, key: str, value: Any) -> None:
            self.pushed[key] = value

    ti = TaskInstance()
    operator.execute_complete(
        {"ti": ti}, {"status": "applied", "applied_lsn_ranges": {"dbo_orders": "0x1-0x2"}}
    )
    # The ranges for the watermark commit, and the windows it waited for (what the commit takes).
    assert ti.pushed["applied_lsn_ranges"] == {"dbo_orders": "0x1-0x2"}
    assert [w["capture_instance"] for w in ti.pushed["merged_windows"]] == ["dbo_orders"]


def test_the_wait_emits_the_batch_merges_asset_event_from_what_the_application_published(
    tmp_path: Path,
) -> None:
    """Continuous mode's events: the snapshot that applied the window (not the table's newest), rows only once."""
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_provider_sqlserver_cdc.assets import target_asset

    created = "2026-11-28T15:00:01+00:00"
    source = {"server": "db1:1433", "database": "shop", "schema": "dbo", "table": "orders"}
    # its Parquet files are not needed here: the rows come from the extract's XCom
    window = empty_window(
        tmp_path,
        source,
        {"created_at": created},
        from_time="2026-11-28T14:59:00+00:00",
        to_time="2026-11-28T15:00:00+00:00",
        operation_counts={"delete": 1, "insert": 2},
    )
    table = "lake.cdc.dbo_orders"
    # The application applied the window in snapshot 111; a later micro-batch made 222 the table's newest.
    state = ApplyState(
        tables={
            table: {
                "status": "committed",
                "applied_lsn_ranges": {"dbo_orders": f"{LSN(0x1)}-{LSN(0x300)}"},
                "version": "222",
                "applied_windows": {
                    WINDOW.label: {
                        "snapshot_id": "111",
                        "manifest_created_at": created,
                        "applied_at": "2026-11-28T15:00:04+00:00",
                        "seconds": 2.5,
                    }
                },
            }
        },
        capture_instances={"dbo_orders": table},
    )
    Path(state_uri(str(tmp_path))).parent.mkdir(parents=True)
    Path(state_uri(str(tmp_path))).write_text(state.to_json())
    asset = target_asset(table)
    operator = WaitForAppliedWindowsOperator(
        task_id="wait_for_apply", windows=[window.to_xcom()], staging_path=str(tmp_path), outlets=[asset]
    )

    class TaskInstance:
        def xcom_push(self, key: str, value: Any) -> None:
            pass

    def complete() -> tuple[dict[str, Any], list[Any]]:
        events = OutletEventAccessors()
        recorded: list[Any] = []
        start = dt.datetime(2026, 11, 28, 14, 59, tzinfo=dt.UTC)
        context = {
            "ti": TaskInstance(),
            "outlet_events": events,
            "data_interval_start": start,
            "data_interval_end": start + dt.timedelta(minutes=1),
        }
        import airflow_provider_sqlserver_cdc.merge_outputs as outputs

        emit, timing = outputs.emit_rows_applied, outputs.timing
        outputs.emit_rows_applied = lambda *a: recorded.append(("rows", *a))
        outputs.timing = lambda *a: recorded.append(("timing", *a))
        try:
            operator.execute_complete(context, {"status": "applied", "applied_lsn_ranges": {}})
        finally:
            outputs.emit_rows_applied, outputs.timing = emit, timing
        return dict(events[asset].extra), recorded

    extra, recorded = complete()
    assert extra["snapshot_id"] == "111" and extra["capture_instances"] == ["dbo_orders"]
    assert extra["lsn_ranges"] == [
        {
            "capture_instance": "dbo_orders",
            "kind": "changes",
            "from": LSN(0x101),
            "to": LSN(0x200),
            "position_kind": "lsn",
            "applied_now": True,
        }
    ]
    assert extra["rows"] == {"insert": 2, "update": 0, "delete": 1, "snapshot": 0}
    assert extra["source"] == "mssql://db1:1433/shop/dbo/orders"
    assert extra["partition_key"] == "2026-11-28T14:59:00"
    assert extra["data_interval"]["end"] == "2026-11-28T15:00:00+00:00"
    assert (extra["snapshot"], extra["healed_gap"], extra["schema_switch"]) == (False, False, False)
    assert recorded == [
        ("rows", "dbo_orders", {"insert": 2, "update": 0, "delete": 1, "snapshot": 0}),
        ("timing", "merge_seconds", "dbo_orders", 2.5),
    ]

    # The interval re-run: the window re-extracted (a new manifest), already held: same snapshot, no metrics.
    manifest_path = Path(window.manifest_uri)
    manifest_path.write_text(
        json.dumps({**json.loads(manifest_path.read_text()), "created_at": "2026-11-28T16:00:00+00:00"})
    )
    extra, recorded = complete()
    assert extra["snapshot_id"] == "111" and not extra["lsn_ranges"][0]["applied_now"]
    assert recorded == []


def test_the_application_remembers_a_bounded_number_of_applied_windows_newest_last() -> None:
    from airflow_provider_sqlserver_cdc.spark.continuous.published_state import (
        APPLIED_WINDOWS_REMEMBERED,
        remember_applied_windows,
        run_result,
    )

    entry: dict[str, Any] = {}
    for k in range(APPLIED_WINDOWS_REMEMBERED + 5):
        entry.update(applied=[f"dbo_orders w{k}"], version=str(1000 + k), seconds=1.0)
        remember_applied_windows(entry, {f"dbo_orders w{k}": f"c{k}"}, applied_at=f"2026-11-28T15:{k:02d}:00")
    records = entry["applied_windows"]
    assert len(records) == APPLIED_WINDOWS_REMEMBERED and "dbo_orders w0" not in records
    assert list(records)[-1] == f"dbo_orders w{APPLIED_WINDOWS_REMEMBERED + 4}"
    state = ApplyState(tables={"t": entry}, capture_instances={"dbo_orders": "t"})
    # A forgotten window: the table's latest snapshot (which holds it), not counted as applied now.
    assert run_result(state, [("dbo_orders", "dbo_orders w0", "c0")])["t"] == {
        "status": "committed",
        "applied": [],
        "version": str(1000 + APPLIED_WINDOWS_REMEMBERED + 4),
        "seconds": None,
    }
    assert run_result(state, [("dbo_orders", "dbo_orders w20", "c20")])["t"]["version"] == "1020"
