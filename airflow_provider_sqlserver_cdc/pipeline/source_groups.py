"""
Several sources in one DAG: one task group per source, each the whole pipeline of that source.

With ``sources`` in the settings (pipeline/source_settings.py), the factory adds, per source, a
task group named after it that holds the single-source pipeline for its own settings: its
``tables`` task (Variable ``<dag_id>__<source>__tables``), load plan, per-table mapped snapshot,
sensor and extract, its merge, watermark commit, ``run_outcome`` and, when enabled, its time-to-loss
check and table maintenance::

    eu.tables -> eu.plan -> ... -> eu.merge -> eu.commit_watermarks -> eu.run_outcome
    us.tables -> us.plan -> ... -> us.merge -> us.commit_watermarks -> us.run_outcome

Why task groups built when the DAG is parsed, not one mapped task group over the sources: the
sources are fixed by the settings when the DAG is parsed, and inside each source the tasks are
mapped over its tables already (``snapshot``/``wait_for_capture``/``extract``). A mapped task group
would put a second map index over every per-table task (``run_outcome``, the failure records and the
merge's window XComs are read by one), name sources only by index in the UI and in the run's
failure message, and make every per-source value (connection, time zone, staging, namespace, target
tables) an expanded argument, which the merge's and the sensor's settings are not.

No task of one source depends on another source's: a source whose server is down or whose
database is wrong fails its own tasks, the others merge and commit. Each group's leaf
``run_outcome`` fails the run naming its source and what failed; a run is failed if one of them is.
Each source has its own merge, so a run starts one Spark application per source with windows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow.sdk import TaskGroup

from airflow_provider_sqlserver_cdc.pipeline.source_settings import source_pipeline_settings

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.pipeline.settings import ReplicationSettings
    from airflow_provider_sqlserver_cdc.pipeline.source_settings import SourceGroupSettings


def add_source_groups(
    settings: ReplicationSettings,
    add_source: Callable[[ReplicationSettings, TaskGroup, SourceGroupSettings], dict[str, Any]],
) -> dict[str, Any]:
    """
    Add one task group per source of ``settings.sources``; return their tasks as ``<source>.<name>``.

    :param settings: the pipeline's settings, with ``sources``.
    :param add_source: adds one source's tasks (from its own single-source settings) to the group
        being defined, and returns them by name.
    """
    tasks: dict[str, Any] = {}
    for source in settings.sources:
        own = source_pipeline_settings(settings, source)
        tooltip = (
            f"{own.source.conn_id} / {own.source.database or '(connection schema)'}: {len(own.tables)} tables"
        )
        with TaskGroup(group_id=source.name, tooltip=tooltip) as group:
            added = add_source(own, group, source)
        tasks |= {f"{source.name}.{name}": task for name, task in added.items()}
    return tasks


def describe_source(source: SourceGroupSettings, settings: ReplicationSettings) -> str:
    """How the run's failure message names a source: ``source 'eu' (connection 'shop', database 'shop_eu')``."""
    database = settings.source.database or "the connection's schema"
    return f"source {source.name!r} (connection {settings.source.conn_id!r}, database {database!r})"
