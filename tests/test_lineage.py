"""OpenLineage of extract (a dag.test() run through the OpenLineage provider's file transport) and its absence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from server_clock import local

from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase

REPO = Path(__file__).resolve().parents[1]

WITHOUT_OPENLINEAGE = """
import importlib.abc, sys

class NoOpenLineage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        # The OpenLineage client and every module of the OpenLineage provider but the metadata that
        # Airflow's provider discovery reads.
        hidden = name == "openlineage" or name.startswith("openlineage.")
        hidden |= name.startswith("airflow.providers.openlineage.") and not name.endswith(".get_provider_info")
        if hidden:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
        return None

sys.meta_path.insert(0, NoOpenLineage())
from airflow.dag_processing.dagbag import BundleDagBag
import airflow_provider_sqlserver_cdc.operators.extract, airflow_provider_sqlserver_cdc.operators.spark_merge
bag = BundleDagBag(dag_folder=sys.argv[1], bundle_path=sys.argv[1])
assert not bag.import_errors, bag.import_errors
assert not [m for m in sys.modules if m.startswith(("openlineage", "airflow.providers.openlineage."))
           and not m.endswith("get_provider_info")]
print("DAGS", sorted(bag.dags))
"""

DAG_FILE = """
import datetime as dt
import json
import os

from airflow.sdk import DAG

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator

cfg = json.loads(os.environ["LINEAGE_TEST_CONFIG"])
with DAG("cdc_lineage", schedule=dt.timedelta(minutes=10), start_date=dt.datetime(2020, 1, 1, tzinfo=dt.UTC)):
    CdcExtractOperator(
        task_id="extract", capture_instance="dbo_orders", base_path=cfg["base_path"], sqlserver_cdc_conn_id="sim"
    )
"""


def test_the_provider_and_its_dags_load_without_the_openlineage_provider():
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENLINEAGE, str(REPO / "dags")],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sqlserver_cdc_to_iceberg" in run.stdout


@pytest.fixture
def source(sqlserver_simulator, airflow_db, shared_fernet_key):
    tables = {"orders": "id int NOT NULL PRIMARY KEY, note nvarchar(20) NULL"}
    db = ClockedCdcDatabase(sqlserver_simulator, "shop", tables, time_zone="UTC", start=local(9, 0))
    db.commit_at(local(10, 1), ("INSERT INTO dbo.orders VALUES (?, ?)", 1, "a"))
    db.capture(until=local(10, 15))
    return sqlserver_simulator


def test_extract_reports_the_source_table_its_columns_and_the_lsn_range(source, tmp_path: Path):
    pytest.importorskip(
        "airflow.providers.openlineage", reason="apache-airflow-providers-openlineage is not installed"
    )
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "lineage_dag.py").write_text(DAG_FILE)
    events_path = tmp_path / "openlineage.jsonl"
    env = {
        **os.environ,
        "LINEAGE_TEST_CONFIG": json.dumps({"base_path": str(tmp_path / "staging")}),
        connection_variable("sim"): source.airflow_connection("shop"),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_path), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "cdc-test",
    }
    run = run_dag_test(
        "cdc_lineage", dags_folder=dags, env=env, logical_date="2026-03-02T10:10:00+00:00", cwd=tmp_path
    )
    assert run.state == "success", run.output[-4000:]
    events = [json.loads(line) for line in events_path.read_text().splitlines() if line.strip()]
    (complete,) = [
        e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(".extract")
    ]
    (table,) = complete["inputs"]
    assert table["namespace"] == f"mssql://{source.host}:{source.port}"
    assert table["name"] == "shop.dbo.orders"
    assert [(f["name"], f["type"]) for f in table["facets"]["schema"]["fields"]] == [
        ("id", "int"),
        ("note", "nvarchar"),
    ]
    (window,) = complete["outputs"]
    assert window["namespace"] == "file" and window["name"].startswith(
        str(tmp_path / "staging" / "dbo_orders")
    )
    facet = complete["run"]["facets"]["sqlserverCdc"]
    (described,) = facet["windows"]
    assert described["captureInstance"] == "dbo_orders" and described["kind"] == "changes"
    assert described["from"].startswith("0x") and described["to"] >= described["from"]
    assert described["fromTime"] == "2026-03-02T10:00:00+00:00" and described["rows"] == 1
    assert facet["rows"]["insert"] == 1
