"""
LSN windows: which changes one DAG run extracts for one capture instance.

``interval`` mode maps the run's data interval ``[start, end)`` (UTC) to the transactions whose
commit time (``cdc.lsn_time_mapping.tran_end_time``, server local time) falls inside it:
``from = fn_cdc_map_time_to_lsn('smallest greater than or equal', start)`` and
``to = fn_cdc_map_time_to_lsn('largest less than', end)``. Adjacent intervals give contiguous,
disjoint windows, and a re-run of the same interval gives the same window.

``watermark`` mode extracts from the increment of the last merged LSN up to the max LSN seen when
the run starts.

Time zones: SQL Server records commit times in its local time without an offset. The offset is
learned from the server (``SYSDATETIMEOFFSET()``). With only that offset, conversion is right as
long as the server's offset does not change; for a server in a zone with daylight-saving time,
give ``server_time_zone`` (IANA name, checked against the server's current offset) so that every
instant converts with the offset in force at that instant. See docs/extraction.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
from airflow_provider_sqlserver_cdc.errors import (
    CaptureInstanceNotFoundError,
    ChangeDataPermissionError,
    RetentionGapError,
    WatermarkMissingError,
    WindowNotReadyError,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.manifest import WINDOW_MODES


@dataclass(frozen=True)
class ServerTimeZone:
    """
    Converts between UTC and the SQL Server's local wall-clock time.

    :param offset: the server's fixed UTC offset (used when ``zone`` is None).
    :param zone: IANA zone name of the server, for servers whose offset changes (DST).
    """

    offset: timedelta = timedelta(0)
    zone: str | None = None

    @property
    def tzinfo(self) -> tzinfo:
        """The tzinfo used for conversions."""
        return ZoneInfo(self.zone) if self.zone else timezone(self.offset)

    @property
    def arrow_timezone(self) -> str:
        """The zone as Arrow's ``assume_timezone`` accepts it."""
        if self.zone:
            return self.zone
        total = int(self.offset.total_seconds()) // 60
        sign = "-" if total < 0 else "+"
        return f"{sign}{abs(total) // 60:02d}:{abs(total) % 60:02d}"

    def to_server_local(self, instant: datetime) -> datetime:
        """Return the server's naive local time for an aware instant."""
        if instant.tzinfo is None:
            raise ValueError(f"Expected an aware datetime, got naive {instant.isoformat()}")
        return instant.astimezone(self.tzinfo).replace(tzinfo=None)

    def is_ambiguous(self, local: datetime) -> bool:
        """Whether a naive server-local time occurs twice (the repeated hour when clocks go back)."""
        if not self.zone:
            return False
        tz = self.tzinfo
        return local.replace(tzinfo=tz, fold=0).utcoffset() != local.replace(tzinfo=tz, fold=1).utcoffset()

    def boundary_local_time(self, instant: datetime) -> datetime:
        """
        Return the server-local time that stands for a window boundary at ``instant``.

        Outside a repeated hour this is the local time of the instant. Inside it (both passes),
        local commit times do not follow LSN order, so the boundary moves forward to the end of
        the repeated period: boundaries stay monotone, windows stay contiguous and disjoint, and
        the changes of the repeated hours land in the first window ending after them.
        """
        local = self.to_server_local(instant)
        if not self.is_ambiguous(local):
            return local
        probe = local.replace(second=0, microsecond=0)
        for _ in range(24 * 60):
            probe += timedelta(minutes=1)
            if not self.is_ambiguous(probe):
                return probe
        raise ValueError(f"No end of the repeated period after {local.isoformat()} in {self.zone}")

    def to_utc(self, local: datetime) -> datetime:
        """Return the UTC instant of a naive server-local time (the earlier one when ambiguous)."""
        if local.tzinfo is not None:
            raise ValueError(f"Expected a naive server-local datetime, got {local.isoformat()}")
        return local.replace(tzinfo=self.tzinfo, fold=0).astimezone(UTC)


class LsnSource(Protocol):
    """The questions window planning asks the server (implemented by SqlServerCdcHook)."""

    def get_max_lsn(self) -> Lsn: ...

    def get_min_lsn(self, capture_instance: str) -> Lsn: ...

    def increment_lsn(self, lsn: Lsn) -> Lsn: ...

    def map_time_to_lsn(self, relational_operator: str, local_time: datetime) -> Lsn | None: ...

    def map_lsn_to_time(self, lsn: Lsn) -> datetime | None: ...


