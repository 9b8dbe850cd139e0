"""
Refuse local staging and warehouse paths when the executor runs tasks on other machines.

The extract writes windows where the merge (and the Spark cluster) reads them: with a
distributed executor (Celery, Kubernetes, Edge, ECS, Batch...) those tasks may run on
different machines, so a local path (no scheme, or ``file://``) silently loses windows. An
fsspec URI (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``...) is shared. ``LocalExecutor``
(``SequentialExecutor``/``DebugExecutor`` of Airflow 2) and ``dag.test()``, which runs every
task in its own process, share the machine.

A volume mounted at the same place on every worker and on the Spark cluster is declared in
``[sqlserver_cdc] shared_local_paths`` (comma-separated directories): paths under them are accepted.

The executor of a task is its ``executor`` argument, else the default: the first entry of
``[core] executor`` (``alias:module.path.Class`` entries and ``team=...`` sections included);
a KubernetesExecutor worker pod (``AIRFLOW_IS_K8S_EXECUTOR_POD``) counts as distributed whatever
its own configuration says.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from airflow_provider_sqlserver_cdc.errors import LocalPathError
from airflow_provider_sqlserver_cdc.get_provider_info import CONFIG_SECTION

SHARED_LOCAL_PATHS = "shared_local_paths"
LOCAL_EXECUTORS = frozenset({"LocalExecutor", "SequentialExecutor", "DebugExecutor"})
K8S_EXECUTOR_POD = "AIRFLOW_IS_K8S_EXECUTOR_POD"  # set by KubernetesExecutor in its worker pods
_CATALOG_PREFIX = "spark.sql.catalog."
_WAREHOUSE_SUFFIX = ".warehouse"


def local_path(path: str) -> str | None:
    """
    Return the filesystem path of ``path`` when it is local (no scheme or ``file://``), else None.

    :param path: a directory or an fsspec URI.
    """
    parts = urlsplit(path)
    if parts.scheme == "file":
        return parts.path
    if not parts.scheme or len(parts.scheme) == 1:  # no scheme, or a Windows drive letter
        return path
    return None


def executor_class_name(entry: str) -> str:
    """
    Return the class name of one ``[core] executor`` entry (``alias:module.path.Class`` -> ``Class``).

    :param entry: an entry of the comma-separated list.
    """
    return entry.strip().split(":")[-1].split(".")[-1]


def configured_executors(config: str) -> tuple[list[str], dict[str, str]]:
    """
    Return the default executor of each ``;``-separated section and every alias with its class name.

    :param config: the value of ``[core] executor``, e.g. ``LocalExecutor;team1=CeleryExecutor``.
    """
    defaults: list[str] = []
    aliases: dict[str, str] = {}
    for section in filter(None, (s.strip() for s in config.split(";"))):
        entries = [e.strip() for e in section.split("=")[-1].split(",") if e.strip()]
        if entries:
            defaults.append(executor_class_name(entries[0]))
        for entry in entries:
            aliases[entry.split(":")[0]] = executor_class_name(entry)
    return defaults, aliases


def distributed_executor(task_executors: Iterable[str | None], config: str | None = None) -> str | None:
    """
    Return the first executor of the tasks that runs them on other machines, or None.

    :param task_executors: each task's ``executor`` argument (None: the default executor).
    :param config: ``[core] executor`` (default: read from the Airflow configuration).
    """
    if config is None:
        from airflow.sdk import conf

        config = conf.get("core", "executor", fallback="LocalExecutor") or "LocalExecutor"
    defaults, aliases = configured_executors(config)
    names: list[str] = []
    for executor in task_executors:
        names += defaults if executor is None else [aliases.get(executor, executor_class_name(executor))]
    return next((name for name in names if name not in LOCAL_EXECUTORS), None)


def shared_local_paths() -> list[str]:
    """Return the directories of ``[sqlserver_cdc] shared_local_paths`` (volumes mounted on every worker)."""
    from airflow.sdk import conf

    value = conf.get(CONFIG_SECTION, SHARED_LOCAL_PATHS, fallback="") or ""
    return [posixpath.normpath(p.strip()) for p in value.split(",") if p.strip()]


def check_shared_paths(
    paths: Mapping[str, str],
    task_executors: Iterable[str | None] = (None,),
    *,
    config: str | None = None,
) -> None:
    """
    Refuse a local path that the executor's workers would not share, naming the setting, path and executor.

    Templated values (``{{ ... }}``) are skipped: they are checked when the task runs.

    :param paths: setting name -> directory or URI (``staging_path``, a catalog's warehouse...).
    :param task_executors: the ``executor`` argument of each task that reads or writes the paths.
    :param config: ``[core] executor`` (default: read from the Airflow configuration).
    :raises LocalPathError: a local path outside ``[sqlserver_cdc] shared_local_paths``.
    """
    local = {k: p for k, v in paths.items() if "{{" not in v and (p := local_path(v)) is not None}
    if not local:
        return
    executor = distributed_executor(task_executors, config)
    if executor is None:
        return
    shared = shared_local_paths()
    for setting, path in local.items():
        normalized = posixpath.normpath(path)
        if any(normalized == s or normalized.startswith(s.rstrip("/") + "/") for s in shared):
            continue
        raise LocalPathError(
            f"{setting} is the local path {paths[setting]!r} but tasks run on {executor}, whose workers "
            "do not share one filesystem: use a shared URI (s3://..., gs://..., abfs://...) or, for a volume "
            f"mounted on every worker and the Spark cluster, list it in [{CONFIG_SECTION}] {SHARED_LOCAL_PATHS}"
        )


def runs_in_process() -> bool:
    """Whether this task runs inside ``dag.test()``, which runs every task in this one process."""
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:  # pragma: no cover - the Task SDK moved it
        return False
    return type(getattr(task_runner, "SUPERVISOR_COMMS", None)).__name__ == "InProcessSupervisorComms"


def check_task_paths(paths: Mapping[str, str], executor: str | None) -> None:
    """
    Refuse, when a task runs, local paths its executor's workers would not share (see :func:`check_shared_paths`).

    :param paths: setting name -> directory or URI, templates rendered.
    :param executor: the task's ``executor`` argument (None: the default executor).
    :raises LocalPathError: a local path outside ``[sqlserver_cdc] shared_local_paths``.
    """
    if runs_in_process():
        return
    if os.environ.get(K8S_EXECUTOR_POD):  # its pod template may configure another executor
        check_shared_paths(paths, [None], config="KubernetesExecutor")
    else:
        check_shared_paths(paths, [executor])


def catalog_warehouses(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """
    Return the ``spark.sql.catalog.<name>.warehouse`` settings that are paths, by key.

    A REST catalog's warehouse is the name of a warehouse on the catalog server, not a path: skipped.

    :param spark_conf: the Spark settings of the merge.
    """
    warehouses = {}
    for key, value in spark_conf.items():
        if not (key.startswith(_CATALOG_PREFIX) and key.endswith(_WAREHOUSE_SUFFIX)):
            continue
        catalog = key[len(_CATALOG_PREFIX) : -len(_WAREHOUSE_SUFFIX)]
        kind = spark_conf.get(f"{_CATALOG_PREFIX}{catalog}.type", "")
        implementation = spark_conf.get(f"{_CATALOG_PREFIX}{catalog}.catalog-impl", "")
        if kind.lower() != "rest" and not implementation.endswith("RESTCatalog"):
            warehouses[key] = value
    return warehouses
