"""The reconcile in the pipeline: the factory's scheduled task and its settings; the operator's checks."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.operators.reconcile import CdcReconcileOperator
from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, cdc_replication_dag
from airflow_provider_sqlserver_cdc.reconcile import DEFAULT_LEAF_ROWS


def settings(**overrides: Any) -> ReplicationSettings:
    data = {
        "tables": ["dbo_orders", "dbo_customers"],
        "staging_path": "/tmp/staging",
        "source": {"conn_id": "shop", "database": "shop_db"},
        "merge": {"namespace": "lake.cdc", "tables": {"dbo_orders": "lake.sales.orders"}},
        "spark": {"jars": "/jars/iceberg.jar", "conf": {"spark.sql.catalog.lake.type": "hadoop"}},
        **overrides,
    }
    return ReplicationSettings.from_mapping(data, environ={})


def test_reconcile_schedule_adds_a_mapped_task_per_table_after_the_watermark_commit() -> None:
    assert settings().reconcile.schedule is None and settings().reconcile.repair is False
    assert settings().reconcile.leaf_rows == DEFAULT_LEAF_ROWS
    off = cdc_replication_dag(settings(), dag_id="no_reconcile")
    assert "reconcile" not in off.task_dict
    on = settings(reconcile={"schedule": "@daily", "repair": True, "leaf_rows": 5000})
    dag = cdc_replication_dag(on, dag_id="with_reconcile")
    task = dag.task_dict["reconcile"]
    assert task.is_mapped
    assert dag.task_dict["reconcile_window"].upstream_task_ids == {"commit_watermarks"}
    assert task.upstream_task_ids >= {"reconcile_window", "tables"}
    kwargs = task.partial_kwargs
    assert kwargs["repair"] is True and kwargs["leaf_rows"] == 5000
    assert kwargs["namespace"] == "lake.cdc" and kwargs["targets"] == {"dbo_orders": "lake.sales.orders"}
    assert kwargs["sqlserver_cdc_conn_id"] == "shop" and kwargs["jars"] == "/jars/iceberg.jar"
    jdbc = settings(
        reconcile={"schedule": "@daily"},
        merge={"namespace": "public", "target": {"kind": "postgres", "conn_id": "pg"}},
    )
    assert "reconcile" not in cdc_replication_dag(jdbc, dag_id="jdbc_reconcile").task_dict  # Iceberg only
    with pytest.raises(Exception, match="reconcile.schedule"):
        settings(reconcile={"schedule": "every day"})
    with pytest.raises(Exception, match="reconcile.leaf_rows"):
        settings(reconcile={"leaf_rows": 0})


def test_operator_checks_its_arguments_without_io() -> None:
    with pytest.raises(ValueError, match="pass namespace"):
        CdcReconcileOperator(task_id="r", capture_instance="dbo_orders", staging_path="/s")
    with pytest.raises(ValueError, match="method must be one of"):
        CdcReconcileOperator(task_id="r", capture_instance="c", staging_path="/s", namespace="n", method="x")
    operator = CdcReconcileOperator(
        task_id="r", capture_instance="c", staging_path="/s", namespace="lake.cdc"
    )
    assert operator.repair is False
    assert {"capture_instance", "repair", "namespace", "targets"} <= set(operator.template_fields)
