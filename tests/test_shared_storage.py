"""shared_storage: which paths are local, which executors share a filesystem, and the refusal."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.errors import LocalPathError
from airflow_provider_sqlserver_cdc.shared_storage import (
    catalog_warehouses,
    check_shared_paths,
    configured_executors,
    distributed_executor,
    local_path,
    runs_in_process,
)

CELERY = "airflow.providers.celery.executors.celery_executor.CeleryExecutor"


@pytest.mark.parametrize(
    ("path", "local"),
    [
        ("/data/staging", "/data/staging"),
        ("staging", "staging"),
        ("file:///data/staging", "/data/staging"),
        ("C:\\staging", "C:\\staging"),
        ("s3://bucket/staging", None),
        ("gs://bucket/staging", None),
        ("abfs://container@account.dfs.core.windows.net/x", None),
        ("hdfs://namenode/staging", None),
        ("memory://staging", None),
    ],
)
def test_local_paths_have_no_scheme_or_file(path: str, local: str | None) -> None:
    assert local_path(path) == local


def test_executor_config_sections_aliases_and_module_paths() -> None:
    defaults, aliases = configured_executors(f"LocalExecutor, my_celery:{CELERY};team1=KubernetesExecutor")
    assert defaults == ["LocalExecutor", "KubernetesExecutor"]
    assert aliases == {
        "LocalExecutor": "LocalExecutor",
        "my_celery": "CeleryExecutor",
        "KubernetesExecutor": "KubernetesExecutor",
    }


@pytest.mark.parametrize(
    ("config", "task_executors", "distributed"),
    [
        ("LocalExecutor", [None], None),
        ("SequentialExecutor", [None], None),
        ("CeleryExecutor", [None], "CeleryExecutor"),
        (CELERY, [None], "CeleryExecutor"),
        ("KubernetesExecutor", [None], "KubernetesExecutor"),
        ("airflow.providers.edge3.executors.EdgeExecutor", [None], "EdgeExecutor"),
        ("airflow.providers.amazon.aws.executors.ecs.ecs_executor.AwsEcsExecutor", [None], "AwsEcsExecutor"),
        # the first entry is the default; a task names another one with its executor argument
        ("LocalExecutor,CeleryExecutor", [None, None], None),
        (f"LocalExecutor,my_celery:{CELERY}", [None, "my_celery"], "CeleryExecutor"),
        ("CeleryExecutor,LocalExecutor", ["LocalExecutor"], None),
    ],
)
def test_which_executors_run_tasks_on_other_machines(
    config: str, task_executors: list[str | None], distributed: str | None
) -> None:
    assert distributed_executor(task_executors, config) == distributed


def test_a_local_path_with_a_distributed_executor_is_refused_naming_setting_path_and_executor() -> None:
    with pytest.raises(LocalPathError) as refused:
        check_shared_paths({"staging_path": "/data/staging"}, config="CeleryExecutor")
    message = str(refused.value)
    assert "staging_path" in message and "'/data/staging'" in message and "CeleryExecutor" in message
    assert "s3://" in message and "[sqlserver_cdc] shared_local_paths" in message
    assert "\n" not in message


def test_shared_uris_local_executor_and_templates_are_accepted() -> None:
    check_shared_paths({"staging_path": "s3://bucket/staging"}, config="CeleryExecutor")
    check_shared_paths({"staging_path": "/data/staging"}, config="LocalExecutor")
    check_shared_paths({"staging_path": "{{ var.value.staging }}"}, config="CeleryExecutor")


def test_paths_under_declared_shared_mounts_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__SQLSERVER_CDC__SHARED_LOCAL_PATHS", "/mnt/lake/, /shared")
    check_shared_paths(
        {"staging_path": "/mnt/lake/staging", "warehouse": "file:///shared"}, config="CeleryExecutor"
    )
    with pytest.raises(LocalPathError, match="'/mnt/lakehouse'"):
        check_shared_paths({"staging_path": "/mnt/lakehouse"}, config="CeleryExecutor")


def test_catalog_warehouses_skip_rest_catalogs() -> None:
    conf = {
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": "/data/warehouse",
        "spark.sql.catalog.polaris.type": "rest",
        "spark.sql.catalog.polaris.warehouse": "analytics",
        "spark.sql.catalog.tabular.catalog-impl": "org.apache.iceberg.rest.RESTCatalog",
        "spark.sql.catalog.tabular.warehouse": "sandbox",
        "spark.sql.extensions": "x",
    }
    assert catalog_warehouses(conf) == {"spark.sql.catalog.lake.warehouse": "/data/warehouse"}


def test_outside_dag_test_tasks_do_not_run_in_process() -> None:
    assert runs_in_process() is False
