"""The ``masking`` settings: default, checks, and how they reach the extract and snapshot tasks (the salt does not)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import SettingsError

RULES = {"dbo.customers.email": "hash", "dbo.customers.ssn": "drop", "dbo.customers.phone": "truncate(3)"}


def settings(**overrides: Any) -> ReplicationSettings:
    data = {
        "tables": ["dbo_customers"],
        "staging_path": "/tmp/staging",
        "merge": {"namespace": "lake.cdc"},
        "change_tracking": {"tables": ["dbo.accounts"]},
        **overrides,
    }
    return ReplicationSettings.from_mapping(data, environ={})


def test_nothing_is_masked_by_default() -> None:
    s = settings()
    assert dict(s.masking.columns) == {} and s.masking.salt_conn_id is None
    dag = cdc_replication_dag(s, dag_id="plain")
    for task_id in ("extract", "snapshot", "ct_extract", "ct_snapshot"):
        assert "column_masking" not in dag.task_dict[task_id].partial_kwargs


def test_the_rules_reach_every_task_that_writes_parquet_and_the_salt_stays_a_connection_id() -> None:
    s = settings(masking={"columns": RULES, "salt_conn_id": "pii_salt"})
    dag = cdc_replication_dag(s, dag_id="masked")
    for task_id in ("extract", "snapshot", "ct_extract", "ct_snapshot"):
        kwargs = dag.task_dict[task_id].partial_kwargs
        assert kwargs["column_masking"] == RULES, task_id
        assert kwargs["masking_salt_conn_id"] == "pii_salt", task_id
    for task_id in ("merge", "commit_watermarks"):
        assert "column_masking" not in getattr(dag.task_dict[task_id], "partial_kwargs", {})


@pytest.mark.parametrize(
    ("masking", "message"),
    [
        ({"columns": {"dbo.customers.email": "encrypt"}}, r"^masking\.columns: .*unknown method 'encrypt'"),
        ({"columns": {"customers.email": "drop"}}, r"^masking\.columns: .*must be schema\.table\.column"),
        (
            {"columns": {"dbo.customers.email": "hash"}},
            r"^masking\.salt_conn_id: is required when a column is hashed",
        ),
        ({"columns": ["dbo.customers.email"]}, r"^masking\.columns: expected a mapping"),
    ],
)
def test_bad_masking_settings_name_the_key(masking, message) -> None:
    with pytest.raises(SettingsError, match=message):
        settings(masking=masking)


def test_a_reconcile_of_masked_tables_is_refused_when_the_settings_are_read() -> None:
    # A reconcile compares the source's clear values; its repair would write them to the masked target.
    with pytest.raises(SettingsError, match=r"^reconcile\.schedule: cannot be set with masking\.columns"):
        settings(masking={"columns": RULES, "salt_conn_id": "pii_salt"}, reconcile={"schedule": "@daily"})
    assert settings(reconcile={"schedule": "@daily"}).reconcile.schedule == "@daily"


def test_the_operator_reads_the_salt_from_the_connection_when_the_task_runs(monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_PII_SALT", json.dumps({"conn_type": "generic", "password": "pepper"}))
    operator = CdcExtractOperator(
        task_id="extract",
        capture_instance="dbo_customers",
        base_path="/tmp/staging",
        column_masking=RULES,
        masking_salt_conn_id="pii_salt",
    )
    rules = operator.masking_rules()
    assert rules.salt == "pepper"
    assert "pepper" not in repr(rules)
    assert dict(rules.columns) == RULES
