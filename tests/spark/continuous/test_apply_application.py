"""The continuous apply application through spark-submit: kill -9 in the middle of a micro-batch, a restart, a second one.

Real processes: spark-submit (local[2]) of continuous_apply_job.py with the job's py_files zip, the
Iceberg runtime and a Hadoop catalog shared with the test's own session, which reads the table back.
"""

from __future__ import annotations

import decimal
import json
import time
from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents
from window_builder import ChangeLog, WindowSpec, flatten, write_window

from airflow_provider_sqlserver_cdc.spark.continuous.published_state import (
    APPLIED,
    ApplyState,
    RunWindow,
    lock_uri,
    run_progress,
    state_uri,
)
from airflow_provider_sqlserver_cdc.testing.continuous_apply_process import ApplyApplication
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar, iceberg_spark_conf

pytestmark = [pytest.mark.spark, pytest.mark.slow]
D = decimal.Decimal


def run_window(manifest: str) -> RunWindow:
    data = json.loads(Path(manifest).read_text())
    return RunWindow.from_bounds(
        data["capture_instance"], data["kind"], data["from_lsn"], data["to_lsn"], data.get("applied_through")
    )


def wait_applied(staging: Path, manifests: list[str], timeout: float = 300.0) -> ApplyState:
    deadline = time.monotonic() + timeout
    while True:
        path = Path(state_uri(str(staging)))
        if path.exists():
            state = ApplyState.from_json(path.read_text())
            progress = run_progress(state, None, [run_window(m) for m in manifests], staging=str(staging))
            if progress.status == APPLIED:
                return state
            assert progress.status == "waiting", progress.message
        assert time.monotonic() < deadline, f"not applied within {timeout:.0f} s"
        time.sleep(0.5)


def test_kill_9_mid_batch_then_restart_loses_nothing_and_applies_nothing_twice(
    spark: Any, spark_warehouse: Path, staging: Path, namespace: str, tmp_path: Path
) -> None:
    table = f"{namespace}.dbo_orders"
    log = ChangeLog()
    first = flatten(log.insert(id=k, name=f"n{k}", amount=D(k)) for k in range(1, 2001))
    w1 = write_window(staging, WindowSpec("dbo_orders", 0x100, log.lsn, first))
    end1 = log.lsn
    conf = {**iceberg_spark_conf(spark_warehouse), "spark.sql.shuffle.partitions": "2"}
    options = {
        "log_path": tmp_path / "apply.log",
        "poll_seconds": 0.5,
        "arguments": ["--stale-after-seconds", "30"],
    }

    app = ApplyApplication.start(str(staging), namespace, conf, iceberg_runtime_jar(), **options)
    try:
        app.wait_for_log(f"target {table}: MERGE of")  # in the middle of the first micro-batch
    finally:
        app.kill()
    assert Path(lock_uri(str(staging))).exists()  # a killed application leaves its lock behind

    # Windows land while it is down: the next one, and the one after it.
    log.lsn = 0x100000
    second = flatten(
        [
            log.update({"id": 2, "name": "n2", "amount": D(2)}, name="changed"),
            log.delete(id=3, name="n3", amount=D(3)),
        ]
    )
    w2 = write_window(staging, WindowSpec("dbo_orders", 0x100000, log.lsn, second, applied_through=end1))
    end2 = log.lsn
    log.lsn = 0x200000
    third = flatten([log.insert(id=5000, name="late", amount=None)])
    w3 = write_window(staging, WindowSpec("dbo_orders", 0x200000, log.lsn, third, applied_through=end2))

    restarted = ApplyApplication.start(str(staging), namespace, conf, iceberg_runtime_jar(), **options)
    try:
        restarted.wait_for_log(
            "taking over the lock"
        )  # its driver is gone: no need to wait for the heartbeat
        state = wait_applied(staging, [w1, w2, w3])
        # A second application on the same staging path refuses to start, naming the first.
        second_app = ApplyApplication.start(
            str(staging),
            namespace,
            conf,
            iceberg_runtime_jar(),
            **{**options, "log_path": tmp_path / "second.log"},
        )
        assert second_app.process.wait(timeout=300) == 2
        assert "another continuous apply application holds staging path" in second_app.log_text()
        assert state.application_id in second_app.log_text()
    finally:
        assert restarted.stop() == 0
    assert not Path(lock_uri(str(staging))).exists()

    spark.sql(f"REFRESH TABLE {table}")
    expected = {k: (False, f"n{k}", D(k)) for k in range(1, 2001)}
    expected |= {2: (False, "changed", D(2)), 3: (True, "n3", D(3)), 5000: (False, "late", None)}
    assert contents(spark, table) == expected
    summary = ApplyState.from_json(Path(state_uri(str(staging))).read_text()).tables[table]
    assert summary["applied_lsn_ranges"]["dbo_orders"] == f"0x{0x100:020X}-0x{log.lsn:020X}"
