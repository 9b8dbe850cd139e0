"""WindowTaskOperator: extract and snapshot refuse, when they run, a local base path on a distributed executor."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.errors import LocalPathError
from airflow_provider_sqlserver_cdc.operators.extract import CdcExtractOperator
from airflow_provider_sqlserver_cdc.operators.snapshot import CdcSnapshotOperator
from airflow_provider_sqlserver_cdc.operators.window_task import WindowTaskOperator

OPERATORS = [CdcExtractOperator, CdcSnapshotOperator]


class SourceOpened(Exception):
    """The path check passed and the task went on to open its source."""


@pytest.fixture(autouse=True)
def no_source(monkeypatch: pytest.MonkeyPatch) -> None:
    def source_hook(self: WindowTaskOperator) -> None:
        raise SourceOpened

    monkeypatch.setattr(WindowTaskOperator, "source_hook", source_hook)


@pytest.mark.parametrize("operator", OPERATORS)
def test_a_local_base_path_on_a_distributed_executor_is_refused_when_the_task_runs(
    operator: type[WindowTaskOperator], monkeypatch: pytest.MonkeyPatch
) -> None:
    # only the executor's name is configured: the check neither imports nor needs the Celery provider
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")
    task = operator(task_id="copy", capture_instance="dbo_orders", base_path="file:///data/staging")
    with pytest.raises(LocalPathError, match=r"^base_path of copy is the local path 'file:///data/staging'"):
        task.execute({})


@pytest.mark.parametrize("operator", OPERATORS)
def test_a_task_routed_to_a_distributed_executor_is_refused(
    operator: type[WindowTaskOperator], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "LocalExecutor,CeleryExecutor")
    task = operator(task_id="copy", capture_instance="a", base_path="/data", executor="CeleryExecutor")
    with pytest.raises(LocalPathError, match="CeleryExecutor"):
        task.execute({})


@pytest.mark.parametrize(
    ("executor", "base_path", "shared"),
    [
        ("LocalExecutor", "/data/staging", ""),
        ("CeleryExecutor", "s3://bucket/staging", ""),
        ("CeleryExecutor", "/mnt/lake/staging", "/mnt/lake"),
    ],
)
def test_shared_paths_and_the_local_executor_go_on_to_the_source(
    executor: str, base_path: str, shared: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", executor)
    monkeypatch.setenv("AIRFLOW__SQLSERVER_CDC__SHARED_LOCAL_PATHS", shared)
    for operator in OPERATORS:
        with pytest.raises(SourceOpened):
            operator(task_id="copy", capture_instance="a", base_path=base_path).execute({})


def test_a_kubernetes_executor_pod_is_refused_whatever_its_configured_executor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
    monkeypatch.setenv("AIRFLOW_IS_K8S_EXECUTOR_POD", "True")
    with pytest.raises(LocalPathError, match="KubernetesExecutor"):
        CdcExtractOperator(task_id="copy", capture_instance="a", base_path="/data").execute({})


class RecordingTi:
    """The XCom pushes of a task instance (a stand-in: no Airflow metadata database here)."""

    def __init__(self) -> None:
        self.pushed: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


@pytest.mark.parametrize("operator", OPERATORS)
def test_extract_and_snapshot_leave_a_failure_record_naming_their_capture_instances(
    operator: type[WindowTaskOperator], monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_sqlserver_cdc.operators.change_tracking import ChangeTrackingExtractOperator
    from airflow_provider_sqlserver_cdc.operators.failure_record import FAILURE_XCOM_KEY

    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
    ti = RecordingTi()
    task = operator(task_id="copy", capture_instance=["dbo_a", "dbo_b"], base_path="/data")
    with pytest.raises(SourceOpened):
        task.execute({"ti": ti})
    assert ti.pushed[FAILURE_XCOM_KEY] == {
        "capture_instances": ["dbo_a", "dbo_b"],
        "error": "SourceOpened",
        "message": "",
    }
    # the Change Tracking tasks record none (the run outcome reads the CDC tasks' records)
    untracked = RecordingTi()
    tracked = ChangeTrackingExtractOperator(task_id="ct", capture_instance="dbo.a", base_path="/data")
    with pytest.raises(SourceOpened):
        tracked.execute({"ti": untracked})
    assert untracked.pushed == {}
