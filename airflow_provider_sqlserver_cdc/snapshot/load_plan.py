"""
Decide per capture instance whether the next load is a snapshot or a change window.

A capture instance is snapshotted when no watermark is stored for it (state.py), when a
re-snapshot is requested (e.g. ``dag_run.conf = {"resnapshot": ["dbo_orders"]}``), or when the
changes right after its watermark are no longer in CDC: a retention gap (the cleanup moved the
low-water mark past what the target holds) or a capture instance re-created after the watermark
(a new ``create_date``), each named as such in the reason. A low-water mark that passed the
snapshot LSN of a quiet table is neither: empty windows advance the watermark (state.py). Every other instance continues with a change window.
The decision is per instance: re-snapshotting one table leaves the others alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.extraction.instance_switch import resolve_streams
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.state import read_watermark
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.state import Watermark
    from airflow_provider_sqlserver_cdc.window.planning import ServerTimeZone

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
    watermark_time: datetime | None = None,
    min_time: datetime | None = None,
) -> LoadDecision:
    """
    Decide the next load of one capture instance (pure; the caller reads the LSNs and times).

    ``cdc.change_tables.start_lsn`` is the instance's low-water mark: CDC's cleanup moves it up.
    So a start after the watermark is either a cleanup (a retention gap only when the target does
    not hold every change up to it) or a re-created instance (disabled and enabled again: a new
    ``create_date``), told apart by the instance's ``create_date`` against the watermark's commit
    time (or, without that, against the time of the low-water mark: it never moved since the
    instance was created).

    :param instance: the capture instance.
    :param watermark: its stored watermark, or None.
    :param state_key: its watermark Variable key.
    :param min_lsn: ``sys.fn_cdc_get_min_lsn`` of the instance (None: not checked).
    :param next_lsn: ``sys.fn_cdc_increment_lsn(watermark)`` (None: not checked).
    :param resnapshot: a re-snapshot was requested.
    :param watermark_time: server-local commit time of the watermark LSN, when known.
    :param min_time: server-local commit time of the instance's low-water mark, when known.
    """
    mark = watermark.lsn if watermark else None

    def decision(action: str, reason: str) -> LoadDecision:
        return LoadDecision(instance.name, action, reason, state_key, mark)

    if watermark is None:
        return decision(SNAPSHOT, "no watermark is stored: the table has not been loaded yet")
    if resnapshot:
        return decision(SNAPSHOT, "a re-snapshot was requested")
    position = watermark.position
    created = instance.create_date
    if position < instance.start_lsn and _recreated(created, watermark_time, min_time) is not False:
        when = f" at {created.isoformat(sep=' ')} (server local)" if created is not None else ""
        return decision(
            SNAPSHOT,
            f"re-created capture instance: {instance.name} was created again{when}, after the watermark {mark}"
            f"{_at(watermark_time)}, and captures from {instance.start_lsn.hex} on; the changes in between "
            "were not captured",
        )
    low = min_lsn if min_lsn is not None and not min_lsn.is_zero else None
    if low is None and position < instance.start_lsn:
        low = instance.start_lsn
    following = next_lsn if next_lsn is not None else Lsn.from_int(int(position) + 1)
    if low is not None and following < low:
        since = f", created {created.isoformat(sep=' ')}," if created is not None else ""
        return decision(
            SNAPSHOT,
            f"retention gap: CDC's cleanup moved the low-water mark of {instance.name}{since} to {low.hex}"
            f"{_at(min_time)}, past the watermark {mark}{_at(watermark_time)}: changes after the watermark "
            "that the target does not hold were removed",
        )
    if low is not None and low > position:
        return decision(
            EXTRACT,
            f"continue after the watermark {mark}; the cleanup moved the low-water mark to {low.hex}, right "
            "after it: nothing the target lacks was removed",
        )
    return decision(EXTRACT, f"continue after the watermark {mark}")


def _recreated(
    created: datetime | None, watermark_time: datetime | None, min_time: datetime | None
) -> bool | None:
    """Whether an instance that starts after the watermark was re-created (None: cannot tell)."""
    if created is None:
        return None
    if watermark_time is not None:
        return created > watermark_time
    if min_time is not None:
        return min_time <= created
    return None


def _at(time: datetime | None) -> str:
    return f" ({time.isoformat(sep=' ')} server local)" if time is not None else ""


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
    zone: ServerTimeZone | None = None
    streams = resolve_streams(
        hook, capture_instances, lambda stream: watermark_key(conn_id, database, stream)
    )
    for name, (stream, instance) in zip(capture_instances, streams, strict=True):
        key = watermark_key(conn_id, database, stream)
        mark = read_watermark(key)
        min_lsn = next_lsn = watermark_time = min_time = None
        if mark is not None and check_retention:
            min_lsn = hook.get_min_lsn(instance.name)
            next_lsn = hook.increment_lsn(mark.position)
        behind = next_lsn is not None and min_lsn is not None and next_lsn < min_lsn
        if mark is not None and (behind or mark.position < instance.start_lsn):
            # The low-water mark passed the watermark: a cleanup or a re-created instance? Their times tell.
            if zone is None:
                zone = hook.get_server_time_zone()
            watermark_time = _commit_time(hook, zone, mark)
            low = min_lsn if min_lsn is not None and not min_lsn.is_zero else instance.start_lsn
            min_time = hook.map_lsn_to_time(low)
        decisions.append(
            decide_load(
                replace(instance, name=stream),  # a switched table's instance answers under its stream's name
                mark,
                state_key=key,
                min_lsn=min_lsn,
                next_lsn=next_lsn,
                resnapshot=name in requested or stream in requested,
                watermark_time=watermark_time,
                min_time=min_time,
            )
        )
    return decisions


def _commit_time(hook: SqlServerCdcHook, zone: ServerTimeZone, mark: Watermark) -> datetime | None:
    """Server-local commit time of a watermark: the one stored with it, else the server's mapping (if kept)."""
    if mark.commit_time:
        return zone.to_server_local(datetime.fromisoformat(mark.commit_time))
    return hook.map_lsn_to_time(mark.position)


def split_loads(decisions: Iterable[LoadDecision]) -> dict[str, list[str]]:
    """``{"snapshot": [...], "extract": [...]}``: capture instances per action, in the given order."""
    split: dict[str, list[str]] = {SNAPSHOT: [], EXTRACT: []}
    for d in decisions:
        split[d.action].append(d.capture_instance)
    return split
