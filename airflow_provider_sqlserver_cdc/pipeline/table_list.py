"""The capture instances of a run: the settings' ``tables``, or an Airflow Variable that replaces them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from airflow_provider_sqlserver_cdc.pipeline.identifiers import check_source_names


def tables_variable_key(dag_id: str, group_id: str | None = None) -> str:
    """
    Return the Airflow Variable whose JSON list of capture instances replaces ``tables`` at run time.

    :param dag_id: the DAG.
    :param group_id: the pipeline's task group, if it is in one (``<dag_id>__<group_id>__tables``).
    """
    return f"{dag_id}__{group_id}__tables" if group_id else f"{dag_id}__tables"


def run_tables(configured: Sequence[str], variable_key: str) -> list[str]:
    """
    Return the capture instances to replicate: the Variable ``variable_key`` if set, else ``configured``.

    :param configured: the settings' ``tables``.
    :param variable_key: the Variable that overrides them (see :func:`tables_variable_key`).
    """
    from airflow.sdk import Variable

    override = Variable.get(variable_key, default=None)
    if override is None:
        return list(configured)
    try:
        names = json.loads(override) if isinstance(override, str) else override
    except ValueError as err:
        raise ValueError(
            f"Airflow Variable {variable_key!r} must hold a JSON list of capture instances, e.g. "
            f'["dbo_orders"]; it holds {override!r} ({err})'
        ) from None
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(
            f"Airflow Variable {variable_key!r} must be a list of capture instance names, got {names!r}"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"Airflow Variable {variable_key!r} lists a capture instance twice: {names}")
    check_source_names(f"Airflow Variable {variable_key}", names)
    return names
