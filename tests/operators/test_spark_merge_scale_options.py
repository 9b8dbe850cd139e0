"""partition_buckets and concurrent_tables from the merge operator and the pipeline settings to the job's command line."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator, merge_job_arguments
from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import SettingsError
from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args

SECRET = "s3cret-Pa55"


class _Popen:
    """Stands in for spark-submit (the edge: tests/spark/test_standalone_cluster.py runs the real one)."""

    commands: list[list[str]] = []

    def __init__(self, command: list[str], **kwargs: Any) -> None:
        _Popen.commands.append(list(command))
        self.stdout = io.StringIO("")
        self.returncode = 0

    def wait(self) -> int:
        return 0


@pytest.fixture
def spark_submit(monkeypatch: pytest.MonkeyPatch) -> type[_Popen]:
    """Record the spark-submit commands instead of running them; the Spark connection is a standalone master."""
    _Popen.commands = []
    monkeypatch.setattr("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", _Popen)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", "spark://127.0.0.1:7077")
    return _Popen


class _TaskInstance:
    def xcom_push(self, key: str, value: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("buckets", "tables", "expected", "parsed"),
    [
        (0, 1, [], (0, 1)),
        (8, 4, ["--partition-buckets", "8", "--concurrent-tables", "4"], (8, 4)),
        ("auto", "3", ["--partition-buckets", "auto", "--concurrent-tables", "3"], (None, 3)),
        (" AUTO ", 1, ["--partition-buckets", "auto"], (None, 1)),
        ("16", 1, ["--partition-buckets", "16"], (16, 1)),
    ],
)
def test_the_job_gets_what_the_operator_was_given(
    buckets: Any, tables: Any, expected: list[str], parsed: tuple[int | None, int]
) -> None:
    arguments = merge_job_arguments(
        ["/w/a"], namespace="lake.cdc", partition_buckets=buckets, concurrent_tables=tables
    )
    assert arguments[arguments.index("merge-on-read") + 1 :] == expected
    settings = parse_args(arguments)  # the job's own parser takes them as meant
    assert (settings.partition_buckets, settings.concurrent_tables) == parsed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"partition_buckets": -1},
            r"merge: partition_buckets must be a whole number of at least 0 .*got -1",
        ),
        ({"partition_buckets": "many"}, r"partition_buckets must be .* or 'auto' .*got 'many'"),
        ({"partition_buckets": True}, r"partition_buckets must be .*got True"),
        ({"concurrent_tables": 0}, r"merge: concurrent_tables must be a whole number of at least 1 .*got 0"),
        ({"concurrent_tables": "2.5"}, r"concurrent_tables must be .*got '2.5'"),
    ],
)
def test_bad_values_are_refused_when_the_dag_is_built(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CdcSparkMergeOperator(task_id="merge", windows="/w/a", namespace="lake.cdc", **kwargs)


def test_templated_values_are_checked_once_rendered(spark_submit: type[_Popen]) -> None:
    operator = CdcSparkMergeOperator(
        task_id="merge",
        windows="/w/a",
        namespace="lake.cdc",
        partition_buckets="{{ params.buckets }}",
        concurrent_tables="{{ params.tables }}",
    )
    assert {"partition_buckets", "concurrent_tables"} <= set(operator.template_fields)
    operator.render_template_fields({"params": {"buckets": "auto", "tables": 5}})
    operator.execute({"ti": _TaskInstance()})
    command = spark_submit.commands[0]
    assert command[command.index("--master") + 1] == "spark://127.0.0.1:7077"
    arguments = command[command.index(operator.application) + 1 :]
    assert arguments[-4:] == ["--partition-buckets", "auto", "--concurrent-tables", "5"]

    operator.concurrent_tables = "0"  # as a template could render it
    with pytest.raises(ValueError, match="concurrent_tables must be a whole number of at least 1 .*got '0'"):
        operator.execute({"ti": _TaskInstance()})


def test_the_pipeline_settings_reach_the_spark_submit_command(
    spark_submit: type[_Popen], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_PG_TARGET",
        json.dumps(
            {"conn_type": "postgres", "host": "pg", "login": "rep", "password": SECRET, "schema": "r"}
        ),
    )
    data = {
        "tables": ["dbo_orders"],
        "staging_path": "/tmp/staging",
        "merge": {"namespace": "lake.cdc", "partition_buckets": "${BUCKETS}", "concurrent_tables": 6},
    }
    settings = ReplicationSettings.from_mapping(data, environ={"BUCKETS": "auto"})
    assert (settings.merge.partition_buckets, settings.merge.concurrent_tables) == ("auto", 6)
    merge = cdc_replication_dag(settings, dag_id="cdc_scale").task_dict["merge"]
    assert (merge.partition_buckets, merge.concurrent_tables) == ("auto", 6)
    merge.windows = "/w/a"
    merge.execute({"ti": _TaskInstance()})
    arguments = spark_submit.commands[0][spark_submit.commands[0].index(merge.application) + 1 :]
    assert arguments[-4:] == ["--partition-buckets", "auto", "--concurrent-tables", "6"]

    # A JDBC target's login never joins them on the command line.
    jdbc = {
        **data["merge"],
        "namespace": "cdc",  # a PostgreSQL schema: one part
        "partition_buckets": 8,
        "target": {"kind": "postgres", "conn_id": "pg_target"},
    }
    settings = ReplicationSettings.from_mapping({**data, "merge": jdbc}, environ={"BUCKETS": "8"})
    assert settings.merge.partition_buckets == "8"  # YAML's number, as text
    merge = cdc_replication_dag(settings, dag_id="cdc_scale_jdbc").task_dict["merge"]
    merge.windows = "/w/a"
    merge.execute({"ti": _TaskInstance()})
    command = spark_submit.commands[-1]
    assert command[-4:] == ["--partition-buckets", "8", "--concurrent-tables", "6"]
    assert not any(SECRET in part or part == "rep" for part in command)


@pytest.mark.parametrize(
    ("merge", "message"),
    [
        (
            {"partition_buckets": "lots"},
            r"^merge\.partition_buckets: must be a whole number of at least 0 .*'auto'",
        ),
        ({"partition_buckets": -2}, r"^merge\.partition_buckets: must be .*got '-2'"),
        ({"concurrent_tables": 0}, r"^merge\.concurrent_tables: must be a whole number of at least 1"),
        ({"concurrent_tables": "two"}, r"^merge\.concurrent_tables: expected a number"),
    ],
)
def test_the_settings_refuse_bad_values_by_key(merge: dict[str, Any], message: str) -> None:
    data = {"tables": ["dbo_orders"], "staging_path": "/s", "merge": {"namespace": "lake.cdc", **merge}}
    with pytest.raises(SettingsError, match=message):
        ReplicationSettings.from_mapping(data, environ={})


def test_the_settings_default_to_the_operators_defaults() -> None:
    settings = ReplicationSettings.from_mapping(
        {"tables": ["dbo_orders"], "staging_path": "/s", "merge": {"namespace": "lake.cdc"}}, environ={}
    )
    assert (settings.merge.partition_buckets, settings.merge.concurrent_tables) == ("0", 1)
    operator = CdcSparkMergeOperator(task_id="merge", windows="/w/a")
    assert (operator.partition_buckets, operator.concurrent_tables) == (0, 1)
