"""The table-mode settings (docs/history-targets.md): defaults, checks, and how they reach the tasks."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator, merge_job_arguments
from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag
from airflow_provider_sqlserver_cdc.pipeline.continuous_apply_dag import continuous_apply_arguments
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import SettingsError
from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.table_modes import mode_conflict, parse_table_modes


def settings(**target: Any) -> ReplicationSettings:
    namespace = "cdc" if target.get("kind") == "postgres" else "lake.cdc"
    return ReplicationSettings.from_mapping(
        {
            "tables": ["dbo_orders", "dbo_heap"],
            "staging_path": "/tmp/staging",
            "merge": {"namespace": namespace, "target": target},
        },
        environ={},
    )


def test_defaults_every_table_current_and_keyless_tables_a_change_log() -> None:
    target = settings().merge.target
    assert dict(target.table_modes) == {}
    assert target.keyless == "changelog"
    assert target.require_key_columns is False
    assert settings(keyless="refuse").merge.target.require_key_columns is True
    # A PostgreSQL target has no change-log tables: its extract refuses keyless capture instances.
    jdbc = settings(kind="postgres", conn_id="warehouse").merge.target
    assert jdbc.require_key_columns is True


@pytest.mark.parametrize(
    ("target", "key", "problem"),
    [
        ({"table_modes": {"dbo_orders": "scd2"}}, "merge.target.table_modes['dbo_orders']", "must be one of"),
        ({"keyless": "skip"}, "merge.target.keyless", "must be one of"),
        (
            {"kind": "postgres", "conn_id": "w", "table_modes": {"dbo_orders": "history"}},
            "merge.target.table_modes['dbo_orders']",
            "history tables need an Iceberg target",
        ),
    ],
)
def test_bad_table_modes_are_refused_naming_the_key(target: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(SettingsError) as raised:
        settings(**target)
    assert raised.value.key == key
    assert problem in raised.value.problem


def test_the_settings_reach_the_extract_snapshot_and_merge_tasks() -> None:
    s = settings(table_modes={"dbo_orders": "history"})
    dag = cdc_replication_dag(s, dag_id="cdc_history", window_mode="interval")
    merge = dag.task_dict["merge"]
    assert merge.table_modes == {"dbo_orders": "history"}
    assert "table_modes" in CdcSparkMergeOperator.template_fields
    assert dag.task_dict["extract"].partial_kwargs["require_key_columns"] is False
    assert dag.task_dict["snapshot"].partial_kwargs["require_key_columns"] is False
    refusing = cdc_replication_dag(settings(keyless="refuse"), dag_id="cdc_refuse", window_mode="interval")
    assert refusing.task_dict["extract"].partial_kwargs["require_key_columns"] is True
    assert "dbo_orders=history" in continuous_apply_arguments(s)  # the continuous application too


def test_job_arguments_carry_the_table_modes_and_the_job_parses_them() -> None:
    arguments = merge_job_arguments(
        ["/w/_manifest.json"], namespace="lake.cdc", table_modes={"dbo_a": "changelog"}
    )
    assert arguments[arguments.index("--table-mode") + 1] == "dbo_a=changelog"
    assert parse_args(arguments).table_modes == {"dbo_a": "changelog"}
    with pytest.raises(ValueError, match="dbo_a has mode 'scd2'"):
        merge_job_arguments(["/w/_manifest.json"], namespace="lake.cdc", table_modes={"dbo_a": "scd2"})
    with pytest.raises(MergeJobError, match="expected CAPTURE_INSTANCE=MODE"):
        parse_table_modes(["dbo_a"])


def test_a_table_keeps_the_mode_it_was_created_in() -> None:
    assert mode_conflict("lake.cdc.t", None, "current") is None  # tables of older releases are current
    assert mode_conflict("lake.cdc.t", "history", "history") is None
    problem = mode_conflict("lake.cdc.t", None, "history")
    assert problem is not None and "holds a current table" in problem and "--target" in problem
