"""
The contiguity guard: a run's window continues what the target already holds, or the run heals or fails.

A window from the run's data interval starts at the first commit of its interval. The target holds
every change of the capture instance up to its *applied-through* LSN (``W``: the end of the first
of its applied LSN ranges, mirrored in the watermark Variable). Before extracting, the guard asks
the source whether the instance has changes in the hole ``(W, from_lsn)`` that no applied range
covers:

- **No such change** (the usual case: the hole only spans other tables' commits, or intervals
  without changes): the window *continues* ``W``. It records ``applied_through = W``, so the merge
  records the range ``[W + 1, to_lsn]`` and the table's ranges coalesce into one.
- **Unapplied changes** (missed intervals, a paused DAG, a run marked success by hand):
  ``on_gap="heal"`` (default) extends the window back to ``W + 1`` and says so at WARNING;
  ``on_gap="fail"`` raises :class:`~airflow_provider_sqlserver_cdc.errors.ContiguityGapError`
  before anything is written, naming the gap and the backfill that fills it.

Windows already inside the applied ranges (re-runs, backfills of applied intervals) and windows
starting at or before ``W + 1`` are not checked. Changes below the instance's low-water mark are a
retention gap (``RetentionGapError``), as in planning. See docs/backfill.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from airflow_provider_sqlserver_cdc.errors import ContiguityGapError
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, covers
from airflow_provider_sqlserver_cdc.window.planning import LsnSource, clamp_to_instance

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow, ServerTimeZone

ON_GAP = ("heal", "fail")
#: What an extract does about changes between the watermark and its window unless told otherwise.
DEFAULT_ON_GAP = "heal"


@dataclass(frozen=True)
class ChangeCount:
    """How many changes a capture instance has in an LSN range, and the first and last one's LSN."""

    rows: int
    first_lsn: Lsn | None = None
    last_lsn: Lsn | None = None


class ChangeSource(LsnSource, Protocol):
    """The questions the guard asks the server (implemented by SqlServerCdcHook)."""

    def count_changes(self, capture_instance: str, from_lsn: Lsn, to_lsn: Lsn) -> ChangeCount: ...


@dataclass(frozen=True)
class AppliedPosition:
    """
    What the target holds of one capture instance, as its mirror (the watermark Variable) says.

    :param through: every change up to this LSN is applied (empty windows that continued the target
        included: the Variable's proven-empty ranges).
    :param ranges: all applied LSN ranges (those above ``through`` come from backfills); may be empty.
    :param recorded: the applied-through LSN the target table records, when it is below ``through``
        (the rest up to ``through`` is proven empty). A window continues from it, so that the merge
        records the proven-empty stretch with the window's range; None: ``through``.
    """

    through: Lsn
    ranges: tuple[LsnRange, ...] = ()
    recorded: Lsn | None = None

    @property
    def continues(self) -> Lsn:
        """The LSN a window that continues the target names as its applied-through (the table's)."""
        return self.recorded if self.recorded is not None and self.recorded < self.through else self.through


@dataclass(frozen=True)
class UnappliedChanges:
    """Changes of a capture instance between the applied-through LSN and a window's start."""

    applied_through: Lsn
    first_lsn: Lsn
    last_lsn: Lsn
    rows: int
    first_time: datetime | None = None
    last_time: datetime | None = None

    def to_xcom(self) -> dict[str, object]:
        """Return the JSON-ready description the window's XCom and manifest carry."""
        return {
            "applied_through": self.applied_through.hex,
            "first_lsn": self.first_lsn.hex,
            "last_lsn": self.last_lsn.hex,
            "rows": self.rows,
            "first_time": self.first_time.isoformat() if self.first_time else None,
            "last_time": self.last_time.isoformat() if self.last_time else None,
        }


@dataclass(frozen=True)
class GuardedWindow:
    """A window after the guard: where it continues from, and the gap it heals (None when there was none)."""

    window: LsnWindow
    applied_through: Lsn | None = None
    healed: UnappliedChanges | None = None


def _holes(first: int, last: int, ranges: tuple[LsnRange, ...]) -> list[LsnRange]:
    """Return the parts of ``[first, last]`` no range covers, in LSN order."""
    holes, cursor = [], first
    for lo, hi in sorted(ranges):
        if hi < cursor:
            continue
        if lo > last:
            break
        if lo > cursor:
            holes.append((cursor, lo - 1))
        cursor = max(cursor, hi + 1)
    if cursor <= last:
        holes.append((cursor, last))
    return holes


def _utc(source: LsnSource, tz: ServerTimeZone, lsn: Lsn) -> datetime | None:
    local = source.map_lsn_to_time(lsn)
    return tz.to_utc(local) if local is not None else None


