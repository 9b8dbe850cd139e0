"""The provider's metrics reach Airflow's Stats in a DAG run (metrics.py, docs/operations.md "Metrics")."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from server_clock import local

from airflow_provider_sqlserver_cdc.metrics import metric_name
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase

# The DAG a worker would run, plus the one thing a worker does that dag.test() does not: the task
# runner's main() initialises Airflow's Stats from [metrics] (task_runner.main, copied here). The test's
# environment turns StatsD on ([metrics] statsd_on/host/port) towards a UDP socket the test listens on.
DAG_FILE = """
from __future__ import annotations

import datetime as dt
import json
import os

from airflow.sdk import DAG

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.operators.retention_headroom import CdcRetentionHeadroomOperator
from airflow_provider_sqlserver_cdc.operators.watermark import WatermarkCommitOperator

cfg = json.loads(os.environ["METRICS_TEST_CONFIG"])

try:  # what the task runner's main() does (Airflow 3.3)
    from airflow.sdk._shared.observability.metrics import stats
    from airflow.sdk.configuration import conf
    from airflow.sdk.observability.metrics import stats_utils

    stats.initialize(
        factory=stats_utils.get_stats_factory(), export_legacy_names=conf.getboolean("metrics", "legacy_names_on")
    )
except ImportError:  # Airflow 3.2
    from airflow.sdk.observability.stats import Stats
    from airflow.sdk.observability.metrics import stats_utils

    Stats.initialize(factory=stats_utils.get_stats_factory())

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
    tables = {"orders": "id int NOT NULL PRIMARY KEY"}
    db = ClockedCdcDatabase(sqlserver_simulator, "shop", tables, time_zone="UTC", start=local(9, 0))
    db.commit_at(local(10, 1), ("INSERT INTO dbo.orders VALUES (?)", 1))
    db.commit_at(local(10, 2), ("UPDATE dbo.orders SET id = 2 WHERE id = 1",))
    db.capture(until=local(10, 15))
    return sqlserver_simulator


class StatsdListener:
    """A StatsD server on loopback: a UDP socket that keeps every metric line it receives."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.lines: list[str] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self) -> None:
        while not self.stopped.is_set():
            try:
                data = self.socket.recv(65535)
            except TimeoutError:
                continue
            self.lines += data.decode().splitlines()  # a client may batch several lines in one datagram

    def close(self) -> list[tuple[str, float, str]]:
        """Stop; return (name, value, type) of each line (``name:value|type``)."""
        time.sleep(0.5)
        self.stopped.set()
        self.thread.join()
        self.socket.close()
        metrics = []
        for line in self.lines:
            name, _, rest = line.partition(":")
            value, kind = rest.split("|")[:2]
            metrics.append((name, float(value), kind))
        return metrics


def test_a_dag_run_sends_window_headroom_and_lag_metrics_to_statsd(source, tmp_path: Path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "metrics_dag.py").write_text(DAG_FILE)
    cfg = {"dag_id": "cdc_metrics", "base_path": str(tmp_path / "staging")}
    listener = StatsdListener()
    env = {
        **os.environ,
        "METRICS_TEST_CONFIG": json.dumps(cfg),
        connection_variable("sim"): source.airflow_connection("shop"),
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(listener.port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
    }
    try:
        run = run_dag_test(
            "cdc_metrics", dags_folder=dags, env=env, logical_date="2026-03-02T10:10:00+00:00", cwd=tmp_path
        )
    finally:
        metrics = listener.close()
    assert run.state == "success", run.output[-4000:]
    by_name = {(name, kind): value for name, value, kind in metrics}
    window = by_name[("airflow.sqlserver_cdc.window_seconds.dbo_orders", "ms")]
    assert window > 0
    # The interval [10:00, 10:10) applied: its newest change committed 10:02; server clock 10:15.
    assert by_name[("airflow.sqlserver_cdc.lag_seconds.dbo_orders", "g")] == 13 * 60
    headroom = by_name[("airflow.sqlserver_cdc.retention_headroom_minutes.dbo_orders", "g")]
    assert headroom == 4320 - 13  # retention 3 days from 10:02
    assert by_name[("airflow.sqlserver_cdc.backlog_age_seconds.dbo_orders", "g")] == 0


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