@dataclass(frozen=True)
class LsnWindow:
    """
    The inclusive LSN range ``[from_lsn, to_lsn]`` of one capture instance for one run.

    An empty window (no transaction of the instance in the run's range) is not queried. The
    planner gives it ``from_lsn = to_lsn`` = the last LSN at or before its end, already covered by
    the window before it, so its manifest keeps ``from_lsn <= to_lsn`` and its ``to_lsn`` is the
    position a watermark may advance to. Its directory keeps the planned, inverted bounds
    ``{planned_from}_{to}`` so that it never shares a directory with a real window.
    """

    capture_instance: str
    from_lsn: Lsn
    to_lsn: Lsn
    mode: str
    from_time: datetime | None = None
    to_time: datetime | None = None
    empty: bool = False
    planned_from_lsn: Lsn | None = None

    @property
    def is_empty(self) -> bool:
        """Whether the window holds no transaction."""
        return self.empty or self.from_lsn > self.to_lsn

    def normalized(self) -> LsnWindow:
        """This window, with ``from_lsn = to_lsn`` and ``empty`` set when it holds no transaction."""
        if self.from_lsn <= self.to_lsn:
            return self
        return replace(self, from_lsn=self.to_lsn, empty=True, planned_from_lsn=self.from_lsn)

    @property
    def directory_name(self) -> str:
        """``{from_lsn}_{to_lsn}`` as in the window format."""
        return f"{(self.planned_from_lsn or self.from_lsn).hex}_{self.to_lsn.hex}"

    def manifest_range(self) -> dict[str, Any]:
        """The range as the window's manifest records it (``build_manifest``'s range and mode arguments)."""
        return {name: getattr(self, name) for name in ("from_lsn", "to_lsn", "from_time", "to_time", "mode")}


def _time_text(source: LsnSource, tz: ServerTimeZone, lsn: Lsn) -> str:
    local = source.map_lsn_to_time(lsn)
    if local is None:
        return "unknown time"
    return f"{tz.to_utc(local).isoformat()} (server local {local.isoformat(sep=' ')})"


def clamp_to_instance(
    source: LsnSource,
    instance: CaptureInstance,
    from_lsn: Lsn,
    to_lsn: Lsn,
    tz: ServerTimeZone,
    *,
    applied_through: Lsn | None = None,
) -> Lsn:
    """
    Check the window's start against the instance's low-water mark ``sys.fn_cdc_get_min_lsn(ci)``.

    Below the low-water mark there are three cases. If the target already holds every change up to
    the mark (``applied_through``, e.g. a re-snapshot's LSN, is at least the mark's predecessor), the
    part of the window below it is applied, not lost: the window starts at the mark. If the mark
    has not moved since the instance was created (its mapped commit time is not after
    ``create_date``), the instance is simply younger than the window: the window starts at the mark.
    Otherwise the cleanup job removed changes above what the target holds that the window needs:
    RetentionGapError.

    :param applied_through: every change of the instance up to this LSN is in the target (None: unknown).
    """
    if from_lsn > to_lsn:
        return from_lsn
    min_lsn = source.get_min_lsn(instance.name)
    if min_lsn.is_zero and instance.role_name:
        raise ChangeDataPermissionError(
            f"sys.fn_cdc_get_min_lsn({instance.name!r}) returned 0x00000000000000000000: this login may not read "
            f"the change data of {instance.name!r} (source {instance.source}). The capture instance is gated by "
            f"role {instance.role_name!r}: add the login's database user to it (ALTER ROLE "
            f"[{instance.role_name}] ADD MEMBER <user>) and grant SELECT on the captured columns."
        )
    if min_lsn.is_zero:
        raise CaptureInstanceNotFoundError(
            f"sys.fn_cdc_get_min_lsn({instance.name!r}) returned 0x00000000000000000000: the capture instance "
            "no longer exists, or this login may not see it. Check sys.sp_cdc_help_change_data_capture."
        )
    if from_lsn >= min_lsn:
        return from_lsn
    if applied_through is not None and int(applied_through) + 1 >= int(min_lsn):
        return min_lsn
    min_time = source.map_lsn_to_time(min_lsn)
    cleaned_up = instance.create_date is None or (min_time is not None and min_time > instance.create_date)
    if not cleaned_up:
        return min_lsn
    raise RetentionGapError(
        f"Retention gap in capture instance {instance.name!r} (source {instance.source}): the window "
        f"starts at LSN {from_lsn.hex} ({_time_text(source, tz, from_lsn)}) but the oldest change "
        f"still kept is at LSN {min_lsn.hex} ({_time_text(source, tz, min_lsn)}). The changes from "
        f"{from_lsn.hex} up to {min_lsn.hex} were removed by the CDC cleanup job and cannot be "
        f"extracted. Re-snapshot {instance.source} (CdcSnapshotOperator) and continue from the "
        "snapshot LSN; consider a longer @retention (sys.sp_cdc_change_job).",
        capture_instance=instance.name,
        from_lsn=from_lsn.hex,
        min_lsn=min_lsn.hex,
    )


