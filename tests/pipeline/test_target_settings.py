"""The merge.target section: a JDBC (PostgreSQL) target chosen in the settings reaches the merge operator."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.pipeline.factory import cdc_replication_dag
from airflow_provider_sqlserver_cdc.pipeline.settings import ReplicationSettings
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import SettingsError


def _settings(merge: dict) -> ReplicationSettings:
    return ReplicationSettings.from_mapping(
        {
            "tables": ["dbo_orders", "dbo_users"],
            "staging_path": "/tmp/staging",
            "merge": merge,
            "maintenance": {"enabled": True},
        },
        environ={"PG_CONN": "reporting_pg"},
    )


def test_a_jdbc_target_and_per_table_names_reach_the_merge_operator() -> None:
    settings = _settings(
        {
            "namespace": "cdc",
            "tables": {"dbo_users": "crm.users"},
            "target": {"kind": "postgres", "conn_id": "${PG_CONN}", "connections": 2},
        }
    )
    tasks = cdc_replication_dag(settings, dag_id="cdc_to_pg").task_dict
    assert "maintain_tables" not in tasks  # Iceberg maintenance: nothing to do for PostgreSQL tables
    merge = tasks["merge"]
    assert (merge.target_kind, merge.target_conn_id, merge.jdbc_connections) == (
        "postgres",
        "reporting_pg",
        2,
    )
    assert merge.targets == {"dbo_users": "crm.users"} and merge.namespace == "cdc"
    default = _settings({"namespace": "lake.cdc"})
    assert default.merge.target.kind == "iceberg" and default.merge.target.connections == 4
    assert "maintain_tables" in cdc_replication_dag(default, dag_id="cdc_to_lake").task_dict


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"kind": "oracle"}, r"merge\.target\.kind: must be one of"),
        ({"kind": "jdbc", "conn_id": "pg"}, r"merge\.target\.kind: 'jdbc' is now called 'postgres'"),
        ({"kind": "postgres"}, r"merge\.target\.conn_id: a postgres target needs conn_id"),
        (
            {"kind": "postgres", "conn_id": "pg", "connections": 0},
            r"merge\.target\.connections: must be at least 1",
        ),
        ({"kind": "postgres", "password": "x"}, r"merge\.target\.password: unknown setting"),
    ],
)
def test_bad_target_settings_are_refused_by_key(target: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        _settings({"namespace": "cdc", "target": target})
