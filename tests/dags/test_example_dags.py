"""The example DAGs load without import errors and are wired as their docstrings promise."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"
EXAMPLE_DAG_IDS = {"sqlserver_cdc_to_iceberg", "sqlserver_cdc_to_iceberg_watermark"}


def load_pipeline_module() -> ModuleType:
    """Import dags/sqlserver_cdc_pipeline.py as the DAG files do (the DAGs folder is on sys.path)."""
    if str(DAGS_FOLDER) not in sys.path:
        sys.path.append(str(DAGS_FOLDER))
    spec = importlib.util.spec_from_file_location(
        "sqlserver_cdc_pipeline", DAGS_FOLDER / "sqlserver_cdc_pipeline.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def dag_bag():
    from airflow.dag_processing.dagbag import BundleDagBag

    return BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=DAGS_FOLDER)


def test_every_example_dag_loads_without_import_errors(dag_bag) -> None:
    assert dag_bag.import_errors == {}
    assert set(dag_bag.dags) == EXAMPLE_DAG_IDS
    # The helper module is not a DAG file.
    assert "sqlserver_cdc_pipeline.py" in (DAGS_FOLDER / ".airflowignore").read_text()


@pytest.mark.parametrize("dag_id", sorted(EXAMPLE_DAG_IDS))
def test_the_chain_per_capture_instance(dag_bag, dag_id: str) -> None:
    dag = dag_bag.dags[dag_id]
    tasks = dag.task_dict
    # Per capture instance, with dynamic task mapping.
    for task_id in ("snapshot", "wait_for_capture", "extract"):
        assert tasks[task_id].is_mapped, task_id
    assert tasks["extract"].upstream_task_ids >= {"wait_for_capture", "extract_list"}
    assert tasks["merge"].upstream_task_ids == {"snapshot", "extract"}
    assert tasks["commit_watermarks"].upstream_task_ids >= {"merge", "snapshot", "extract"}
    # A path with nothing to do is skipped; the merge and the commit still run for the other one.
    assert tasks["merge"].trigger_rule == "none_failed_min_one_success"
    assert tasks["commit_watermarks"].trigger_rule == "none_failed_min_one_success"
    # Retries everywhere (every step is idempotent), except the sensor whose timeout is an answer.
    assert tasks["extract"].partial_kwargs["retries"] == 3
    assert tasks["merge"].retries == 3
    assert tasks["wait_for_capture"].partial_kwargs["retries"] == 0
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    mode = "watermark" if dag_id.endswith("watermark") else "interval"
    assert tasks["extract"].partial_kwargs["window_mode"] == mode


def test_interval_dag_is_hourly_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SQLSERVER_CDC_SCHEDULE", raising=False)
    settings = load_pipeline_module().ReplicationSettings.load()
    assert settings["schedule"] == "@hourly"


def test_interval_dag_runs_cover_a_whole_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    # Airflow 3's default (create_cron_data_intervals = False) gives cron-string schedules empty
    # data intervals; the suite's unit-test config turns it on, so parse with the default here.
    import pendulum
    from airflow.dag_processing.dagbag import BundleDagBag

    monkeypatch.setenv("AIRFLOW__SCHEDULER__CREATE_CRON_DATA_INTERVALS", "False")
    bag = BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=DAGS_FOLDER)
    timetable = bag.dags["sqlserver_cdc_to_iceberg"].timetable
    assert type(timetable).__name__ == "CronDataIntervalTimetable"
    from airflow.serialization.encoders import coerce_to_core_timetable

    interval = coerce_to_core_timetable(timetable).infer_manual_data_interval(
        run_after=pendulum.datetime(2026, 3, 1, 10, 0, tz="UTC")
    )
    assert (interval.start, interval.end) == (
        pendulum.datetime(2026, 3, 1, 9, 0, tz="UTC"),
        pendulum.datetime(2026, 3, 1, 10, 0, tz="UTC"),
    )


def test_merge_gets_spark_settings_but_no_secret() -> None:
    pipeline = load_pipeline_module()
    settings = pipeline.ReplicationSettings.load()
    conf = settings.spark_conf
    assert conf["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
    assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    assert not any("password" in k.lower() or "secret" in k.lower() for k in conf)


def test_environment_overrides_and_minutely_schedule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pipeline = load_pipeline_module()
    monkeypatch.setenv("SQLSERVER_CDC_SCHEDULE", "* * * * *")
    monkeypatch.setenv("SQLSERVER_CDC_WAREHOUSE", str(tmp_path / "wh"))
    settings = pipeline.ReplicationSettings.load()
    assert settings["schedule"] == "* * * * *"
    assert settings.spark_conf["spark.sql.catalog.lake.warehouse"] == str(tmp_path / "wh")
    assert settings.spark_jars is None  # empty default: the cluster provides Iceberg


def test_missing_environment_value_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = load_pipeline_module()
    monkeypatch.delenv("CDC_UNSET_FOR_TEST", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text("# ${IGNORED} in a comment is fine\nstaging_path: ${CDC_UNSET_FOR_TEST}\n")
    with pytest.raises(ValueError, match=r"CDC_UNSET_FOR_TEST.*not set in the environment"):
        pipeline.ReplicationSettings.load(config)


def test_incomplete_settings_name_what_is_missing(tmp_path: Path) -> None:
    pipeline = load_pipeline_module()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"source": {"conn_id": "x"}, "tables": []}))
    with pytest.raises(ValueError, match="missing section.*staging_path.*merge.*spark"):
        pipeline.ReplicationSettings.load(config)
