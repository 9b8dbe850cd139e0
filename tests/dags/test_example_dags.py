"""The example DAGs load without import errors and are wired as their docstrings promise."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, SettingsError

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"
CONFIG = DAGS_FOLDER / "sqlserver_cdc_config.yaml"
EXAMPLE_DAG_IDS = {"sqlserver_cdc_to_iceberg", "sqlserver_cdc_to_iceberg_watermark"}
CHANGE_TRACKING_DAG_ID = "sqlserver_change_tracking_to_iceberg"
DOWNSTREAM_DAG_ID = "sqlserver_cdc_orders_delta"
SEVERAL_SOURCES_DAG_ID = "sqlserver_cdc_several_sources"


@pytest.fixture(scope="module")
def dag_bag():
    from airflow.dag_processing.dagbag import BundleDagBag

    return BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=DAGS_FOLDER)


def test_every_example_dag_loads_without_import_errors(dag_bag) -> None:
    assert dag_bag.import_errors == {}
    assert set(dag_bag.dags) == EXAMPLE_DAG_IDS | {
        CHANGE_TRACKING_DAG_ID,
        DOWNSTREAM_DAG_ID,
        SEVERAL_SOURCES_DAG_ID,
    }
    # Every Python file in dags/ is a DAG of a few lines: the pipeline is the package's factory.
    for path in DAGS_FOLDER.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 30, path.name


@pytest.mark.parametrize("dag_id", sorted(EXAMPLE_DAG_IDS))
def test_the_chain_per_capture_instance(dag_bag, dag_id: str) -> None:
    dag = dag_bag.dags[dag_id]
    tasks = dag.task_dict
    # Per capture instance, with dynamic task mapping.
    for task_id in ("snapshot", "wait_for_capture", "extract"):
        assert tasks[task_id].is_mapped, task_id
    assert tasks["extract"].upstream_task_ids >= {"wait_for_capture", "extract_list"}
    assert tasks["merge"].upstream_task_ids == {"snapshot", "extract"}
    # The commit takes the windows the merge took: it waits for the merge alone.
    assert tasks["commit_watermarks"].upstream_task_ids == {"merge"}
    # A path with nothing to do is skipped, and a failed extract[i] leaves the other windows: the merge
    # runs once every window task is done, on the windows that exist (issue 36).
    assert tasks["merge"].trigger_rule == "all_done"
    assert tasks["commit_watermarks"].trigger_rule == "all_success"
    # The leaf that fails the run naming the capture instances whose task failed.
    outcome = tasks["run_outcome"]
    assert outcome.trigger_rule == "all_done" and outcome.retries == 0
    assert outcome.upstream_task_ids >= {
        "plan",
        "snapshot",
        "wait_for_capture",
        "extract",
        "merge",
        "commit_watermarks",
    }
    assert not outcome.downstream_task_ids
    # Retries everywhere (every step is idempotent), except the sensor whose timeout is an answer.
    assert tasks["extract"].partial_kwargs["retries"] == 3
    assert tasks["merge"].retries == 3
    assert tasks["wait_for_capture"].partial_kwargs["retries"] == 0
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    mode = "watermark" if dag_id.endswith("watermark") else "interval"
    assert tasks["extract"].partial_kwargs["window_mode"] == mode
    # The DAG's page shows why its settings are safe.
    assert "Why the defaults (settings.py) are safe" in dag.doc_md


def test_the_config_only_overrides_documented_defaults() -> None:
    """Each key the YAML sets differs from the default or is an environment hook (``${NAME...}``)."""
    raw = yaml.safe_load(CONFIG.read_text())
    defaults = ReplicationSettings.from_mapping(
        {"tables": ["x"], "staging_path": "/x", "merge": {"namespace": "x"}}, environ={}
    )
    for section, values in raw.items():
        if not isinstance(values, dict) or section == "merge":
            continue
        for key, value in values.items():
            is_environment_hook = isinstance(value, str) and value.startswith("${")
            assert is_environment_hook or value != getattr(getattr(defaults, section), key), (section, key)


def test_interval_dag_is_hourly_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SQLSERVER_CDC_SCHEDULE", raising=False)
    assert ReplicationSettings.from_yaml(CONFIG).dag.schedule == "@hourly"


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


def test_merge_gets_spark_settings_but_no_secret(dag_bag) -> None:
    conf = ReplicationSettings.from_yaml(CONFIG).spark.conf
    assert conf["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
    assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    assert not any("password" in k.lower() or "secret" in k.lower() for k in conf)
    assert dag_bag.dags["sqlserver_cdc_to_iceberg"].task_dict["merge"].conf == dict(conf)


def test_environment_overrides_and_minutely_schedule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SQLSERVER_CDC_SCHEDULE", "* * * * *")
    monkeypatch.setenv("SQLSERVER_CDC_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.setenv("SQLSERVER_CDC_POKE_INTERVAL_SECONDS", "2")
    monkeypatch.delenv("SQLSERVER_CDC_SPARK_JARS", raising=False)
    settings = ReplicationSettings.from_yaml(CONFIG)
    assert settings.dag.schedule == "* * * * *"
    assert settings.spark.conf["spark.sql.catalog.lake.warehouse"] == str(tmp_path / "wh")
    assert settings.sensor.poke_interval_seconds == 2.0
    assert settings.spark.jars is None  # empty default: the cluster provides Iceberg


def test_missing_environment_value_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_UNSET_FOR_TEST", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text("# ${IGNORED} in a comment is fine\ntables: [a]\nstaging_path: ${CDC_UNSET_FOR_TEST}\n")
    with pytest.raises(
        SettingsError, match=r"staging_path: \$\{CDC_UNSET_FOR_TEST\} is not set in the environment"
    ):
        ReplicationSettings.from_yaml(config)


def test_incomplete_settings_name_what_is_missing(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"source": {"conn_id": "x"}, "tables": ["dbo_orders"]}))
    with pytest.raises(SettingsError, match=r"config\.yaml: staging_path: required"):
        ReplicationSettings.from_yaml(config)


def test_change_tracking_tables_share_the_merge_and_the_watermark_commit(dag_bag) -> None:
    tasks = dag_bag.dags[CHANGE_TRACKING_DAG_ID].task_dict
    for task_id in ("ct_snapshot", "ct_wait_for_version", "ct_extract"):
        assert tasks[task_id].is_mapped, task_id
    assert tasks["ct_extract"].upstream_task_ids >= {"ct_wait_for_version", "ct_extract_list"}
    assert tasks["merge"].upstream_task_ids == {"snapshot", "extract", "ct_snapshot", "ct_extract"}
    assert tasks["commit_watermarks"].upstream_task_ids == {"merge"}
    assert tasks["run_outcome"].upstream_task_ids >= {
        "ct_snapshot",
        "ct_extract",
        "merge",
        "commit_watermarks",
    }
    assert tasks["ct_extract"].partial_kwargs["window_mode"] == "interval"
    assert tasks["ct_plan"].tables == ["dbo.orders", "dbo.order_lines", "dbo.type_zoo"]
    assert tasks["ct_plan"].auto_resnapshot is False  # SQLSERVER_CT_AUTO_RESNAPSHOT=true turns it on


def test_the_downstream_example_is_scheduled_on_an_outlet_of_the_merge(dag_bag) -> None:
    """dags/sqlserver_cdc_orders_delta.py runs on the partitioned events of the merge's dbo_orders asset."""
    from airflow.sdk import PartitionedAssetTimetable

    downstream = dag_bag.dags[DOWNSTREAM_DAG_ID]
    assert isinstance(downstream.timetable, PartitionedAssetTimetable) or downstream.timetable.partitioned
    merge = dag_bag.dags["sqlserver_cdc_to_iceberg"].task_dict["merge"]
    (orders,) = [a for a in merge.outlets if a.uri.endswith("/dbo_orders")]
    assert orders.uri == "iceberg://lake/cdc/dbo_orders"
    assert downstream.timetable.asset_condition == orders


