"""The contiguity guard against an in-memory change log (the server side: tests/e2e/test_missed_intervals.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
from airflow_provider_sqlserver_cdc.errors import ContiguityGapError, RetentionGapError
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.contiguity import (
    AppliedPosition,
    ChangeCount,
    backfill_command,
    gap_interval_start,
    guard_window,
)
from airflow_provider_sqlserver_cdc.window.planning import LsnWindow, ServerTimeZone

UTCZ = ServerTimeZone()


def L(n: int) -> Lsn:
    return Lsn.from_int(n)


class ChangeLog:
    """Answers like sys.fn_cdc_* for commits every 10 LSNs, one minute apart; ``changes``: this instance's LSNs."""

    def __init__(self, changes, min_lsn=10, last=1000):
        self.changes = sorted(changes)
        self.min_lsn = L(min_lsn)
        self.commits = list(range(10, last + 1, 10))
        self.counted: list[tuple[int, int]] = []

    def get_max_lsn(self):
        return L(self.commits[-1])

    def get_min_lsn(self, capture_instance):
        return self.min_lsn

    def increment_lsn(self, lsn):
        raise AssertionError("the guard computes the hole's bounds itself")

    def map_lsn_to_time(self, lsn):
        before = [c for c in self.commits if c <= int(lsn)]
        return datetime(2026, 1, 1) + timedelta(minutes=before[-1] // 10) if before else None

    def map_time_to_lsn(self, op, t):  # not used by the guard
        raise AssertionError("the guard maps no times")

    def count_changes(self, capture_instance, from_lsn, to_lsn):
        assert int(self.min_lsn) <= int(from_lsn) <= int(to_lsn) <= int(self.get_max_lsn()), "error 313"
        self.counted.append((int(from_lsn), int(to_lsn)))
        hits = [c for c in self.changes if int(from_lsn) <= c <= int(to_lsn)]
        return ChangeCount(len(hits), L(hits[0]) if hits else None, L(hits[-1]) if hits else None)


def instance(created=datetime(2025, 1, 1)):
    return CaptureInstance("dbo_orders", "dbo", "orders", L(10), create_date=created)


def window(first, last, *, empty=False):
    w = LsnWindow("dbo_orders", L(first), L(last), "interval", datetime(2026, 1, 1, 5, tzinfo=UTC))
    return w if not empty else LsnWindow("dbo_orders", L(last), L(last), "interval", empty=True)


def test_no_watermark_means_nothing_to_check():
    log = ChangeLog([20, 30])
    guarded = guard_window(log, instance(), window(300, 400), None, UTCZ)
    assert guarded.window == window(300, 400) and guarded.applied_through is None and log.counted == []


def test_window_right_after_the_applied_lsn_or_overlapping_it_is_not_checked():
    log = ChangeLog([100, 200])
    for first in (201, 150):
        guarded = guard_window(log, instance(), window(first, 400), AppliedPosition(L(200)), UTCZ)
        assert guarded.applied_through is None and guarded.healed is None
    assert log.counted == []


def test_hole_without_changes_of_the_instance_is_continued_not_a_gap():
    # Other tables committed at 210..290; this instance changed at 200 (applied) and 300 (in the window).
    log = ChangeLog([200, 300])
    guarded = guard_window(log, instance(), window(300, 400), AppliedPosition(L(200)), UTCZ, on_gap="fail")
    assert guarded.window.from_lsn == L(300)  # the same window: nothing more to read
    assert guarded.applied_through == L(200)  # ... but it continues 200: ranges coalesce
    assert guarded.healed is None
    assert log.counted == [(201, 299)]


def test_missed_changes_are_healed_by_extending_the_window_back():
    log = ChangeLog([200, 230, 250, 300])
    guarded = guard_window(log, instance(), window(300, 400), AppliedPosition(L(200)), UTCZ)
    assert (guarded.window.from_lsn, guarded.window.to_lsn) == (L(201), L(400))
    assert guarded.applied_through == L(200)
    gap = guarded.healed
    assert (gap.first_lsn, gap.last_lsn, gap.rows) == (L(230), L(250), 2)
    assert gap.first_time == datetime(2026, 1, 1, 0, 23, tzinfo=UTC)
    assert gap.to_xcom()["applied_through"] == L(200).hex


def test_on_gap_fail_names_the_gap_and_the_remedy():
    log = ChangeLog([230, 250])
    with pytest.raises(ContiguityGapError) as info:
        guard_window(
            log,
            instance(),
            window(300, 400),
            AppliedPosition(L(200)),
            UTCZ,
            on_gap="fail",
            remedy=lambda gap: f"run the backfill from {gap.first_time.isoformat()}",
        )
    message = str(info.value)
    for part in ("dbo_orders", L(230).hex, L(250).hex, L(200).hex, L(300).hex, "2 change row(s)"):
        assert part in message
    assert "run the backfill from 2026-01-01T00:23:00+00:00" in message
    assert info.value.gap["first_lsn"] == L(230).hex


def test_empty_window_after_missed_changes_is_healed_too():
    log = ChangeLog([230])
    guarded = guard_window(log, instance(), window(0, 300, empty=True), AppliedPosition(L(200)), UTCZ)
    assert (guarded.window.from_lsn, guarded.window.to_lsn, guarded.window.is_empty) == (
        L(201),
        L(300),
        False,
    )


def test_windows_inside_applied_ranges_are_not_gaps():
    # Applied: everything up to 200, and 500..700 from a backfill; a re-run of 550..600 is inside.
    log = ChangeLog([230, 550])
    applied = AppliedPosition(L(200), ((0, 200), (500, 700)))
    guarded = guard_window(log, instance(), window(550, 600), applied, UTCZ, on_gap="fail")
    assert guarded.applied_through is None and log.counted == []


def test_only_holes_between_applied_ranges_are_asked_about():
    # Backfilled 300..400 (holding change 350); the holes 201..299 and 401..499 have no change.
    log = ChangeLog([350, 500])
    applied = AppliedPosition(L(200), ((0, 200), (300, 400)))
    guarded = guard_window(log, instance(), window(500, 600), applied, UTCZ, on_gap="fail")
    assert guarded.applied_through == L(200)
    assert log.counted == [(201, 299), (401, 499)]


def test_changes_cleaned_up_below_the_low_water_mark_are_a_retention_gap():
    log = ChangeLog([300], min_lsn=250)
    with pytest.raises(RetentionGapError):
        guard_window(log, instance(), window(300, 400), AppliedPosition(L(200)), UTCZ)


def test_unknown_on_gap_is_refused():
    with pytest.raises(ValueError, match="on_gap"):
        guard_window(ChangeLog([]), instance(), window(300, 400), None, UTCZ, on_gap="ignore")


def test_gap_interval_start_is_the_start_of_the_interval_holding_the_change():
    start, end = datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 1, 1, 11, tzinfo=UTC)
    assert gap_interval_start(datetime(2026, 1, 1, 7, 30, tzinfo=UTC), start, end) == datetime(
        2026, 1, 1, 7, tzinfo=UTC
    )
    assert gap_interval_start(datetime(2026, 1, 1, 9, tzinfo=UTC), start, end) == datetime(
        2026, 1, 1, 9, tzinfo=UTC
    )
    assert backfill_command("d", datetime(2026, 1, 1, 7, tzinfo=UTC), start) == (
        "airflow backfill create --dag-id d --from-date 2026-01-01T07:00:00+00:00 "
        "--to-date 2026-01-01T10:00:00+00:00 --reprocess-behavior failed --max-active-runs 1"
    )
