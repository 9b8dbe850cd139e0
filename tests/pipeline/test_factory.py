"""The pipeline factory: the task graph in both window modes, as a whole DAG and as a task group."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.pipeline import (
    ReplicationSettings,
    cdc_replication_dag,
    cdc_replication_task_group,
)
from airflow_provider_sqlserver_cdc.pipeline.table_list import run_tables, tables_variable_key

#: The tasks whose failure fails the run: ``run_outcome`` follows and watches them.
WATCHED_TASK_IDS = {"plan", "snapshot", "wait_for_capture", "extract", "merge", "commit_watermarks"}
TASK_IDS = WATCHED_TASK_IDS | {"run_outcome", "tables", "retention_headroom", "snapshot_list", "extract_list"}


def settings(**overrides: Any) -> ReplicationSettings:
    data = {
        "tables": ["dbo_orders", "dbo_customers"],
        "staging_path": "/tmp/staging",
        "source": {"conn_id": "shop", "database": "shop_db", "server_time_zone": "Europe/Berlin"},
        "merge": {"namespace": "lake.cdc", "table_properties": {"write.target-file-size-bytes": 1024}},
        "spark": {"jars": "/jars/iceberg.jar", "conf": {"spark.sql.catalog.lake.type": "hadoop"}},
        **overrides,
    }
    return ReplicationSettings.from_mapping(data, environ={})


def assert_pipeline(tasks: dict[str, Any], prefix: str, mode: str, s: ReplicationSettings) -> None:
    """The wiring dags/ promised before the factory existed, under ``prefix``."""

    def up(task_id: str) -> set[str]:
        return {t.removeprefix(prefix) for t in tasks[prefix + task_id].upstream_task_ids}

    assert {t.removeprefix(prefix) for t in tasks} == TASK_IDS
    for task_id in ("snapshot", "wait_for_capture", "extract"):
        assert tasks[prefix + task_id].is_mapped, task_id
    assert up("plan") == {"tables"}
    assert up("snapshot_list") == up("extract_list") == {"plan"}
    assert up("snapshot") == {"snapshot_list"}
    assert up("wait_for_capture") == {"extract_list"}
    assert up("extract") == {"wait_for_capture", "extract_list"}
    assert up("merge") == {"snapshot", "extract"}
    assert up("commit_watermarks") == {"merge"}  # the windows come from the merge's XCom
    assert up("run_outcome") >= WATCHED_TASK_IDS
    merge, commit = tasks[prefix + "merge"], tasks[prefix + "commit_watermarks"]
    assert merge.extract_task_ids == [prefix + "snapshot", prefix + "extract"]
    # A path with nothing to do is skipped and a failed extract[i] leaves no window: the merge runs on
    # the windows that exist, the commit after it, whatever the merge's state (a merge failed for one
    # target table pushed the committed tables' windows); run_outcome fails the run naming what failed.
    assert (merge.trigger_rule, commit.trigger_rule) == ("all_done", "all_done")
    assert commit.merge_task_id == merge.task_id
    assert tasks[prefix + "run_outcome"].trigger_rule == "all_done"
    extract = tasks[prefix + "extract"].partial_kwargs
    snapshot = tasks[prefix + "snapshot"].partial_kwargs
    sensor = tasks[prefix + "wait_for_capture"].partial_kwargs
    assert extract["window_mode"] == sensor["window_mode"] == mode
    for kwargs in (extract, snapshot, sensor):
        assert kwargs["sqlserver_cdc_conn_id"] == "shop" and kwargs["database"] == "shop_db"
        assert kwargs["server_time_zone"] == "Europe/Berlin"
    assert extract["base_path"] == snapshot["base_path"] == "/tmp/staging"
    assert (extract["batch_size"], extract["max_file_bytes"]) == (
        s.extract.batch_size,
        s.extract.max_file_bytes,
    )
    assert extract["execution_timeout"] == dt.timedelta(minutes=30)
    assert snapshot["chunk_rows"] == s.snapshot.chunk_rows
    assert snapshot["execution_timeout"] == dt.timedelta(minutes=30)
    assert (sensor["mode"], sensor["poke_interval"], sensor["timeout"]) == ("reschedule", 60, 3600)
    # Retries everywhere (every step is idempotent), except the sensor whose timeout is an answer.
    assert sensor["retries"] == 0
    assert extract["retries"] == snapshot["retries"] == merge.retries == commit.retries == 3
    assert tasks[prefix + "plan"].retry_delay == dt.timedelta(seconds=120)
    assert (merge.namespace, merge.write_mode, merge.delete_mode) == ("lake.cdc", "merge-on-read", "soft")
    assert merge.table_properties == {"write.target-file-size-bytes": "1024"}
    assert merge.execution_timeout == dt.timedelta(minutes=60)


def test_the_merge_strategy_setting_reaches_the_merge_task() -> None:
    s = settings(merge={"namespace": "lake.cdc", "merge_strategy": "rewrite"})
    dag = cdc_replication_dag(s, dag_id="cdc_strategy", window_mode="interval")
    assert dag.task_dict["merge"].merge_strategy == "rewrite"


@pytest.mark.parametrize("mode", ["interval", "watermark"])
def test_the_dag_has_the_pipeline_without_a_group_prefix(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import Variable

    s = settings()
    dag = cdc_replication_dag(s, dag_id=f"cdc_{mode}", window_mode=mode, doc_md="Mine.", tags=["t"])
    assert_pipeline(dag.task_dict, "", mode, s)
    asked: list[str] = []
    monkeypatch.setattr(Variable, "get", staticmethod(lambda key, default=None: asked.append(key)))
    assert dag.task_dict["tables"].python_callable() == ["dbo_orders", "dbo_customers"]
    assert asked == [f"cdc_{mode}__tables"]
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    assert dag.tags == {"t"}
    assert dag.doc_md.startswith("Mine.\n\n") and "Why the defaults (settings.py) are safe" in dag.doc_md
    merge = dag.task_dict["merge"]
    assert (merge._conn_id, merge.jars) == ("spark_default", "/jars/iceberg.jar")
    assert merge.conf == {"spark.sql.catalog.lake.type": "hadoop"}


def test_interval_mode_gets_a_data_interval_timetable_watermark_mode_its_schedule() -> None:
    s = settings(dag={"schedule": "*/5 * * * *", "watermark_schedule": "@daily"})
    interval = cdc_replication_dag(s, dag_id="i", window_mode="interval")
    assert type(interval.timetable).__name__ == "CronDataIntervalTimetable"
    assert interval.timetable.expression == "*/5 * * * *"
    watermark = cdc_replication_dag(s, dag_id="w", window_mode="watermark")
    # A plain schedule: the window does not depend on the data interval.
    assert watermark.timetable.expression == "0 0 * * *"


def test_watermark_mode_refuses_concurrent_runs() -> None:
    s = settings(dag={"max_active_runs": 2})
    assert cdc_replication_dag(s, dag_id="i", window_mode="interval").max_active_runs == 2
    with pytest.raises(ValueError, match="max_active_runs must be 1 in watermark mode"):
        cdc_replication_dag(s, dag_id="w", window_mode="watermark")
    with pytest.raises(ValueError, match="max_active_runs must be 1 in watermark mode"):
        cdc_replication_dag(settings(), dag_id="w", window_mode="watermark", max_active_runs=3)


def test_dag_arguments_replace_the_settings() -> None:
    dag = cdc_replication_dag(
        settings(), dag_id="manual", window_mode="watermark", schedule=None, catchup=True
    )
    assert type(dag.timetable).__name__ == "NullTimetable"
    assert dag.catchup is True


def test_an_unknown_window_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="window_mode must be one of"):
        cdc_replication_dag(settings(), dag_id="x", window_mode="latest")


@pytest.mark.parametrize("mode", ["interval", "watermark"])
def test_the_task_group_in_a_users_dag(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import DAG, Variable, task

    s = settings()
    with DAG("mine", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:

        @task
        def before() -> None:
            """A task of the user's own."""

        group = cdc_replication_task_group(s, window_mode=mode, group_id="orders")
        before() >> group
    assert group.group_id == "orders"
    tasks = {t: dag.task_dict[t] for t in dag.task_dict if t.startswith("orders.")}
    assert_pipeline(tasks, "orders.", mode, s)
    assert dag.task_dict["orders.tables"].upstream_task_ids == {"before"}
    # The group's own Variable replaces its tables, so two groups in one DAG have their own lists.
    asked: list[str] = []
    monkeypatch.setattr(Variable, "get", staticmethod(lambda key, default=None: asked.append(key)))
    assert dag.task_dict["orders.tables"].python_callable() == ["dbo_orders", "dbo_customers"]
    assert asked == ["mine__orders__tables"]


