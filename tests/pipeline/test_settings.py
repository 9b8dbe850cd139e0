"""ReplicationSettings: documented defaults in one place, overrides, environment references, refused keys."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator
from airflow_provider_sqlserver_cdc.pipeline import (
    MergeSettings,
    ReplicationSettings,
    SensorSettings,
    SettingsError,
)
from airflow_provider_sqlserver_cdc.pipeline.settings import operator_default

REQUIRED: dict[str, Any] = {
    "tables": ["dbo_orders"],
    "staging_path": "/tmp/w",
    "merge": {"namespace": "lake.cdc"},
}


def settings(**overrides: Any) -> ReplicationSettings:
    return ReplicationSettings.from_mapping({**REQUIRED, **overrides}, environ={})


def test_the_documented_defaults() -> None:
    s = settings()
    assert s.tables == ("dbo_orders",)
    assert (s.source.conn_id, s.source.database, s.source.server_time_zone) == (
        "sqlserver_cdc_default",
        None,
        None,
    )
    assert (s.extract.batch_size, s.extract.max_file_bytes) == (50_000, 128 * 1024 * 1024)
    assert (s.extract.row_filter_option, s.extract.execution_timeout_minutes) == ("all update old", 30.0)
    assert (s.snapshot.chunk_rows, s.snapshot.allow_table_lock_fallback) == (500_000, False)
    assert s.snapshot.execution_timeout_minutes == 30.0
    assert (s.merge.write_mode, s.merge.delete_mode) == ("merge-on-read", "soft")
    assert (s.merge.table_name_template, s.merge.execution_timeout_minutes) == ("{schema}_{table}", 60.0)
    assert dict(s.merge.table_properties) == {}
    assert s.sensor == SensorSettings(
        mode="reschedule", deferrable=False, poke_interval_seconds=60, timeout_seconds=3600
    )
    assert (s.spark.conn_id, s.spark.jars, dict(s.spark.conf)) == ("spark_default", None, {})
    assert (s.dag.schedule, s.dag.watermark_schedule) == ("@hourly", "*/15 * * * *")
    assert s.dag.start_date == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert (s.dag.max_active_runs, s.dag.retries) == (1, 3)
    assert s.dag.default_args() == {"retries": 3, "retry_delay": dt.timedelta(seconds=120)}


@pytest.mark.parametrize(
    ("section", "name", "operator", "parameter"),
    [
        ("extract", "batch_size", CdcExtractOperator, "batch_size"),
        ("extract", "max_file_bytes", CdcExtractOperator, "max_file_bytes"),
        ("extract", "row_filter_option", CdcExtractOperator, "row_filter_option"),
        ("snapshot", "chunk_rows", CdcSnapshotOperator, "chunk_rows"),
        ("merge", "write_mode", CdcSparkMergeOperator, "write_mode"),
        ("merge", "delete_mode", CdcSparkMergeOperator, "delete_mode"),
        ("merge", "merge_strategy", CdcSparkMergeOperator, "merge_strategy"),
        ("source", "conn_id", CdcExtractOperator, "sqlserver_cdc_conn_id"),
    ],
)
def test_operator_arguments_default_to_the_operators_defaults(
    section: str, name: str, operator: type, parameter: str
) -> None:
    assert getattr(getattr(settings(), section), name) == operator_default(operator, parameter)


def test_a_mapping_overrides_only_what_it_names() -> None:
    s = settings(extract={"batch_size": 10_000}, merge={"namespace": "cat.ns", "write_mode": "copy-on-write"})
    assert s.extract.batch_size == 10_000
    assert s.extract.max_file_bytes == 128 * 1024 * 1024
    assert (s.merge.namespace, s.merge.write_mode, s.merge.delete_mode) == ("cat.ns", "copy-on-write", "soft")


def test_settings_are_frozen_and_read_only() -> None:
    s = settings(spark={"conf": {"spark.ui.enabled": False, "spark.sql.shuffle.partitions": 8}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.staging_path = "/elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.spark.conf["x"] = "y"  # type: ignore[index]
    # Spark and Iceberg spell booleans in lower case.
    assert dict(s.spark.conf) == {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8"}


def test_environment_references_are_expanded_and_typed() -> None:
    data = {
        **REQUIRED,
        "staging_path": "${STAGING:-/tmp/default}",
        "sensor": {"poke_interval_seconds": "${POKE}", "deferrable": "${DEFER:-false}"},
        "extract": {"batch_size": "${BATCH:-1000}"},
        "spark": {"jars": "${JARS:-}", "conf": {"spark.sql.catalog.lake.warehouse": "${WH:-/wh}"}},
        "dag": {"schedule": "${SCHEDULE:-@hourly}", "start_date": "${START:-2026-02-01T00:00:00+00:00}"},
    }
    s = ReplicationSettings.from_mapping(
        data, environ={"POKE": "2", "DEFER": "true", "SCHEDULE": "* * * * *"}
    )
    assert s.staging_path == "/tmp/default"
    assert (s.sensor.poke_interval_seconds, s.sensor.deferrable) == (2.0, True)
    assert s.extract.batch_size == 1000
    assert s.spark.jars is None  # an empty value: the cluster provides the jars
    assert s.spark.conf["spark.sql.catalog.lake.warehouse"] == "/wh"
    assert s.dag.schedule == "* * * * *"
    assert s.dag.start_date == dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    # An empty environment value counts as unset, as in the shell's ${NAME:-default}.
    assert (
        ReplicationSettings.from_mapping(data, environ={"POKE": "2", "STAGING": ""}).staging_path
        == "/tmp/default"
    )


def test_an_unset_environment_reference_without_default_names_key_and_variable() -> None:
    with pytest.raises(SettingsError, match=r"^staging_path: \$\{CDC_UNSET\} is not set in the environment"):
        settings(staging_path="${CDC_UNSET}")


def test_an_environment_value_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(
        SettingsError, match=r"extract\.batch_size: the environment gives 'lots', not an integer"
    ):
        ReplicationSettings.from_mapping(
            {**REQUIRED, "extract": {"batch_size": "${B}"}}, environ={"B": "lots"}
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"merge": {"namespace": "x", "write_mod": "copy-on-write"}},
            r"^merge\.write_mod: unknown setting; known here: namespace, ",
        ),
        ({"stagingpath": "/x"}, r"^stagingpath: unknown setting"),
        ({"extract": {"batch_size": "50k"}}, r"^extract\.batch_size: expected a number \(int\), got '50k'"),
        ({"extract": {"batch_size": 1.5}}, r"^extract\.batch_size: expected a number \(int\)"),
        ({"sensor": {"deferrable": "yes"}}, r"^sensor\.deferrable: expected true or false"),
        ({"sensor": {"timeout_seconds": True}}, r"^sensor\.timeout_seconds: expected a number"),
        ({"sensor": {"mode": "wait"}}, r"^sensor\.mode: must be one of \('reschedule', 'poke'\)"),
        ({"sensor": "poke"}, r"^sensor: expected a mapping of settings, got 'poke'"),
        ({"tables": "dbo_orders"}, r"^tables: expected a list"),
        ({"tables": ["a", 1]}, r"^tables\[1\]: expected text, got 1"),
        ({"tables": ["a", "a"]}, r"^tables: lists a capture instance twice: a"),
        ({"snapshot": {"chunk_rows": 0}}, r"^snapshot\.chunk_rows: must be positive"),
        ({"spark": {"conf": {"k": ["v"]}}}, r"^spark\.conf\['k'\]: expected text or a number"),
        ({"dag": {"start_date": "yesterday"}}, r"^dag\.start_date: expected an ISO 8601 date and time"),
        ({"dag": {"max_active_runs": 0}}, r"^dag\.max_active_runs: must be at least 1"),
        ({"merge": {}}, r"^merge\.namespace: required"),
        (
            {"merge": {"namespace": "lake.cdc", "merge_strategy": "fast"}},
            r"^merge\.merge_strategy: must be one of \('auto', 'merge', 'rewrite'\)",
        ),
    ],
)
def test_bad_settings_are_refused_naming_the_key(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings(**overrides)


@pytest.mark.parametrize("missing", ["tables", "staging_path", "merge"])
def test_required_settings_are_named(missing: str) -> None:
    data = {k: v for k, v in REQUIRED.items() if k != missing}
    key = "merge.namespace" if missing == "merge" else missing
    with pytest.raises(SettingsError, match=rf"^{key}: required \(it has no default\)"):
        ReplicationSettings.from_mapping(data)


def test_settings_built_in_python_are_checked_too() -> None:
    with pytest.raises(SettingsError, match=r"^merge\.execution_timeout_minutes: expected a number"):
        MergeSettings(namespace="lake.cdc", execution_timeout_minutes="1h")  # type: ignore[arg-type]
    s = ReplicationSettings(tables=["dbo_orders"], staging_path="/w", merge=MergeSettings(namespace="n"))  # type: ignore[arg-type]
    assert s.tables == ("dbo_orders",) and s.extract.batch_size == 50_000


def test_from_yaml_names_the_file_and_ignores_references_in_comments(tmp_path: Path) -> None:
    config = tmp_path / "cdc.yaml"
    config.write_text(
        "# ${IGNORED} in a comment is fine\n"
        + yaml.safe_dump({**REQUIRED, "extract": {"batch_size": 7}})
        + "sensor:\n  poke_interval_seconds: ${CDC_POKE:-5}   # ${ALSO_IGNORED}\n"
        + "dag:\n  start_date: 2026-03-01\n"
    )
    s = ReplicationSettings.from_yaml(config, environ={})
    assert (s.extract.batch_size, s.sensor.poke_interval_seconds) == (7, 5.0)
    assert s.dag.start_date == dt.datetime(2026, 3, 1, tzinfo=dt.UTC)  # a YAML date: midnight UTC
    config.write_text(yaml.safe_dump({**REQUIRED, "merge": {"namespace": "n", "modus": "x"}}))
    with pytest.raises(SettingsError, match=r"^cdc\.yaml: merge\.modus: unknown setting"):
        ReplicationSettings.from_yaml(config)
    config.write_text("")  # tables may be listed per source instead (sources:), staging_path may not
    with pytest.raises(SettingsError, match=r"^cdc\.yaml: staging_path: required"):
        ReplicationSettings.from_yaml(config)