def plan_interval_window(
    source: LsnSource,
    instance: CaptureInstance,
    data_interval_start: datetime,
    data_interval_end: datetime,
    tz: ServerTimeZone,
    *,
    applied_through: Lsn | None = None,
) -> LsnWindow:
    """
    Return the window of the transactions committed in ``[data_interval_start, data_interval_end)``.

    :param source: answers the LSN questions (the hook).
    :param instance: the capture instance.
    :param data_interval_start: aware start of the interval (inclusive).
    :param data_interval_end: aware end of the interval (exclusive).
    :param tz: the server's time zone.
    :param applied_through: every change up to this LSN is in the target: a window starting below the
        low-water mark is no retention gap when this reaches the mark (see :func:`clamp_to_instance`).
    """
    if data_interval_end <= data_interval_start:
        raise ValueError(
            f"Empty or inverted data interval {data_interval_start.isoformat()} .. {data_interval_end.isoformat()}"
        )
    local_start = tz.boundary_local_time(data_interval_start)
    local_end = tz.boundary_local_time(data_interval_end)
    from_lsn = source.map_time_to_lsn(tsql.SMALLEST_GREATER_THAN_OR_EQUAL, local_start)
    if from_lsn is None:
        raise WindowNotReadyError(
            f"No transaction at or after {data_interval_start.isoformat()} (server local "
            f"{local_start.isoformat(sep=' ')}) is in cdc.lsn_time_mapping yet: the capture job has not "
            f"reached the data interval of {instance.name!r}. Wait for it (LsnSensor) or check that the "
            "SQL Server Agent capture job runs."
        )
    to_lsn = source.map_time_to_lsn(tsql.LARGEST_LESS_THAN, local_end) or Lsn.zero()
    from_lsn = clamp_to_instance(source, instance, from_lsn, to_lsn, tz, applied_through=applied_through)
    return LsnWindow(
        capture_instance=instance.name,
        from_lsn=from_lsn,
        to_lsn=to_lsn,
        mode="interval",
        from_time=data_interval_start.astimezone(UTC),
        to_time=data_interval_end.astimezone(UTC),
    ).normalized()


def plan_watermark_window(
    source: LsnSource,
    instance: CaptureInstance,
    last_lsn: Lsn | None,
    tz: ServerTimeZone,
    *,
    max_lsn: Lsn | None = None,
) -> LsnWindow:
    """
    Return the window from the increment of ``last_lsn`` up to the current max LSN.

    :param source: answers the LSN questions (the hook).
    :param instance: the capture instance.
    :param last_lsn: the last LSN merged for the instance (the watermark).
    :param tz: the server's time zone.
    :param max_lsn: the max LSN seen when the run started (asked from the server if None).
    """
    if last_lsn is None:
        raise WatermarkMissingError(
            f"No watermark is stored for capture instance {instance.name!r}: watermark mode does not know "
            "where to start. Load the table first (CdcSnapshotOperator), which stores the snapshot LSN, or "
            "use interval mode."
        )
    to_lsn = max_lsn if max_lsn is not None else source.get_max_lsn()
    from_lsn = source.increment_lsn(last_lsn)
    from_lsn = clamp_to_instance(source, instance, from_lsn, to_lsn, tz)
    from_local = source.map_lsn_to_time(from_lsn) if from_lsn <= to_lsn else None
    to_local = source.map_lsn_to_time(to_lsn)
    return LsnWindow(
        capture_instance=instance.name,
        from_lsn=from_lsn,
        to_lsn=to_lsn,
        mode="watermark",
        from_time=tz.to_utc(from_local) if from_local else None,
        to_time=tz.to_utc(to_local) if to_local else None,
    ).normalized()