def test_the_task_group_needs_a_dag() -> None:
    with pytest.raises(RuntimeError, match="only be used inside a dag"):
        cdc_replication_task_group(settings())


def test_the_tables_variable_replaces_the_settings_list(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import Variable

    stored: dict[str, Any] = {}
    monkeypatch.setattr(Variable, "get", staticmethod(lambda key, default=None: stored.get(key, default)))
    assert tables_variable_key("d") == "d__tables"
    assert tables_variable_key("d", "orders") == "d__orders__tables"
    assert run_tables(("a", "b"), "d__tables") == ["a", "b"]
    stored["d__tables"] = json.dumps(["c"])
    assert run_tables(("a", "b"), "d__tables") == ["c"]
    stored["d__tables"] = "dbo_orders"
    with pytest.raises(ValueError, match=r"'d__tables' must hold a JSON list of capture instances"):
        run_tables(("a",), "d__tables")
    stored["d__tables"] = json.dumps({"a": 1})
    with pytest.raises(ValueError, match="must be a list of capture instance names"):
        run_tables(("a",), "d__tables")
    stored["d__tables"] = json.dumps(["a", "a"])
    with pytest.raises(ValueError, match="lists a capture instance twice"):
        run_tables(("a",), "d__tables")


def test_the_readme_example_builds_the_dag() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Your own DAG") :]
    code = section[
        section.index("```python\n") + len("```python\n") : section.index("```\n", section.index("```python"))
    ]
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["dag"].dag_id == "shop_to_iceberg"
    assert set(namespace["dag"].task_dict) == TASK_IDS


WAREHOUSE = {"spark.sql.catalog.lake.type": "hadoop", "spark.sql.catalog.lake.warehouse": "/data/warehouse"}


def test_local_paths_with_a_distributed_executor_are_refused_when_the_dag_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.sdk import DAG

    from airflow_provider_sqlserver_cdc.errors import LocalPathError

    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")
    with pytest.raises(
        LocalPathError, match=r"^staging_path is the local path '/tmp/staging' .*CeleryExecutor"
    ):
        cdc_replication_dag(settings(), dag_id="cdc_celery")
    with pytest.raises(
        LocalPathError, match=r"^spark\.conf\.spark\.sql\.catalog\.lake\.warehouse .*'/data/w"
    ):
        cdc_replication_dag(
            settings(staging_path="s3://bucket/staging", spark={"conf": WAREHOUSE}), dag_id="cdc_celery"
        )
    with DAG("users_dag", schedule=None), pytest.raises(LocalPathError, match="staging_path"):
        cdc_replication_task_group(settings())


def test_shared_uris_are_accepted_with_a_distributed_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "KubernetesExecutor")
    conf = {**WAREHOUSE, "spark.sql.catalog.lake.warehouse": "s3a://bucket/warehouse"}
    dag = cdc_replication_dag(
        settings(staging_path="s3://bucket/staging", spark={"conf": conf}), dag_id="k8s"
    )
    assert dag.task_dict["extract"].partial_kwargs["base_path"] == "s3://bucket/staging"


