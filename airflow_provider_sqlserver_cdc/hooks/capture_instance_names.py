"""Which capture instance a name stands for: the instance itself, or ``schema.table`` for its newest one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NoReturn

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
from airflow_provider_sqlserver_cdc.errors import CaptureInstanceNotFoundError, CdcNotEnabledError

IsTracked = Callable[[str, str], "bool | None"]


def find_capture_instance(
    name: str,
    instances: Sequence[CaptureInstance],
    *,
    is_tracked: IsTracked,
    database: str | None,
    server: str,
) -> CaptureInstance:
    """
    Return the instance ``name`` stands for among ``instances``; an actionable error when there is none.

    :param name: a capture instance, or ``schema.table`` for the newest instance of that table.
    :param instances: the database's capture instances.
    :param is_tracked: ``sys.tables.is_tracked_by_cdc`` of ``(schema, table)``, None for no such table.
    :param database: the database, for messages.
    :param server: ``host:port``, for messages.
    """
    if "." in name and name not in {i.name for i in instances}:
        schema, _, table = name.partition(".")
        matching = [i for i in instances if i.source_schema == schema and i.source_table == table]
        if not matching:
            _raise_unknown(name, instances, [(schema, table)], is_tracked, database, server)
        return max(matching, key=lambda i: i.start_lsn)
    tsql.validate_capture_instance(name)
    found = next((i for i in instances if i.name == name), None)
    if found is None:
        candidates = [(name[:k], name[k + 1 :]) for k, ch in enumerate(name) if ch == "_"]
        _raise_unknown(name, instances, candidates, is_tracked, database, server)
    return found


def _raise_unknown(
    name: str,
    instances: Sequence[CaptureInstance],
    candidates: list[tuple[str, str]],
    is_tracked: IsTracked,
    database: str | None,
    server: str,
) -> NoReturn:
    for schema, table in candidates:
        if is_tracked(schema, table) is False:
            raise CdcNotEnabledError(
                f"Table {schema}.{table} is not tracked by change data capture (database {database}, "
                f"{server}), so capture instance {name!r} does not exist. Enable it with EXEC "
                f"sys.sp_cdc_enable_table @source_schema = N'{schema}', @source_name = N'{table}', "
                "@role_name = NULL."
            )
    known = ", ".join(sorted(i.name for i in instances)) or "none"
    raise CaptureInstanceNotFoundError(
        f"Capture instance {name!r} does not exist in database {database} ({server}), or this "
        f"login may not see it. Capture instances visible: {known}. Check the name (default: "
        "<schema>_<table>) in cdc.change_tables."
    )