def test_every_example_dag_loads_with_a_postgresql_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """The YAML's environment switches the examples to a PostgreSQL target (as tests/e2e/test_postgres_target.py does)."""
    from airflow.dag_processing.dagbag import BundleDagBag

    monkeypatch.setenv("SQLSERVER_CDC_TARGET_KIND", "postgres")
    monkeypatch.setenv("SQLSERVER_CDC_NAMESPACE", "cdc")
    monkeypatch.setenv("SQLSERVER_CDC_TARGET_CONN_ID", "pg_example")
    bag = BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=DAGS_FOLDER)
    assert bag.import_errors == {}
    # The downstream example reads an Iceberg delta: it defines no DAG for a PostgreSQL target.
    assert "sqlserver_cdc_orders_delta" not in bag.dag_ids
    assert "sqlserver_cdc_to_iceberg" in bag.dag_ids
    # The target's host is in its connection, read at run time only: the outlets are aliases (docs/assets.md).
    from airflow.sdk import AssetAlias

    outlets = bag.dags["sqlserver_cdc_to_iceberg"].task_dict["merge"].outlets
    assert outlets and all(isinstance(o, AssetAlias) for o in outlets)
    assert "sqlserver_cdc.cdc.dbo_orders" in {o.name for o in outlets}


def test_continuous_mode_declares_the_batch_merges_outlets_on_wait_for_apply(
    dag_bag, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same assets in both modes: a downstream DAG does not change when the merge mode does."""
    from airflow.dag_processing.dagbag import BundleDagBag

    batch = dag_bag.dags["sqlserver_cdc_to_iceberg"].task_dict["merge"].outlets
    monkeypatch.setenv("SQLSERVER_CDC_MERGE_MODE", "continuous")
    bag = BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=DAGS_FOLDER)
    assert bag.import_errors == {}
    tasks = bag.dags["sqlserver_cdc_to_iceberg"].task_dict
    assert "merge" not in tasks
    assert tasks["wait_for_apply"].outlets == batch and batch


def test_the_several_sources_example_has_a_group_per_source(dag_bag) -> None:
    """dags/sqlserver_cdc_several_sources.py: two databases with the same tables, nothing of one waits for the other."""
    tasks = dag_bag.dags[SEVERAL_SOURCES_DAG_ID].task_dict
    for source in ("sales_eu", "sales_us"):
        group = {t for t in tasks if t.startswith(f"{source}.")}
        assert all(tasks[t].upstream_task_ids <= group for t in group)
        merge = tasks[f"{source}.merge"]
        assert merge.namespace == f"lake.cdc_{source}"
        assert tasks[f"{source}.extract"].partial_kwargs["database"] == source
        assert tasks[f"{source}.extract"].partial_kwargs["base_path"].endswith(f"/staging/{source}")
    assert len(tasks) == 2 * len({t for t in tasks if t.startswith("sales_eu.")})
