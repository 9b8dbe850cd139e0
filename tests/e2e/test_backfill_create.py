"""
``airflow backfill create`` over intervals that already ran extracts exactly the same changes and
changes nothing downstream.

Real pieces only: an Airflow 3 deployment of its own (metadata DB, dag-processor, scheduler with
the LocalExecutor, execution API server; tests/e2e/airflow_deployment.py) runs the example DAG
``dags/sqlserver_cdc_to_iceberg.py`` against the simulator over TDS (pyodbc + FreeTDS), and the
merge is spark-submit of the provider's job into Iceberg. The test controls the server clock and
the capture job, and creates each interval's scheduled run the way the scheduler does when the
interval closes (create_scheduled_run.py; the scheduler cannot be made to wait minutes of wall
clock here). The backfill is the real CLI, executed by the real scheduler.

Story: interval 0 runs first (snapshot of every table); intervals 1 and 2 get random changes and
run as scheduled runs (the merge commits them). Then ``airflow backfill create --reprocess-behavior
completed`` over intervals 1..2 clears those runs and the scheduler runs them again. Every
extract window (XCom, manifest, Parquet rows) is identical to the first run's, no Iceberg table
gets a new snapshot, and no watermark moves.

A second, quick test pins the Airflow behaviour behind docs/backfill.md's warning: a backfill
matches existing runs by logical date and re-runs them with their own data interval.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow_deployment import AirflowDeployment, db_time
from cdc_pipeline_harness import (
    INTERVAL_DAG,
    MINUTE,
    PipelineHarness,
    create_sample_source,
    table_list_variable,
)

from airflow_provider_sqlserver_cdc.state import Watermark
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key
from sqlserver_cdc_simulator.workload import Workload

pytestmark = pytest.mark.slow

SEED = 20261123
INITIAL_ROWS = 30
TRANSACTIONS_PER_INTERVAL = 40
BACKFILLED = (1, 2)
# Two of the sample tables keep the test near three minutes (each table is its own Iceberg MERGE);
# the type zoo has every mapped SQL Server type, so "identical Parquet" covers all of them.
REPLICATED = ("dbo_orders", "dbo_type_zoo")
# Generous: the runs take about a minute on a quiet machine; a failing run fails long before this.
RUN_TIMEOUT = 600


def window_contents(xcom: dict[str, Any]) -> tuple[dict[str, Any], pa.Table | None]:
    """One extract window as written: its manifest and its Parquet rows (None when empty)."""
    window = Path(xcom["window_uri"])
    manifest = json.loads(Path(xcom["manifest_uri"]).read_text())
    if not manifest["files"]:
        return manifest, None
    return manifest, pa.concat_tables(pq.read_table(window / f["path"]) for f in manifest["files"])


def record(deployment: AirflowDeployment, harness: PipelineHarness, run_ids: list[str], fernet: str) -> dict:
    """What the runs left behind: windows, task tries, Iceberg snapshots, watermarks."""
    runs = {}
    for run_id in run_ids:
        extracts = deployment.xcoms(INTERVAL_DAG, run_id, "extract")
        runs[run_id] = {
            "xcoms": extracts,
            "windows": {i: window_contents(x) for i, x in extracts.items()},
            "tries": {
                (ti["task_id"], ti["map_index"]): ti["try_number"]
                for ti in deployment.task_instances(INTERVAL_DAG, run_id)
            },
        }
    watermarks = {}
    for name in REPLICATED:
        key = watermark_key(harness.conn_id, harness.database, name)
        raw = deployment.variable(key, fernet)
        watermarks[name] = None if raw is None else Watermark.from_json(raw, key=key).lsn
    snapshots = harness.target_snapshot_ids()
    return {
        "runs": runs,
        "snapshots": {name: snapshots[name] for name in REPLICATED},
        "metadata_versions": {
            name: (harness.warehouse / "cdc" / name / "metadata" / "version-hint.text").read_text().strip()
            for name in REPLICATED
        },
        "watermarks": watermarks,
    }


@pytest.mark.spark
def test_backfill_create_reextracts_identical_windows_and_changes_nothing(
    pipeline_harness: PipelineHarness, shared_fernet_key: str
) -> None:
    harness = pipeline_harness
    harness.start_intervals(hours_ago=6)
    start = harness.interval_start

    def write_interval(k: int) -> None:
        harness.write_interval(k, workload, conn, TRANSACTIONS_PER_INTERVAL)

    close_interval = harness.close_interval

    # The DAG's table list, for this deployment only: the Variable <dag_id>__tables from the environment.
    tables = table_list_variable(INTERVAL_DAG, REPLICATED)
    deployment = AirflowDeployment(harness.root / "airflow", {**harness.env, **tables})
    workload = Workload(seed=SEED)

    def run_scheduled(intervals: tuple[int, ...], what: str) -> list[str]:
        run_ids = deployment.create_scheduled_runs(INTERVAL_DAG, [start(k) for k in intervals])
        finished = deployment.wait_for_runs(INTERVAL_DAG, run_ids, RUN_TIMEOUT)
        for k, run_id in zip(intervals, run_ids, strict=True):
            run = finished[run_id]
            assert run["state"] == "success", f"{what}: {run_id} {run['state']}\n{deployment.diagnostics()}"
            assert (run["data_interval_start"], run["data_interval_end"]) == (
                db_time(start(k)),
                db_time(start(k + 1)),
            )
        return run_ids

    with deployment.running():
        # The source is created while the components start.
        harness.set_server_time(start(0) - dt.timedelta(seconds=30))
        conn = create_sample_source(harness, workload, INITIAL_ROWS)
        deployment.wait_until_ready(INTERVAL_DAG)

        # Interval 0: the first run snapshots every table.
        write_interval(0)
        close_interval(0)
        run_scheduled((0,), "first run (snapshots)")
        after_snapshot = harness.target_snapshot_ids()
        assert all(after_snapshot[name] for name in REPLICATED), after_snapshot

        # Intervals 1 and 2: changes, captured, then their scheduled runs.
        for k in BACKFILLED:
            write_interval(k)
        close_interval(BACKFILLED[-1])
        normal_runs = run_scheduled(BACKFILLED, "scheduled runs")
        before = record(deployment, harness, normal_runs, shared_fernet_key)
        # The scheduled runs did real work: changes in every window, a merge commit on every table.
        for run_id in normal_runs:
            xcoms = before["runs"][run_id]["xcoms"]
            assert sorted(x["capture_instance"] for x in xcoms.values()) == sorted(REPLICATED)
            assert all(x["kind"] == "changes" and x["mode"] == "interval" for x in xcoms.values())
            assert all(x["row_count"] > 0 for x in xcoms.values()), xcoms
        unchanged = [n for n in REPLICATED if before["snapshots"][n] == after_snapshot[n]]
        assert not unchanged, f"the scheduled runs were meant to merge changes into {unchanged}"
        assert all(before["watermarks"].values()), before["watermarks"]

        # The backfill, as an operator types it (airflow backfill create ... --reprocess-behavior completed).
        backfill_started = dt.datetime.now(dt.UTC)
        created = deployment.create_backfill(
            INTERVAL_DAG, start(BACKFILLED[0]), start(BACKFILLED[-1]), "--max-active-runs", "1"
        )
        assert created.returncode == 0, created.stdout + created.stderr
        backfills = deployment.query("SELECT id FROM backfill WHERE dag_id = ?", INTERVAL_DAG)
        assert len(backfills) == 1
        backfill_id = backfills[0]["id"]
        members = deployment.query(
            "SELECT b.dag_run_id, b.exception_reason, r.run_id FROM backfill_dag_run b "
            "JOIN dag_run r ON r.id = b.dag_run_id WHERE b.backfill_id = ? ORDER BY b.sort_ordinal",
            backfill_id,
        )
        # reprocess-behavior completed: the backfill takes over the completed scheduled runs of
        # exactly those intervals (same logical dates), rather than skipping them.
        assert [(m["run_id"], m["exception_reason"]) for m in members] == [(r, None) for r in normal_runs]

        finished = deployment.wait_for_runs(INTERVAL_DAG, normal_runs, RUN_TIMEOUT)
        after = record(deployment, harness, normal_runs, shared_fernet_key)

    for k, run_id in zip(BACKFILLED, normal_runs, strict=True):
        run = finished[run_id]
        assert run["state"] == "success", (
            f"backfill of interval {k}: {run['state']}\n{deployment.diagnostics()}"
        )
        assert (run["run_type"], run["backfill_id"]) == ("backfill", backfill_id)
        assert (run["data_interval_start"], run["data_interval_end"]) == (
            db_time(start(k)),
            db_time(start(k + 1)),
        )
        first, again = before["runs"][run_id], after["runs"][run_id]
        # Every task ran once more under the backfill.
        assert {t: n + 1 for t, n in first["tries"].items() if n} == {
            t: n for t, n in again["tries"].items() if t in first["tries"] and first["tries"][t]
        }
        # The same windows: XCom (LSN bounds, counts, paths) and files. Only the contiguity guard's
        # note of what the target held when the window was extracted may differ: a first run
        # continues the previous interval's applied LSN, the backfill finds the window applied.
        assert [without_continuation(x) for x in again["xcoms"].values()] == [
            without_continuation(x) for x in first["xcoms"].values()
        ], f"interval {k}"
        for index, (manifest, rows) in first["windows"].items():
            manifest_again, rows_again = again["windows"][index]
            assert manifest_again["created_at"] > manifest["created_at"]
            assert dt.datetime.fromisoformat(manifest_again["created_at"]) >= backfill_started
            assert without_continuation({**manifest_again, "created_at": None}) == without_continuation(
                {**manifest, "created_at": None}
            )
            assert (rows is None) == (rows_again is None)
            if rows is not None:
                assert rows_again.equals(rows), f"interval {k}, {manifest['capture_instance']}: rows differ"
    # Downstream nothing changed: no Iceberg commit, no watermark move.
    assert after["snapshots"] == before["snapshots"]
    assert after["metadata_versions"] == before["metadata_versions"]
    assert after["watermarks"] == before["watermarks"]
    conn.close()


def without_continuation(window: dict) -> dict:
    """A window's XCom or manifest without the contiguity guard's ``applied_through`` note."""
    return {k: v for k, v in window.items() if k not in ("applied_through_lsn", "applied_through")}


def test_backfill_takes_over_a_manual_run_by_logical_date_and_keeps_its_interval(tmp_path: Path) -> None:
    """
    The pitfall docs/backfill.md warns about, on the installed Airflow: a backfill matches an
    existing run by logical date only, and re-runs it with that run's own data interval. A manual
    run triggered with ``--logical-date D`` covers the interval before its trigger time, so a
    backfill over ``D`` re-runs that interval and no run covers the interval starting at ``D``.
    Only the metadata DB and the CLI are needed (no run executes). Should a new Airflow match
    runs by interval instead, this test fails: update docs/backfill.md then.
    """
    deployment = AirflowDeployment(
        tmp_path / "airflow", {**os.environ, "SQLSERVER_CDC_SCHEDULE": "* * * * *"}
    )
    for command in (("db", "migrate"), ("dags", "reserialize")):
        done = deployment.airflow(*command)
        assert done.returncode == 0, done.stdout + done.stderr
    logical_date = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)).replace(second=0, microsecond=0)
    triggered = deployment.airflow(
        "dags", "trigger", INTERVAL_DAG, "--logical-date", logical_date.isoformat()
    )
    assert triggered.returncode == 0, triggered.stdout + triggered.stderr
    (manual,) = deployment.dag_runs(INTERVAL_DAG).values()
    assert manual["run_type"] == "manual" and manual["logical_date"] == db_time(logical_date)
    # Its interval is the last one before the trigger time, not the one starting at its logical date.
    assert manual["data_interval_start"] > db_time(logical_date + dt.timedelta(hours=1))
    manual_interval = (manual["data_interval_start"], manual["data_interval_end"])

    # Stand-in for the run having finished (nothing executes it here): reprocess only takes over
    # finished runs; a queued or running one is left alone as "in flight".
    db = sqlite3.connect(deployment.db_path)
    with db:
        db.execute("UPDATE dag_run SET state = 'success' WHERE id = ?", (manual["id"],))
    db.close()
    created = deployment.create_backfill(INTERVAL_DAG, logical_date, logical_date)
    assert created.returncode == 0, created.stdout + created.stderr
    (member,) = deployment.query("SELECT dag_run_id, exception_reason FROM backfill_dag_run")
    assert (member["dag_run_id"], member["exception_reason"]) == (manual["id"], None)
    runs = deployment.dag_runs(INTERVAL_DAG)
    assert len(runs) == 1
    (taken_over,) = runs.values()
    assert (taken_over["run_type"], taken_over["state"]) == ("backfill", "queued")
    assert (taken_over["data_interval_start"], taken_over["data_interval_end"]) == manual_interval
    wanted = (db_time(logical_date), db_time(logical_date + MINUTE))
    assert wanted not in {(r["data_interval_start"], r["data_interval_end"]) for r in runs.values()}
