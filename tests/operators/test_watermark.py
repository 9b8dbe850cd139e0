"""LsnSensor -> CdcExtractOperator (mapped) -> WatermarkCommitOperator in real Airflow (``dag.test()``) on the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dag_runner import run_cdc_dag
from server_clock import ZONE, local, utc

from airflow_provider_sqlserver_cdc.lsn import Lsn
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase

CIS = ["dbo_orders", "dbo_items"]
TABLES = {
    "orders": "order_id int NOT NULL PRIMARY KEY, note nvarchar(20) NULL",
    "items": "sku varchar(10) NOT NULL PRIMARY KEY, qty int NULL",
}

pytestmark = pytest.mark.slow


def utc_iso(hh: int, mm: int) -> str:
    return utc(hh, mm).isoformat()


def variable(key: str) -> dict | None:
    from airflow.models.variable import Variable

    raw = Variable.get(key, default_var=None)
    return json.loads(raw) if raw is not None else None


@pytest.fixture
def source(sqlserver_simulator, airflow_db, shared_fernet_key):
    db = ClockedCdcDatabase(sqlserver_simulator, "shop", TABLES, time_zone=ZONE, start=local(9, 0))
    # Keys derive from the connection id, the database and the capture instance.
    from airflow.models.variable import Variable

    for ci in CIS:
        Variable.delete(f"sqlserver_cdc__sim__shop__{ci}")
    return db


def test_runs_extract_commit_and_never_move_the_watermark_back(source, tmp_path):
    source.commit_at(local(10, 1), ("INSERT INTO dbo.orders VALUES (1, N'a')",))
    source.commit_at(
        local(10, 12),
        ("INSERT INTO dbo.orders VALUES (2, N'b')",),
        ("INSERT INTO dbo.items VALUES ('x', 1)",),
    )
    source.commit_at(local(10, 25), ("UPDATE dbo.items SET qty = 2 WHERE sku = 'x'",))
    source.capture(until=local(10, 40))
    common = dict(
        capture_instances=CIS, mode="interval", base_path=str(tmp_path / "lake"), dag_id="cdc_interval"
    )

    # Interval 10:10-10:20 server time, through the deferrable sensor (already satisfied here; the
    # trigger's waiting and firing are covered in tests/sensors, its timeout below).
    run = run_cdc_dag(
        tmp_path,
        source.simulator.airflow_connection("shop"),
        logical_date=utc_iso(10, 20),
        deferrable=True,
        **common,
    )
    assert run["state"] == "success", run["output"][-4000:]
    assert source.simulator.password not in run["output"]
    windows = {w["capture_instance"]: w for w in run["recorded"]["windows"]}
    assert run["recorded"]["interval"] == [utc_iso(10, 10), utc_iso(10, 20)]
    assert windows["dbo_orders"]["row_count"] == 1 and windows["dbo_items"]["row_count"] == 1
    for ci, w in windows.items():
        assert source.simulator.password not in Path(w["manifest_uri"]).read_text()
        manifest = json.loads(Path(w["manifest_uri"]).read_text())
        assert manifest["run_id"] == run["recorded"]["run_id"] and manifest["dag_id"] == "cdc_interval"
        mark = variable(f"sqlserver_cdc__sim__shop__{ci}")
        assert mark["lsn"] == w["to_lsn"] and mark["dag_run_id"] == run["recorded"]["run_id"]
        assert mark["commit_time"] == w["to_lsn_time"]
    first_marks = {ci: variable(f"sqlserver_cdc__sim__shop__{ci}")["lsn"] for ci in CIS}

    # Next interval 10:20-10:30 with the sensor in reschedule mode: the watermark moves forward.
    run = run_cdc_dag(
        tmp_path,
        source.simulator.airflow_connection("shop"),
        logical_date=utc_iso(10, 30),
        sensor_mode="reschedule",
        **common,
    )
    assert run["state"] == "success", run["output"][-4000:]
    windows = {w["capture_instance"]: w for w in run["recorded"]["windows"]}
    assert windows["dbo_orders"]["row_count"] == 0 and windows["dbo_items"]["row_count"] == 2
    marks = {ci: variable(f"sqlserver_cdc__sim__shop__{ci}")["lsn"] for ci in CIS}
    assert all(Lsn.from_hex(marks[ci]) >= Lsn.from_hex(first_marks[ci]) for ci in CIS)
    assert Lsn.from_hex(marks["dbo_items"]) > Lsn.from_hex(first_marks["dbo_items"])

    # Backfill of the older interval 10:00-10:10: extracted again, the watermark stays put.
    run = run_cdc_dag(
        tmp_path, source.simulator.airflow_connection("shop"), logical_date=utc_iso(10, 10), **common
    )
    assert run["state"] == "success", run["output"][-4000:]
    windows = {w["capture_instance"]: w for w in run["recorded"]["windows"]}
    assert windows["dbo_orders"]["row_count"] == 1
    assert [m["moved"] for m in run["recorded"]["marks"]] == [False, False]
    assert {ci: variable(f"sqlserver_cdc__sim__shop__{ci}")["lsn"] for ci in CIS} == marks

    # Watermark mode picks up exactly what came after the stored LSNs.
    source.commit_at(local(10, 41), ("INSERT INTO dbo.orders VALUES (3, N'c')",))
    source.capture(until=local(10, 50))
    run = run_cdc_dag(
        tmp_path,
        source.simulator.airflow_connection("shop"),
        logical_date=utc_iso(10, 50),
        **{**common, "mode": "watermark", "dag_id": "cdc_wm"},
    )
    assert run["state"] == "success", run["output"][-4000:]
    windows = {w["capture_instance"]: w for w in run["recorded"]["windows"]}
    assert windows["dbo_orders"]["row_count"] == 1 and windows["dbo_items"]["row_count"] == 0
    assert windows["dbo_orders"]["from_lsn"] > marks["dbo_orders"]


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "poke"])
def test_sensor_timeout_says_the_capture_job_is_stopped(source, tmp_path, deferrable):
    source.commit_at(local(10, 1), ("INSERT INTO dbo.orders VALUES (1, N'a')",))
    source.capture(until=local(10, 5))
    source.simulator.clock.set(local(10, 45), frozen=True)  # the job is stopped: the max LSN stays at 10:05
    run = run_cdc_dag(
        tmp_path,
        source.simulator.airflow_connection("shop"),
        logical_date=utc_iso(10, 20),
        capture_instances=["dbo_orders"],
        mode="interval",
        base_path=str(tmp_path / "lake"),
        dag_id="cdc_timeout",
        deferrable=deferrable,
        sensor_timeout=3,
    )
    assert run["state"] == "failed"
    assert "appears to be STOPPED" in run["output"]
    assert "2400 s behind the server clock" in run["output"]
    assert not (tmp_path / "lake").exists()
