"""
Decide per capture instance whether the next load is a snapshot or a change window.

A capture instance is snapshotted when no watermark is stored for it (state.py), when a
re-snapshot is requested (e.g. ``dag_run.conf = {"resnapshot": ["dbo_orders"]}``), or when the
changes right after its watermark are no longer in CDC (retention gap, or the capture instance
was re-created after the watermark). Every other instance continues with a change window.
The decision is per instance: re-snapshotting one table leaves the others alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.state import read_watermark
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key
from airflow_provider_sqlserver_cdc.window.instance_switch import resolve_streams

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.state import Watermark

SNAPSHOT = "snapshot"
EXTRACT = "extract"
RESNAPSHOT_CONF_KEY = "resnapshot"


@dataclass(frozen=True)
class LoadDecision:
    """
    What the next load of one capture instance is.

    :param capture_instance: the capture instance.
    :param action: ``snapshot`` or ``extract``.
    :param reason: why, in words (logged).
    :param state_key: the watermark Variable of the instance.
    :param watermark: the stored watermark LSN, if any.
    """

    capture_instance: str
    action: str
    reason: str
    state_key: str
    watermark: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (XCom)."""
        return asdict(self)


def decide_load(
    instance: CaptureInstance,
    watermark: Watermark | None,
    *,
    state_key: str,
    min_lsn: Lsn | None,
    next_lsn: Lsn | None,
    resnapshot: bool = False,
) -> LoadDecision:
    """
    Decide the next load of one capture instance (pure; the caller reads the LSNs).

    :param instance: the capture instance.
    :param watermark: its stored watermark, or None.
    :param state_key: its watermark Variable key.
    :param min_lsn: ``sys.fn_cdc_get_min_lsn`` of the instance (None: not checked).
    :param next_lsn: ``sys.fn_cdc_increment_lsn(watermark)`` (None: not checked).
    :param resnapshot: a re-snapshot was requested.
    """
    mark = watermark.lsn if watermark else None

    def decision(action: str, reason: str) -> LoadDecision:
        return LoadDecision(instance.name, action, reason, state_key, mark)

    if watermark is None:
        return decision(SNAPSHOT, "no watermark is stored: the table has not been loaded yet")
    if resnapshot:
        return decision(SNAPSHOT, "a re-snapshot was requested")
    position = watermark.position
    if position < instance.start_lsn:
        return decision(
            SNAPSHOT,
            f"the capture instance started at {instance.start_lsn.hex}, after the watermark {mark}: it was "
            "re-created and the changes in between were not captured",
        )
    if min_lsn is not None and next_lsn is not None and not min_lsn.is_zero and next_lsn < min_lsn:
        return decision(
            SNAPSHOT,
            f"retention gap: the changes after the watermark {mark} were cleaned up (CDC keeps changes from "
            f"{min_lsn.hex} on)",
        )
    return decision(EXTRACT, f"continue after the watermark {mark}")


def resnapshot_requests(conf: Mapping[str, Any] | None) -> set[str]:
    """The capture instances a DAG run's conf asks to re-snapshot: ``{"resnapshot": ["dbo_orders"]}`` or a string."""
    value = (conf or {}).get(RESNAPSHOT_CONF_KEY)
    if value is None:
        return set()
    if isinstance(value, str):
        return {name.strip() for name in value.split(",") if name.strip()}
    if isinstance(value, Iterable):
        return {str(name) for name in value}
    raise ValueError(
        f"dag_run.conf[{RESNAPSHOT_CONF_KEY!r}] must be a capture instance name or a list of them, got {value!r}"
    )


def plan_loads(
    hook: SqlServerCdcHook,
    capture_instances: Sequence[str],
    *,
    conn_id: str,
    database: str,
    resnapshot: Iterable[str] = (),
    check_retention: bool = True,
) -> list[LoadDecision]:
    """
    Decide the next load of each capture instance from its watermark (state.py) and CDC's low-water mark.

    :param hook: the source hook.
    :param capture_instances: capture instance names (or ``schema.table``).
    :param conn_id: the connection id used in the watermark keys.
    :param database: the source database used in the watermark keys.
    :param resnapshot: capture instances to snapshot again regardless of their watermark.
    :param check_retention: also snapshot instances whose watermark fell behind the retention.
    """
    requested = set(resnapshot)
    decisions = []
    streams = resolve_streams(
        hook, capture_instances, lambda stream: watermark_key(conn_id, database, stream)
    )
    for name, (stream, instance) in zip(capture_instances, streams, strict=True):
        key = watermark_key(conn_id, database, stream)
        mark = read_watermark(key)
        min_lsn = next_lsn = None
        if mark is not None and check_retention:
            min_lsn = hook.get_min_lsn(instance.name)
            next_lsn = hook.increment_lsn(mark.position)
        decisions.append(
            decide_load(
                replace(instance, name=stream),  # a switched table's instance answers under its stream's name
                mark,
                state_key=key,
                min_lsn=min_lsn,
                next_lsn=next_lsn,
                resnapshot=name in requested or stream in requested,
            )
        )
    return decisions


def split_loads(decisions: Iterable[LoadDecision]) -> dict[str, list[str]]:
    """``{"snapshot": [...], "extract": [...]}``: capture instances per action, in the given order."""
    split: dict[str, list[str]] = {SNAPSHOT: [], EXTRACT: []}
    for d in decisions:
        split[d.action].append(d.capture_instance)
    return split