def test_local_paths_under_a_declared_shared_mount_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")
    monkeypatch.setenv("AIRFLOW__SQLSERVER_CDC__SHARED_LOCAL_PATHS", "/mnt/lake")
    conf = {**WAREHOUSE, "spark.sql.catalog.lake.warehouse": "/mnt/lake/warehouse"}
    cdc_replication_dag(settings(staging_path="/mnt/lake/staging", spark={"conf": conf}), dag_id="nfs")


def test_local_paths_are_accepted_with_the_local_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
    cdc_replication_dag(settings(spark={"conf": WAREHOUSE}), dag_id="local")


# --- table maintenance (docs/maintenance.md) -------------------------------------------------------
def test_maintenance_is_added_after_the_watermark_commit_when_enabled() -> None:
    from airflow_provider_sqlserver_cdc.pipeline.factory import maintenance_due

    off = cdc_replication_dag(settings(), dag_id="no_maintenance")
    assert "maintain_tables" not in off.task_dict
    on = settings(maintenance={"enabled": True, "schedule": "0 3 * * *", "min_delete_files": 7})
    dag = cdc_replication_dag(on, dag_id="with_maintenance")
    maintain = dag.task_dict["maintain_tables"]
    assert dag.task_dict["maintenance_window"].upstream_task_ids == {"commit_watermarks"}
    assert maintain.upstream_task_ids == {"maintenance_window"}
    assert maintain.namespace == "lake.cdc" and maintain.thresholds.delete_files == 7
    assert maintain.tombstone_margin_hours is None and maintain.jars == "/jars/iceberg.jar"
    hour = dt.datetime(2026, 1, 1, 2, tzinfo=dt.UTC)
    assert maintenance_due("0 3 * * *", hour, hour + dt.timedelta(hours=1))  # (02:00, 03:00] holds 03:00
    assert not maintenance_due("0 3 * * *", hour + dt.timedelta(hours=1), hour + dt.timedelta(hours=2))
    three = hour + dt.timedelta(hours=1)
    assert maintenance_due("0 3 * * *", three, three)  # an empty interval at a schedule time
    with pytest.raises(Exception, match="maintenance.orphan_age_hours"):
        settings(maintenance={"enabled": True, "orphan_age_hours": 1})


