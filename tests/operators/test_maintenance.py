"""CdcTableMaintenanceOperator: the job's command line, the checks at DAG-build time, what it submits."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.operators.maintenance import (
    CdcTableMaintenanceOperator,
    maintenance_job_arguments,
)
from airflow_provider_sqlserver_cdc.spark import MAINTENANCE_JOB_PATH
from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import (
    MaintenanceSettings,
    Thresholds,
    parse_args,
)


def test_arguments_round_trip_through_the_jobs_parser() -> None:
    arguments = maintenance_job_arguments(
        MaintenanceSettings(
            namespace="lake.cdc",
            tables=("lake.other.t",),
            thresholds=Thresholds(delete_files=5, small_files=6, snapshots=7, metadata_bytes=8),
            snapshot_retention_hours=12,
            retain_last=3,
            orphan_age_hours=48,
            cdc_min_lsn={"dbo_orders": Lsn.from_int(0x1234)},
            tombstone_margin_hours=24,
        )
    )
    settings = parse_args(arguments)
    assert settings.namespace == "lake.cdc" and settings.tables == ("lake.other.t",)
    assert settings.thresholds == Thresholds(5, 6, 7, 8)
    assert (settings.snapshot_retention_hours, settings.retain_last, settings.orphan_age_hours) == (12, 3, 48)
    assert settings.cdc_min_lsn == {"dbo_orders": Lsn.from_int(0x1234)}
    assert settings.tombstone_margin_hours == 24 and not settings.force


def test_tombstone_purge_is_off_unless_a_margin_is_given() -> None:
    arguments = maintenance_job_arguments(
        MaintenanceSettings(namespace="lake.cdc", cdc_min_lsn={"dbo_orders": Lsn.from_int(1)})
    )
    assert "--cdc-min-lsn" not in arguments and "--tombstone-margin-hours" not in arguments
    assert parse_args(arguments).tombstone_margin_hours is None


def test_unsafe_settings_are_refused_when_the_dag_is_built() -> None:
    with pytest.raises(ValueError, match="at least 24"):
        CdcTableMaintenanceOperator(task_id="m", namespace="lake.cdc", orphan_age_hours=1)
    with pytest.raises(ValueError, match="namespace"):
        maintenance_job_arguments(MaintenanceSettings())
    with pytest.raises(SystemExit):
        parse_args(["--namespace", "lake.cdc", "--orphan-age-hours", "2"])


def test_execute_submits_the_maintenance_job_with_the_sources_min_lsns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The edges: the source (its min LSN per capture instance) and spark-submit, both replaced here;
    # the job itself runs on real Iceberg in tests/spark/maintenance.
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    submitted: dict[str, Any] = {}

    def fake_submit(operator: SparkSubmitOperator, context: Any) -> None:
        submitted.update(
            application=operator.application, args=operator.application_args, py=operator.py_files
        )

    monkeypatch.setattr(SparkSubmitOperator, "execute", fake_submit)
    operator = CdcTableMaintenanceOperator(
        task_id="maintain",
        namespace="lake.cdc",
        tombstone_margin_hours=6,
        capture_instances=["dbo_orders"],
    )
    monkeypatch.setattr(
        CdcTableMaintenanceOperator, "source_min_lsns", lambda self: {"dbo_orders": Lsn.from_int(0x99)}
    )
    operator.execute({})
    assert submitted["application"] == MAINTENANCE_JOB_PATH
    assert submitted["py"].endswith(".zip")
    settings = parse_args(submitted["args"])
    assert settings.cdc_min_lsn == {"dbo_orders": Lsn.from_int(0x99)} and settings.tombstone_margin_hours == 6
