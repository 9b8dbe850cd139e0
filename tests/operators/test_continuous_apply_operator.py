"""ContinuousApplyOperator: the spark-submit of the continuous apply application (the application itself: tests/spark/continuous)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.operators.continuous_apply import ContinuousApplyOperator
from airflow_provider_sqlserver_cdc.spark import CONTINUOUS_APPLY_JOB_PATH, merge_job_py_files


def test_the_operator_submits_the_application_with_the_staging_path_and_the_merge_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    submitted: list[Any] = []
    # The edge: spark-submit itself (run for real in tests/spark/continuous/test_apply_application.py).
    monkeypatch.setattr(
        "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator.execute",
        lambda self, context: submitted.append(
            (self.application, list(self.application_args), self.py_files)
        ),
    )
    operator = ContinuousApplyOperator(
        task_id="continuous_apply",
        staging_path="s3a://bucket/staging",
        merge_arguments=["--namespace", "lake.cdc", "--delete-mode", "soft"],
        poll_seconds=3,
        py_files="/x/mine.zip",
    )
    operator.execute({})
    application, arguments, py_files = submitted[0]
    assert application == CONTINUOUS_APPLY_JOB_PATH
    assert arguments == [
        "--staging-path",
        "s3a://bucket/staging",
        "--poll-seconds",
        "3",
        "--namespace",
        "lake.cdc",
        "--delete-mode",
        "soft",
    ]
    assert py_files == f"/x/mine.zip,{merge_job_py_files()}"
    assert "staging_path" in ContinuousApplyOperator.template_fields
    with pytest.raises(ValueError, match="take no --manifest"):
        ContinuousApplyOperator(task_id="a", staging_path="/s", merge_arguments=["--manifest", "/w"])