def plan_windows(
    source: LsnSource,
    instances: list[CaptureInstance],
    *,
    mode: str,
    tz: ServerTimeZone,
    data_interval_start: datetime | None = None,
    data_interval_end: datetime | None = None,
    watermarks: dict[str, Lsn | None] | None = None,
    applied_through: dict[str, Lsn | None] | None = None,
) -> list[LsnWindow]:
    """
    Return one window per capture instance for one DAG run.

    :param source: answers the LSN questions (the hook).
    :param instances: the capture instances to extract.
    :param mode: ``interval`` or ``watermark``.
    :param tz: the server's time zone.
    :param data_interval_start: aware start of the run's data interval (interval mode).
    :param data_interval_end: aware end of the run's data interval (interval mode).
    :param watermarks: last merged LSN per capture instance (watermark mode).
    :param applied_through: what the target holds per capture instance (interval mode; the
        watermark Variable's LSN): the part of a window at or below it is applied, not a retention gap.
    """
    if mode not in WINDOW_MODES:
        raise ValueError(f"mode must be one of {WINDOW_MODES}, got {mode!r}")
    if mode == "interval":
        if data_interval_start is None or data_interval_end is None:
            raise ValueError(
                "window_mode='interval' needs the run's data interval, and this run has none (a manual run "
                "without a logical date, or a DAG with schedule=None). Give the DAG a schedule, trigger the "
                "run with a logical date, or use window_mode='watermark'."
            )
        through = applied_through or {}
        return [
            plan_interval_window(
                source, i, data_interval_start, data_interval_end, tz, applied_through=through.get(i.name)
            )
            for i in instances
        ]
    max_lsn = source.get_max_lsn()
    marks = watermarks or {}
    return [plan_watermark_window(source, i, marks.get(i.name), tz, max_lsn=max_lsn) for i in instances]


def window_ready(
    source: LsnSource,
    tz: ServerTimeZone,
    *,
    window_mode: str,
    data_interval_end: datetime | None = None,
    watermarks: dict[str, Lsn | None] | None = None,
) -> tuple[bool, str]:
    """
    Whether the capture job has processed every transaction the run's windows need.

    Interval mode: the commit time mapped to ``sys.fn_cdc_get_max_lsn()`` has reached
    ``data_interval_end``. Watermark mode: the max LSN is above every stored watermark.
    Returns ``(ready, explanation)``.
    """
    max_lsn = source.get_max_lsn()
    if window_mode == "interval":
        if data_interval_end is None:
            raise ValueError("interval mode needs data_interval_end")
        target = tz.boundary_local_time(data_interval_end)
        reached = source.map_lsn_to_time(max_lsn)
        ready = reached is not None and reached >= target
        return ready, (
            f"max LSN {max_lsn.hex} maps to server time {reached.isoformat(sep=' ') if reached else 'none'}; "
            f"the window needs {target.isoformat(sep=' ')} (data_interval_end {data_interval_end.isoformat()})"
        )
    if window_mode == "watermark":
        marks = watermarks or {}
        missing = [ci for ci, lsn in marks.items() if lsn is None]
        if missing:
            raise WatermarkMissingError(
                f"No watermark is stored for capture instance(s) {', '.join(missing)}: load them first "
                "(CdcSnapshotOperator) or use interval mode."
            )
        behind = {ci: lsn for ci, lsn in marks.items() if lsn is not None and not max_lsn > lsn}
        ready = not behind
        detail = ", ".join(f"{ci} at {lsn.hex}" for ci, lsn in behind.items())
        return ready, (
            f"max LSN {max_lsn.hex}"
            + (f" is not above the watermark of {detail}" if behind else " is above every watermark")
        )
    raise ValueError(f"window_mode must be one of {WINDOW_MODES}, got {window_mode!r}")
