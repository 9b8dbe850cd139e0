"""Unit tests of the demo's helpers (the demo itself runs with `make demo`)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "demo"))

import run_demo as demo


def test_next_boundary_is_the_next_whole_minute() -> None:
    at = dt.datetime(2026, 1, 1, 10, 5, 0, tzinfo=dt.UTC)
    assert demo.next_boundary(at) == at
    assert demo.next_boundary(at + dt.timedelta(microseconds=1)) == at + dt.timedelta(minutes=1)


def test_windows_summary_counts_snapshot_rows_and_changes(tmp_path: Path) -> None:

    def window(name: str, kind: str, rows: int, counts: dict[str, int]) -> None:
        directory = tmp_path / "dbo_orders" / name
        directory.mkdir(parents=True)
        manifest = {"kind": kind, "row_count": rows, "operation_counts": counts}
        (directory / "_manifest.json").write_text(json.dumps(manifest))

    window("0x0_0x5", "snapshot", 10, {"insert": 10})
    window("0x6_0x9", "changes", 7, {"insert": 2, "update_before": 2, "update_after": 2, "delete": 1})
    window("0xA_0x9", "changes", 0, {})
    assert demo.windows_summary(tmp_path, "dbo_orders") == {
        "snapshot_rows": 10,
        "windows": 2,
        "insert": 2,
        "update_after": 2,
        "delete": 1,
    }


def test_the_demo_environment_keeps_everything_under_dot_demo() -> None:
    env = demo.demo_environment("127.0.0.1", 1433, "not-a-real-password")
    for key in ("AIRFLOW_HOME", "SQLSERVER_CDC_STAGING", "SQLSERVER_CDC_WAREHOUSE"):
        assert env[key].startswith(str(demo.DEMO_DIR)), key
    assert env["SQLSERVER_CDC_SCHEDULE"] == "* * * * *"
    assert "iceberg-spark-runtime-3.5_2.12" in env["SQLSERVER_CDC_SPARK_JARS"]


def test_the_postgres_flag_points_the_example_dag_at_a_postgresql_target(postgres_server: object) -> None:
    from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings

    env = demo.postgres_environment(postgres_server)
    settings = ReplicationSettings.from_yaml(demo.DAGS_FOLDER / "sqlserver_cdc_config.yaml", environ=env)
    target = settings.merge.target
    assert (target.kind, target.conn_id, settings.merge.namespace) == ("postgres", "demo_postgres", "cdc")
    connection = json.loads(env["AIRFLOW_CONN_DEMO_POSTGRES"])
    assert connection["conn_type"] == "postgres" and connection["schema"] == "demo_target"
    assert env["SQLSERVER_CDC_SPARK_JARS"].endswith("postgresql.jar")
