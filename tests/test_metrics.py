"""The provider's metrics reach Airflow's Stats in a DAG run (metrics.py, docs/operations.md "Metrics")."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from airflow_provider_sqlserver_cdc.metrics import metric_name
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase

# The DAG a worker would run, plus the one thing a worker does that dag.test() does not: the task
# runner's main() initialises Airflow's Stats from [metrics]. Here Stats gets a backend that writes
# each call to a file (the edge: no StatsD client package is installed here, see test below).
DAG_FILE = """
from __future__ import annotations

import datetime as dt
import json
import os

from airflow.sdk import DAG
from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
from airflow.sdk.observability.stats import Stats

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.operators.retention_headroom import CdcRetentionHeadroomOperator
from airflow_provider_sqlserver_cdc.operators.watermark import WatermarkCommitOperator

cfg = json.loads(os.environ["METRICS_TEST_CONFIG"])


class FileStats(NoStatsLogger):  # Airflow's no-op backend (its timer() too), writing what it is given
    def _write(self, kind, stat, value, tags):
        with open(cfg["metrics_path"], "a") as f:
            f.write(json.dumps({"kind": kind, "stat": stat, "value": value, "tags": tags}) + "\\n")

    def incr(self, stat, count=1, rate=1, *, tags=None):
        self._write("count", stat, count, tags)

    def decr(self, stat, count=1, rate=1, *, tags=None):
        self._write("count", stat, -count, tags)

    def gauge(self, stat, value, rate=1, delta=False, *, tags=None):
        self._write("gauge", stat, value, tags)

    def timing(self, stat, dt, *, tags=None):
        self._write("timing", stat, dt.total_seconds() if hasattr(dt, "total_seconds") else dt, tags)


try:
    Stats.initialize(factory=FileStats, export_legacy_names=False)
except TypeError:  # Airflow 3.2's Stats.initialize takes the factory only
    Stats.initialize(factory=FileStats)

with DAG(cfg["dag_id"], schedule=dt.timedelta(minutes=10), start_date=dt.datetime(2020, 1, 1, tzinfo=dt.UTC)):
    extract = CdcExtractOperator(
        task_id="extract", capture_instance="dbo_orders", base_path=cfg["base_path"], sqlserver_cdc_conn_id="sim"
    )
    commit = WatermarkCommitOperator(task_id="commit", windows=extract.output)
    headroom = CdcRetentionHeadroomOperator(
        task_id="headroom", capture_instances=["dbo_orders"], sqlserver_cdc_conn_id="sim"
    )
    extract >> commit >> headroom
"""


@pytest.fixture
def source(sqlserver_simulator, airflow_db, shared_fernet_key):
    db = ClockedCdcDatabase(
        sqlserver_simulator,
        "shop",
        {"orders": "id int NOT NULL PRIMARY KEY"},
        time_zone="UTC",
        start=dt.datetime(2026, 3, 2, 9, 0),
    )
    db.commit_at(dt.datetime(2026, 3, 2, 10, 1), ("INSERT INTO dbo.orders VALUES (?)", 1))
    db.commit_at(dt.datetime(2026, 3, 2, 10, 2), ("UPDATE dbo.orders SET id = 2 WHERE id = 1",))
    db.capture(until=dt.datetime(2026, 3, 2, 10, 15))
    return sqlserver_simulator


def test_a_dag_run_emits_window_headroom_and_lag_metrics(source, tmp_path: Path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "metrics_dag.py").write_text(DAG_FILE)
    metrics_path = tmp_path / "metrics.jsonl"
    cfg = {"dag_id": "cdc_metrics", "base_path": str(tmp_path / "staging"), "metrics_path": str(metrics_path)}
    env = {
        **os.environ,
        "METRICS_TEST_CONFIG": json.dumps(cfg),
        connection_variable("sim"): source.airflow_connection("shop"),
    }
    run = run_dag_test(
        "cdc_metrics", dags_folder=dags, env=env, logical_date="2026-03-02T10:10:00+00:00", cwd=tmp_path
    )
    assert run.state == "success", run.output[-4000:]
    emitted = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    by_stat = {(m["kind"], m["stat"]): m for m in emitted}
    window = by_stat[("timing", "sqlserver_cdc.window_seconds.dbo_orders")]
    assert window["value"] > 0 and window["tags"] == {"capture_instance": "dbo_orders"}
    # The interval [10:00, 10:10) applied: its newest change committed 10:02; server clock 10:15.
    assert by_stat[("gauge", "sqlserver_cdc.lag_seconds.dbo_orders")]["value"] == 13 * 60
    headroom = by_stat[("gauge", "sqlserver_cdc.retention_headroom_minutes.dbo_orders")]["value"]
    assert headroom == 4320 - 13  # retention 3 days from 10:02
    assert by_stat[("gauge", "sqlserver_cdc.backlog_age_seconds.dbo_orders")]["value"] == 0


def test_rows_applied_and_merge_seconds_per_capture_instance(monkeypatch):
    from airflow_provider_sqlserver_cdc import merge_outputs, metrics

    calls = []

    class Recorder:
        def incr(self, stat, count=1, rate=1, *, tags=None):
            calls.append(("count", stat, count, tags))

        def timing(self, stat, delta, *, tags=None):
            calls.append(("timing", stat, delta.total_seconds(), tags))

    monkeypatch.setattr(metrics, "_stats", lambda: Recorder())
    extras = {
        "lake.cdc.dbo_orders": {
            "capture_instances": ["dbo_orders"],
            "rows": {"insert": 3, "update": 0, "delete": 1, "snapshot": 0},
            "lsn_ranges": [{"applied_now": True}],
        }
    }
    monkeypatch.setattr(merge_outputs, "event_extras", lambda *a, **k: extras)
    monkeypatch.setattr(merge_outputs.ChangeWindow, "from_xcom", staticmethod(lambda value: []))
    merge_outputs.record_merge_outputs(
        {},
        window_value=[],
        result={},
        outlets=[],
        namespace="lake.cdc",
        table_name_template="{schema}_{table}",
        targets={},
        seconds=12.5,
        log=__import__("logging").getLogger("t"),
    )
    tags = {"capture_instance": "dbo_orders"}
    assert calls == [
        ("count", "sqlserver_cdc.rows_applied.insert.dbo_orders", 3, tags),
        ("count", "sqlserver_cdc.rows_applied.delete.dbo_orders", 1, tags),
        ("timing", "sqlserver_cdc.merge_seconds.dbo_orders", 12.5, tags),
    ]


def test_metric_names_are_stats_safe():
    assert metric_name("lag_seconds", "dbo_orders") == "sqlserver_cdc.lag_seconds.dbo_orders"
    assert metric_name("lag_seconds", "sales.Ordér Lines") == "sqlserver_cdc.lag_seconds.sales_Ord_r_Lines"
