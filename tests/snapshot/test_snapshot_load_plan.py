from __future__ import annotations

from datetime import datetime

import pytest

from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.snapshot.load_plan import (
    EXTRACT,
    SNAPSHOT,
    LoadDecision,
    decide_load,
    resnapshot_requests,
    split_loads,
)
from airflow_provider_sqlserver_cdc.state import Watermark

START = Lsn.from_hex("0x00000010000000200001")
INSTANCE = CaptureInstance("dbo_orders", "dbo", "orders", START)


def lsn(n: int) -> Lsn:
    return Lsn((0x10).to_bytes(4, "big") + n.to_bytes(4, "big") + b"\x00\x01")


def decide(mark, *, instance=INSTANCE, min_lsn=None, next_lsn=None, resnapshot=False, **times):
    """``decide_load`` for ``instance`` (state key ``k``); ``times``: ``watermark_time``, ``min_time``."""
    return decide_load(
        instance, mark, state_key="k", min_lsn=min_lsn, next_lsn=next_lsn, resnapshot=resnapshot, **times
    )


def test_no_watermark_means_snapshot():
    d = decide(None)
    assert (d.action, d.watermark, d.state_key) == (SNAPSHOT, None, "k")
    assert "no watermark" in d.reason


def test_watermark_within_retention_means_extract():
    mark = Watermark(lsn(0x50).hex)
    d = decide(mark, min_lsn=lsn(0x30), next_lsn=lsn(0x51))
    assert d.action == EXTRACT and d.watermark == lsn(0x50).hex


def test_watermark_exactly_at_the_low_water_mark_is_still_complete():
    mark = Watermark(lsn(0x50).hex)
    assert decide(mark, min_lsn=lsn(0x51), next_lsn=lsn(0x51)).action == EXTRACT


def test_retention_gap_means_snapshot():
    mark = Watermark(lsn(0x50).hex)
    d = decide(mark, min_lsn=lsn(0x60), next_lsn=lsn(0x51))
    assert d.action == SNAPSHOT and "retention gap" in d.reason and lsn(0x60).hex in d.reason


def test_recreated_capture_instance_means_snapshot():
    mark = Watermark(lsn(0x10).hex)
    d = decide(mark)
    assert d.action == SNAPSHOT and "re-created" in d.reason


def test_explicit_request_means_snapshot_even_with_a_good_watermark():
    mark = Watermark(lsn(0x50).hex)
    assert decide(mark, min_lsn=lsn(0x30), next_lsn=lsn(0x51), resnapshot=True).action == SNAPSHOT


def test_zero_min_lsn_is_not_taken_for_a_gap():
    mark = Watermark(lsn(0x50).hex)
    assert decide(mark, min_lsn=Lsn.zero(), next_lsn=lsn(0x51)).action == EXTRACT


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        (None, set()),
        ({}, set()),
        ({"resnapshot": "dbo_orders"}, {"dbo_orders"}),
        ({"resnapshot": "dbo_orders, dbo_lines"}, {"dbo_orders", "dbo_lines"}),
        ({"resnapshot": ["dbo_orders"]}, {"dbo_orders"}),
    ],
)
def test_resnapshot_requests_from_dag_run_conf(conf, expected):
    assert resnapshot_requests(conf) == expected


def test_resnapshot_request_of_a_wrong_type_is_an_error():
    with pytest.raises(ValueError, match="resnapshot"):
        resnapshot_requests({"resnapshot": 5})


def test_split_keeps_order_and_separates_actions():
    decisions = [
        LoadDecision("a", SNAPSHOT, "", "ka"),
        LoadDecision("b", EXTRACT, "", "kb"),
        LoadDecision("c", SNAPSHOT, "", "kc"),
    ]
    assert split_loads(decisions) == {SNAPSHOT: ["a", "c"], EXTRACT: ["b"]}


# Issue 36: cdc.change_tables.start_lsn is the low-water mark, which CDC's cleanup moves up.
CREATED = datetime(2026, 1, 1, 9, 0)
CLEANED = CaptureInstance("dbo_orders", "dbo", "orders", lsn(0x60), create_date=CREATED)
#: The watermark's commit time and the low-water mark's: the cleanup ran after the watermark.
CLEANED_AFTER = {"watermark_time": datetime(2026, 1, 1, 10, 0), "min_time": datetime(2026, 1, 1, 11, 0)}


def test_a_cleanup_past_the_watermark_is_a_retention_gap_not_a_re_created_instance():
    mark = Watermark(lsn(0x50).hex, commit_time="2026-01-01T10:00:00+00:00")
    d = decide(mark, instance=CLEANED, min_lsn=lsn(0x60), next_lsn=lsn(0x51), **CLEANED_AFTER)
    assert d.action == SNAPSHOT and d.reason.startswith("retention gap") and "re-created" not in d.reason


def test_a_cleanup_right_after_the_watermark_loses_nothing():
    mark = Watermark(lsn(0x5F).hex)
    d = decide(mark, instance=CLEANED, min_lsn=lsn(0x60), next_lsn=lsn(0x60), **CLEANED_AFTER)
    assert d.action == EXTRACT and "nothing the target lacks was removed" in d.reason


def test_an_instance_created_after_the_watermark_is_re_created():
    recreated = CaptureInstance(
        "dbo_orders", "dbo", "orders", lsn(0x60), create_date=datetime(2026, 1, 1, 12)
    )
    mark = Watermark(lsn(0x5F).hex)
    d = decide(
        mark,
        instance=recreated,
        min_lsn=lsn(0x60),
        next_lsn=lsn(0x60),
        watermark_time=datetime(2026, 1, 1, 10, 0),
        min_time=datetime(2026, 1, 1, 12, 0),
    )
    assert d.action == SNAPSHOT and d.reason.startswith("re-created capture instance")
    # Without the watermark's time: a low-water mark that never moved since the creation tells the same.
    d = decide(
        mark, instance=recreated, min_lsn=lsn(0x60), next_lsn=lsn(0x60), min_time=datetime(2026, 1, 1, 12)
    )
    assert d.action == SNAPSHOT and d.reason.startswith("re-created capture instance")