def test_continuous_mode_waits_for_the_apply_application_instead_of_merging() -> None:
    s = settings(merge={"namespace": "lake.cdc", "mode": "continuous", "apply_timeout_seconds": 120})
    dag = cdc_replication_dag(s, dag_id="cdc_continuous", window_mode="interval")
    assert "merge" not in dag.task_dict
    wait = dag.task_dict["wait_for_apply"]
    assert type(wait).__name__ == "WaitForAppliedWindowsOperator"
    assert (wait.staging_path, wait.timeout_seconds, wait.retries) == ("/tmp/staging", 120, 0)
    assert wait.trigger_rule == "all_done"  # as the batch merge: the windows that exist
    assert dag.task_dict["wait_for_apply"].upstream_task_ids == {"snapshot", "extract"}
    assert "wait_for_apply" in dag.task_dict["commit_watermarks"].upstream_task_ids
    # batch stays the default
    assert "merge" in cdc_replication_dag(settings(), dag_id="cdc_batch").task_dict
    with pytest.raises(ValueError, match="mode"):
        settings(merge={"namespace": "lake.cdc", "mode": "streaming"})


def test_the_continuous_apply_dag_runs_the_application_with_the_pipelines_merge_options() -> None:
    from airflow_provider_sqlserver_cdc.pipeline import cdc_continuous_apply_dag
    from airflow_provider_sqlserver_cdc.spark import CONTINUOUS_APPLY_JOB_PATH

    s = settings(
        merge={"namespace": "lake.cdc", "mode": "continuous", "delete_mode": "hard", "concurrent_tables": 2}
    )
    dag = cdc_continuous_apply_dag(s, dag_id="cdc_apply")
    task = dag.task_dict["continuous_apply"]
    assert task.application == CONTINUOUS_APPLY_JOB_PATH
    assert (task.staging_path, task.retries, task.execution_timeout) == ("/tmp/staging", 100, None)
    arguments = task.merge_arguments
    assert arguments[arguments.index("--namespace") + 1] == "lake.cdc"
    assert arguments[arguments.index("--delete-mode") + 1] == "hard"
    assert arguments[arguments.index("--concurrent-tables") + 1] == "2"
    assert "--manifest" not in arguments
    assert task.conf == {"spark.sql.catalog.lake.type": "hadoop"} and task.jars == "/jars/iceberg.jar"


def test_every_run_checks_the_retention_headroom_after_the_commit_whatever_happened() -> None:
    dag = cdc_replication_dag(
        settings(
            retention_headroom={"warning_minutes": 600, "critical_minutes": 60, "retention_minutes": 1440}
        ),
        dag_id="headroom",
    )
    check = dag.task_dict["retention_headroom"]
    assert check.upstream_task_ids == {"commit_watermarks", "tables"}
    assert check.trigger_rule == "all_done" and check.retries == 0
    assert (check.warning_minutes, check.critical_minutes, check.retention_minutes) == (600, 60, 1440)
    assert (check.sqlserver_cdc_conn_id, check.database, check.server_time_zone) == (
        "shop",
        "shop_db",
        "Europe/Berlin",
    )
    off = cdc_replication_dag(settings(retention_headroom={"enabled": False}), dag_id="no_headroom")
    assert "retention_headroom" not in off.task_dict
    with pytest.raises(Exception, match="retention_headroom.warning_minutes"):
        settings(retention_headroom={"warning_minutes": 10, "critical_minutes": 20})


def test_the_headroom_check_on_its_own_schedule() -> None:
    from airflow_provider_sqlserver_cdc.pipeline import retention_headroom_dag

    dag = retention_headroom_dag(settings(), dag_id="headroom_alone", schedule="*/5 * * * *")
    (check,) = dag.tasks
    assert check.capture_instances == ["dbo_orders", "dbo_customers"] and not check.upstream_task_ids
