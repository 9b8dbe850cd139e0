"""Window planning against an in-memory lsn_time_mapping (the server side is covered in tests/hooks and tests/operators)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
from airflow_provider_sqlserver_cdc.errors import (
    RetentionGapError,
    WatermarkMissingError,
    WindowNotReadyError,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.planning import ServerTimeZone, plan_interval_window, plan_windows

UTC = UTC


def L(n: int) -> Lsn:
    return Lsn(n.to_bytes(10, "big"))


class MappingSource:
    """Answers like sys.fn_cdc_* over a list of (commit LSN, server-local commit time)."""

    def __init__(self, rows, min_lsn=None):
        self.rows = sorted(rows)
        self.min_lsn = min_lsn or self.rows[0][0]

    def get_max_lsn(self):
        return self.rows[-1][0]

    def get_min_lsn(self, capture_instance):
        return self.min_lsn

    def increment_lsn(self, lsn):
        return Lsn((int.from_bytes(lsn.value, "big") + 1).to_bytes(10, "big"))

    def map_lsn_to_time(self, lsn):
        times = [t for lsn_, t in self.rows if lsn_ <= lsn]
        return times[-1] if times else None

    def map_time_to_lsn(self, op, t):
        pick = {
            tsql.SMALLEST_GREATER_THAN_OR_EQUAL: lambda x: x >= t,
            tsql.SMALLEST_GREATER_THAN: lambda x: x > t,
            tsql.LARGEST_LESS_THAN: lambda x: x < t,
            tsql.LARGEST_LESS_THAN_OR_EQUAL: lambda x: x <= t,
        }[op]
        hits = [lsn for lsn, time in self.rows if pick(time)]
        if not hits:
            return None
        return hits[0] if op.startswith("smallest") else hits[-1]


def instance(start=1, created=datetime(2026, 1, 1, 9, 0)):
    return CaptureInstance("dbo_orders", "dbo", "orders", L(start), create_date=created)


# Server in UTC+02:00; a commit every 10 minutes from local 10:00 to 14:00 (UTC 08:00 .. 12:00).
PLUS2 = ServerTimeZone(offset=timedelta(hours=2))
ROWS = [(L(10 * (i + 1)), datetime(2026, 1, 1, 10, 0) + timedelta(minutes=10 * i)) for i in range(25)]


def test_interval_window_converts_utc_to_server_local():
    src = MappingSource(ROWS)
    w = plan_interval_window(
        src, instance(), datetime(2026, 1, 1, 9, tzinfo=UTC), datetime(2026, 1, 1, 10, tzinfo=UTC), PLUS2
    )
    # local 11:00 (inclusive) .. 12:00 (exclusive): commits 11:00, 11:10, ..., 11:50.
    assert (w.from_lsn, w.to_lsn) == (L(70), L(120))
    assert w.from_time == datetime(2026, 1, 1, 9, tzinfo=UTC)
    assert w.directory_name == f"{L(70).hex}_{L(120).hex}"


def test_adjacent_intervals_are_contiguous_disjoint_and_repeatable():
    src = MappingSource(ROWS)
    bounds = [datetime(2026, 1, 1, 8, tzinfo=UTC) + timedelta(minutes=25 * i) for i in range(10)]
    windows = [plan_interval_window(src, instance(), a, b, PLUS2) for a, b in itertools.pairwise(bounds)]
    covered = []
    for w in windows:
        if not w.is_empty:
            covered.extend(lsn for lsn, _ in ROWS if w.from_lsn <= lsn <= w.to_lsn)
    assert covered == [lsn for lsn, t in ROWS if t < datetime(2026, 1, 1, 10) + timedelta(minutes=225)]
    again = [plan_interval_window(src, instance(), a, b, PLUS2) for a, b in itertools.pairwise(bounds)]
    assert again == windows


def test_interval_without_commits_is_empty():
    src = MappingSource(ROWS)
    w = plan_interval_window(
        src, instance(), datetime(2026, 1, 1, 8, 1, tzinfo=UTC), datetime(2026, 1, 1, 8, 5, tzinfo=UTC), PLUS2
    )
    assert w.is_empty
    # Normalised: from = to = the last LSN before the interval's end (10:00 local, L(10)).
    assert (w.from_lsn, w.to_lsn) == (L(10), L(10))
    assert w.directory_name == f"{L(20).hex}_{L(10).hex}"  # planned bounds: never a real window's directory


def test_interval_not_yet_captured():
    src = MappingSource(ROWS)
    with pytest.raises(WindowNotReadyError, match="capture job has not reached"):
        plan_interval_window(
            src, instance(), datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 2, 1, tzinfo=UTC), PLUS2
        )


def test_instance_created_inside_the_window_starts_at_its_start_lsn():
    src = MappingSource(ROWS, min_lsn=L(95))  # L(95) maps to 11:20, the instance was created at 11:25
    w = plan_interval_window(
        src,
        instance(start=95, created=datetime(2026, 1, 1, 11, 25)),
        datetime(2026, 1, 1, 9, tzinfo=UTC),
        datetime(2026, 1, 1, 10, tzinfo=UTC),
        PLUS2,
    )
    assert (w.from_lsn, w.to_lsn) == (L(95), L(120))


def test_retention_gap_names_instance_lsns_times_and_remedy():
    src = MappingSource(ROWS, min_lsn=L(100))
    with pytest.raises(RetentionGapError) as info:
        plan_interval_window(
            src, instance(), datetime(2026, 1, 1, 9, tzinfo=UTC), datetime(2026, 1, 1, 10, tzinfo=UTC), PLUS2
        )
    msg = str(info.value)
    assert "dbo_orders" in msg and L(70).hex in msg and L(100).hex in msg
    assert "2026-01-01T09:00:00+00:00" in msg  # the lost range in UTC
    assert "Re-snapshot" in msg
    assert info.value.from_lsn == L(70).hex


def test_dst_zone_converts_each_instant_with_its_own_offset():
    berlin = ServerTimeZone(zone="Europe/Berlin")
    assert berlin.to_server_local(datetime(2026, 1, 15, 12, tzinfo=UTC)) == datetime(2026, 1, 15, 13)
    assert berlin.to_server_local(datetime(2026, 7, 15, 12, tzinfo=UTC)) == datetime(2026, 7, 15, 14)
    assert berlin.to_utc(datetime(2026, 10, 25, 2, 30)) == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert berlin.arrow_timezone == "Europe/Berlin"
    assert ServerTimeZone(offset=timedelta(hours=-5, minutes=-30)).arrow_timezone == "-05:30"


def test_watermark_mode_starts_after_the_stored_lsn():
    src = MappingSource(ROWS)
    [w] = plan_windows(src, [instance()], mode="watermark", tz=PLUS2, watermarks={"dbo_orders": L(120)})
    assert (w.from_lsn, w.to_lsn) == (L(121), L(250))
    assert w.to_time == datetime(2026, 1, 1, 12, tzinfo=UTC)
    [empty] = plan_windows(src, [instance()], mode="watermark", tz=PLUS2, watermarks={"dbo_orders": L(250)})
    assert empty.is_empty and empty.from_lsn == empty.to_lsn == L(250)


def test_watermark_mode_without_watermark_says_what_to_do():
    with pytest.raises(WatermarkMissingError, match="CdcSnapshotOperator"):
        plan_windows(MappingSource(ROWS), [instance()], mode="watermark", tz=PLUS2, watermarks={})


def test_naive_interval_is_refused():
    with pytest.raises(ValueError, match="aware"):
        plan_windows(
            MappingSource(ROWS),
            [instance()],
            mode="interval",
            tz=PLUS2,
            data_interval_start=datetime(2026, 1, 1),
            data_interval_end=datetime(2026, 1, 1, 1),
        )


def test_fall_back_hour_keeps_windows_contiguous_and_disjoint():
    """25 Oct 2026 in Berlin: 03:00 CEST -> 02:00 CET, local commit times 02:00-02:59 occur twice."""
    berlin = ServerTimeZone(zone="Europe/Berlin")
    first = datetime(2026, 10, 24, 22, tzinfo=UTC)
    instants = [first + timedelta(minutes=5 * i) for i in range(12 * 6)]  # a commit every 5 minutes, 6 hours
    rows = [(L(i + 1), berlin.to_server_local(t)) for i, t in enumerate(instants)]
    assert any(a[1] > b[1] for a, b in itertools.pairwise(rows))  # local times go backwards once
    src = MappingSource(rows)
    bounds = [first + timedelta(minutes=15 * i) for i in range(4 * 6 + 1)]
    windows = [plan_interval_window(src, instance(), a, b, berlin) for a, b in itertools.pairwise(bounds)]
    seen = []
    for w in windows:
        if not w.is_empty:
            seen.extend(lsn for lsn, _ in rows if w.from_lsn <= lsn <= w.to_lsn)
    assert seen == [lsn for lsn, _ in rows]  # every commit exactly once, in order
    # Outside the repeated hours each window holds exactly its own interval's commits.
    assert windows[0].from_lsn == L(1) and windows[0].to_lsn == L(3)
    assert windows[-1].from_lsn == L(len(rows) - 2) and windows[-1].to_lsn == L(len(rows))


def test_cleanup_after_a_late_instance_was_created_is_still_a_gap():
    # Created at 10:05 local, then the cleanup moved its low-water mark to L(100) (11:30).
    src = MappingSource(ROWS, min_lsn=L(100))
    with pytest.raises(RetentionGapError):
        plan_interval_window(
            src,
            instance(start=100, created=datetime(2026, 1, 1, 10, 5)),
            datetime(2026, 1, 1, 9, tzinfo=UTC),
            datetime(2026, 1, 1, 10, tzinfo=UTC),
            PLUS2,
        )


def test_window_below_the_low_water_mark_is_applied_when_the_target_holds_past_it():
    # Issue 36: a re-snapshot consistent at L(105) after the cleanup moved the mark to L(100). The next
    # interval window starts at L(70), below the mark, but everything up to L(105) is in the target.
    src = MappingSource(ROWS, min_lsn=L(100))
    start, end = datetime(2026, 1, 1, 9, tzinfo=UTC), datetime(2026, 1, 1, 10, tzinfo=UTC)
    w = plan_interval_window(src, instance(), start, end, PLUS2, applied_through=L(105))
    assert (w.from_lsn, w.to_lsn) == (L(100), L(120))
    # Just below the mark is enough (every change before the mark is applied) ...
    assert plan_interval_window(src, instance(), start, end, PLUS2, applied_through=L(99)).from_lsn == L(100)
    # ... but a target that stops earlier lost the changes in between: still a retention gap.
    with pytest.raises(RetentionGapError):
        plan_interval_window(src, instance(), start, end, PLUS2, applied_through=L(98))