def guard_window(
    source: ChangeSource,
    instance: CaptureInstance,
    window: LsnWindow,
    applied: AppliedPosition | None,
    tz: ServerTimeZone,
    *,
    on_gap: str = DEFAULT_ON_GAP,
    remedy: Callable[[UnappliedChanges], str] | None = None,
) -> GuardedWindow:
    """
    Check that nothing unapplied lies between what the target holds and ``window``; heal or fail if it does.

    :param source: answers the LSN and change-count questions (the hook).
    :param instance: the capture instance.
    :param window: the window planned from the run's data interval.
    :param applied: what the target holds (None: nothing known yet, e.g. before the initial snapshot).
    :param tz: the server's time zone.
    :param on_gap: ``heal`` (extend the window back) or ``fail`` (raise ContiguityGapError).
    :param remedy: returns what to do about a gap (e.g. the backfill command), appended to the error.
    """
    if on_gap not in ON_GAP:
        raise ValueError(f"on_gap must be one of {ON_GAP}, got {on_gap!r}")
    if applied is None:
        return GuardedWindow(window)
    through = applied.through
    # A window with rows starts at from_lsn; an empty one holds nothing, so its hole runs to its end.
    hole_end = window.to_lsn if window.is_empty else window.from_lsn
    if int(hole_end) <= int(through) + 1:
        if not window.is_empty and int(window.from_lsn) > int(applied.continues) + 1:
            # It starts inside the proven-empty stretch the table does not record yet: continue the table.
            return GuardedWindow(window, applied_through=applied.continues)
        return GuardedWindow(window)
    if not window.is_empty and covers(applied.ranges, int(window.from_lsn), int(window.to_lsn)):
        return GuardedWindow(window)
    # The hole's bounds are LSN values, not log positions: integer neighbours, as the applied ranges
    # count them (fn_cdc_get_all_changes takes any value inside the instance's range).
    hole_from = Lsn.from_int(int(through) + 1)
    hole_to = window.to_lsn if window.is_empty else Lsn.from_int(int(window.from_lsn) - 1)
    hole_from = clamp_to_instance(source, instance, hole_from, hole_to, tz)
    for lo, hi in _holes(int(hole_from), int(hole_to), applied.ranges):
        count = source.count_changes(instance.name, Lsn.from_int(lo), Lsn.from_int(hi))
        if count.rows:
            break
    else:
        return GuardedWindow(window, applied_through=applied.continues)
    first = count.first_lsn or Lsn.from_int(lo)
    last = count.last_lsn or Lsn.from_int(hi)
    gap = UnappliedChanges(through, first, last, count.rows, _utc(source, tz, first), _utc(source, tz, last))
    if on_gap == "fail":
        message = gap_message(instance, window, gap)
        if remedy is not None:
            message += ". " + remedy(gap)
        raise ContiguityGapError(message, gap=gap.to_xcom())
    healed = replace(window, from_lsn=hole_from, empty=False, planned_from_lsn=None)
    return GuardedWindow(healed, applied_through=applied.continues, healed=gap)


def gap_message(instance: CaptureInstance, window: LsnWindow, gap: UnappliedChanges) -> str:
    """Return what a gap is: the instance, the unapplied changes as LSNs and times, the window it precedes.

    :param instance: the capture instance.
    :param window: the run's planned window.
    :param gap: the unapplied changes.
    """
    first_time = gap.first_time.isoformat() if gap.first_time else "unknown time"
    last_time = gap.last_time.isoformat() if gap.last_time else "unknown time"
    window_time = window.from_time.isoformat() if window.from_time else "?"
    return (
        f"capture instance {instance.name!r} (source {instance.source}): {gap.rows} change row(s) at LSN "
        f"{gap.first_lsn.hex}..{gap.last_lsn.hex} (committed {first_time} .. {last_time}) are not applied to "
        f"the target, which holds every change up to LSN {gap.applied_through.hex}; this run's window starts "
        f"later, at LSN {window.from_lsn.hex} ({window_time}). Intervals between were missed (scheduler down, "
        "DAG paused, a run marked success)"
    )


def gap_interval_start(first_change: datetime, interval_start: datetime, interval_end: datetime) -> datetime:
    """Return the start of the run interval (same length as this run's) that holds ``first_change``.

    :param first_change: UTC commit time of the first unapplied change.
    :param interval_start: this run's data interval start.
    :param interval_end: this run's data interval end.
    """
    length = interval_end - interval_start
    if length <= timedelta(0) or first_change >= interval_start:
        return interval_start
    periods = -(-(interval_start - first_change) // length)
    return interval_start - periods * length


def backfill_command(dag_id: str, from_date: datetime, to_date: datetime) -> str:
    """Return the ``airflow backfill create`` command that re-runs the intervals from ``from_date`` to ``to_date``.

    :param dag_id: the DAG.
    :param from_date: the first logical date (interval start) to run.
    :param to_date: the last logical date to run.
    """
    return (
        f"airflow backfill create --dag-id {dag_id} --from-date {from_date.astimezone(UTC).isoformat()} "
        f"--to-date {to_date.astimezone(UTC).isoformat()} --reprocess-behavior failed --max-active-runs 1"
    )
