"""The watermark Variable as a mirror of the table's applied ranges (the Variable store is a dict here;
the real Airflow Variables are used by tests/operators/test_watermark.py and the end-to-end tests)."""

from __future__ import annotations

import itertools
import json

import pytest
from variable_store import in_memory_variables

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.state import (
    Watermark,
    advance_watermark,
    mirror_applied_ranges,
    read_watermark,
)

KEY = "sqlserver_cdc__src__shop__dbo_orders"


@pytest.fixture
def variables(monkeypatch):
    return in_memory_variables(monkeypatch)


def test_mirror_stores_the_ranges_and_their_applied_through_lsn(variables):
    changed, previous, mark = mirror_applied_ranges(
        KEY, [(0, 200), (300, 400)], known_commit_time=(Lsn.from_int(200), "2026-01-01T00:00:00+00:00")
    )
    assert changed and previous is None
    assert mark.position == Lsn.from_int(200)  # not 400: 201..299 is not applied
    assert mark.ranges == [(0, 200), (300, 400)]
    assert mark.commit_time == "2026-01-01T00:00:00+00:00"
    assert read_watermark(KEY) == mark


def test_mirrors_written_in_any_order_end_equal_and_never_move_back(variables):
    reports = [[(0, 200)], [(0, 200), (201, 300)], [(0, 200), (301, 400)], [(0, 400)]]
    results = set()
    for order in itertools.permutations(reports):
        variables.clear()
        throughs = []
        for ranges in order:
            mirror_applied_ranges(KEY, ranges)
            throughs.append(int(read_watermark(KEY).position))
        assert throughs == sorted(throughs)  # never backwards
        final = read_watermark(KEY)
        results.add((final.lsn, final.applied_ranges))
    assert results == {(Lsn.from_int(400).hex, f"{Lsn.from_int(0)}-{Lsn.from_int(400)}")}


def test_unchanged_mirror_is_not_rewritten(variables):
    mirror_applied_ranges(KEY, [(0, 200)])
    before = variables[KEY]
    changed, _, _ = mirror_applied_ranges(KEY, [(0, 150)])
    assert not changed and variables[KEY] == before


def test_legacy_watermark_without_ranges_still_reads_and_advances(variables):
    variables[KEY] = json.dumps({"lsn": Lsn.from_int(500).hex, "commit_time": None, "dag_run_id": "r"})
    mark = read_watermark(KEY)
    assert mark.ranges == [] and mark.position == Lsn.from_int(500)
    moved, _ = advance_watermark(KEY, Lsn.from_int(400))
    assert not moved
    moved, _ = advance_watermark(KEY, Lsn.from_int(600))
    assert moved and read_watermark(KEY).position == Lsn.from_int(600)


def test_malformed_ranges_name_the_variable(variables):
    variables[KEY] = json.dumps({"lsn": Lsn.from_int(5).hex, "applied_ranges": "0x12-zz"})
    with pytest.raises(ValueError, match=KEY):
        read_watermark(KEY)


def test_watermark_json_round_trips():
    mark = Watermark(lsn=Lsn.from_int(7).hex, applied_ranges=f"{Lsn.from_int(0)}-{Lsn.from_int(7)}")
    assert Watermark.from_json(mark.to_json()) == mark


def test_empty_windows_advance_the_applied_through_lsn_until_the_table_records_past_them(variables):
    # Issue 36: a quiet table's snapshot at 100; two empty windows continued it (no change of the instance).
    mirror_applied_ranges(KEY, [(0, 100)])
    mirror_applied_ranges(KEY, [(0, 100)], empty=[(101, 150)])
    _, _, mark = mirror_applied_ranges(KEY, [(0, 100)], empty=[(151, 200)])
    assert mark.position == Lsn.from_int(200) and mark.recorded_through == Lsn.from_int(100)
    assert mark.ranges == [(0, 100)] and mark.known_empty == [(101, 200)]
    # A range that does not continue what the target holds proves nothing and is not kept.
    _, _, mark = mirror_applied_ranges(KEY, [(0, 100)], empty=[(300, 320)])
    assert mark.known_empty == [(101, 200)]
    # The next change window continued the table's 100; the table now records past the empty ranges.
    _, _, mark = mirror_applied_ranges(KEY, [(0, 250)])
    assert mark.position == Lsn.from_int(250) and mark.empty_ranges is None


def _window(**overrides):
    from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

    fields = {
        "capture_instance": "dbo_orders",
        "source": {"server": "s", "database": "shop", "schema": "dbo", "table": "orders"},
        "kind": "changes",
        "mode": "interval",
        "from_position": Lsn.from_int(150).hex,
        "to_position": Lsn.from_int(200).hex,
        "window_uri": "/w",
        "manifest_uri": "/w/_manifest.json",
        "state_key": KEY,
        **overrides,
    }
    return ChangeWindow(**fields)


def test_a_change_window_without_rows_proves_its_range_free_of_changes():
    from airflow_provider_sqlserver_cdc.operators.watermark import proven_empty

    assert proven_empty(_window()) == [(150, 200)]  # read from the change table: no row of the instance
    assert proven_empty(_window(applied_through=Lsn.from_int(100).hex)) == [(101, 200)]
    assert proven_empty(_window(row_count=3)) == []
    # A planned-empty window was not read: only the stretch the contiguity guard checked counts.
    empty = {"from_position": Lsn.from_int(200).hex, "empty": True}
    assert proven_empty(_window(**empty)) == []
    assert proven_empty(_window(**empty, applied_through=Lsn.from_int(120).hex)) == [(121, 200)]
