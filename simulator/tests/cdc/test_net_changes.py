"""Net changes over a window, checked against scenarios measured on SQL Server (docs/simulator.md)."""

from __future__ import annotations

import pytest

from sqlserver_cdc_simulator.cdc.lsn import make_lsn
from sqlserver_cdc_simulator.cdc.net_changes import net_changes
from sqlserver_cdc_simulator.cdc.update_mask import full_mask, mask_from_ordinals

FULL = full_mask(2)
V_ONLY = mask_from_ordinals([2], 2)


class Log:
    """Builds all-changes rows (id, v) one transaction at a time."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self._block = 0

    def tx(self, *changes: tuple) -> None:
        self._block += 1
        commit = make_lsn(1, self._block, 100)
        for slot, change in enumerate(changes, start=1):
            seq = make_lsn(1, self._block, slot)
            kind = change[0]
            if kind == "ins":
                self.rows.append((commit, seq, 2, FULL, change[1], change[2]))
            elif kind == "del":
                self.rows.append((commit, seq, 1, FULL, change[1], change[2]))
            else:  # ("upd", id, old, new)
                self.rows.append((commit, seq, 3, V_ONLY, change[1], change[2]))
                self.rows.append((commit, seq, 4, V_ONLY, change[1], change[3]))


@pytest.fixture
def measured_scenarios() -> Log:
    log = Log()
    log.tx(("ins", "A", "a"))
    log.tx(("ins", "B", "a"))
    log.tx(("upd", "B", "a", "b"))
    log.tx(("ins", "C", "a"))
    log.tx(("del", "C", "a"))
    log.tx(("upd", "D", "old", "new"))
    log.tx(("del", "E", "old"))
    log.tx(("del", "F", "old"))
    log.tx(("ins", "F", "reborn"))
    log.tx(("upd", "G", "old", "doomed"))
    log.tx(("del", "G", "doomed"))
    log.tx(("ins", "H", "a"))
    log.tx(("del", "H", "a"))
    log.tx(("ins", "H", "again"))
    log.tx(("ins", "I", "x"), ("del", "I", "x"))
    return log


def _by_key(rows) -> dict:
    return {row[3]: (row[1], row[4]) for row in rows}


# What SQL Server returns for the measured scenarios with N'all': key -> (__$operation, v). C and I
# were born and died inside the window: no row.
MEASURED_ALL = {
    "A": (2, "a"),
    "B": (2, "b"),
    "D": (4, "new"),
    "E": (1, "old"),
    "F": (4, "reborn"),
    "G": (1, "doomed"),
    "H": (2, "again"),
}
# N'all with merge' reports inserts and updates alike as 5, deletes stay 1; born-and-died keys stay out.
MEASURED_ALL_WITH_MERGE = {key: (1 if op == 1 else 5, v) for key, (op, v) in MEASURED_ALL.items()}


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        pytest.param("all", MEASURED_ALL, id="all"),
        pytest.param("all with merge", MEASURED_ALL_WITH_MERGE, id="all_with_merge_reports_5"),
    ],
)
def test_net_changes_match_the_measured_table(measured_scenarios, option, expected):
    assert _by_key(net_changes(measured_scenarios.rows, [1], option)) == expected


def test_update_mask_is_null_for_all_and_merge(measured_scenarios):
    for option in ("all", "all with merge"):
        assert all(row[2] is None for row in net_changes(measured_scenarios.rows, [1], option))


def test_all_with_mask_aggregates_updates():
    three = mask_from_ordinals
    # three columns: id, a, b; two updates touching a then b -> aggregated mask has both
    commit1, commit2 = make_lsn(1, 1, 9), make_lsn(1, 2, 9)
    rows = [
        (commit1, make_lsn(1, 1, 1), 3, three([2], 3), 1, "x", "y"),
        (commit1, make_lsn(1, 1, 1), 4, three([2], 3), 1, "x2", "y"),
        (commit2, make_lsn(1, 2, 1), 3, three([3], 3), 1, "x2", "y"),
        (commit2, make_lsn(1, 2, 1), 4, three([3], 3), 1, "x2", "y2"),
    ]
    (row,) = list(net_changes(rows, [1], "all with mask"))
    assert row == (commit2, 4, three([2, 3], 3), 1, "x2", "y2")


def test_all_with_mask_is_null_for_inserts_and_deletes_and_full_after_delete_and_reinsert(measured_scenarios):
    result = {row[3]: (row[1], row[2]) for row in net_changes(measured_scenarios.rows, [1], "all with mask")}
    assert result["A"] == (2, None) and result["B"] == (2, None) and result["E"] == (1, None)
    assert result["D"] == (4, V_ONLY)
    assert result["F"] == (4, FULL)  # deleted then re-inserted: every column may have changed


def test_start_lsn_is_last_change_and_rows_come_in_last_change_order(measured_scenarios):
    rows = list(net_changes(measured_scenarios.rows, [1], "all"))
    starts = [row[0] for row in rows]
    assert starts == sorted(starts)
    b = next(row for row in rows if row[3] == "B")
    assert b[0] == make_lsn(1, 3, 100)


def test_composite_keys():
    commit = make_lsn(1, 1, 9)
    rows = [
        (commit, make_lsn(1, 1, 1), 2, b"\x07", 1, "a", "v1"),
        (commit, make_lsn(1, 1, 2), 2, b"\x07", 1, "b", "v2"),
        (commit, make_lsn(1, 1, 3), 1, b"\x07", 1, "a", "v1"),
    ]
    result = list(net_changes(rows, [1, 2], "all"))
    assert result == [(commit, 2, None, 1, "b", "v2")]


def test_unknown_option_is_refused():
    with pytest.raises(ValueError):
        list(net_changes([], [1], "all update old"))
