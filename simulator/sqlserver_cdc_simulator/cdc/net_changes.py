"""Net changes: one row per source row key over an LSN window, as ``cdc.fn_cdc_get_net_changes_<ci>``.

Input rows are all-changes rows in change order, ``(start_lsn, seqval, operation, update_mask,
*captured_values)``, including update before-images (operation 3), which are ignored. Output rows
are ``(start_lsn, operation, update_mask, *captured_values)``.

For each key the first and the last change in the window decide the result (measured on SQL
Server and summarised in docs/simulator.md):

* last change a delete: nothing if the first change was an insert (the row was born and died
  inside the window), else a delete carrying the last known values;
* last change an insert or update: an insert if the first change was an insert, else an update
  (the row existed before the window) -- e.g. delete then re-insert nets to an update;
* ``all with merge`` reports 5 (insert or update) instead of 2 and 4; the filtering is the same;
* ``all with mask`` gives an update the OR of every update mask of the key in the window (inserts
  and deletes count as all bits) and leaves ``__$update_mask`` NULL for inserts and deletes.

This is the logic of the net changes function SQL Server generates for a capture instance.

``__$start_lsn`` is the commit LSN of the row's last change; rows come out in the order of that
last change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlserver_cdc_simulator.cdc.update_mask import or_masks

NET_ROW_FILTER_OPTIONS = ("all", "all with mask", "all with merge")

_DELETE, _INSERT, _UPDATE_OLD, _UPDATE_NEW, _MERGE = 1, 2, 3, 4, 5
_VALUES_AT = 4  # index of the first captured column in an all-changes row


def net_changes(
    rows: Iterable[Sequence[Any]], key_ordinals: Sequence[int], row_filter_option: str
) -> Iterator[tuple[Any, ...]]:
    """
    Reduce all-changes rows to net-changes rows.

    :param rows: all-changes rows in change order (``all update old`` shape).
    :param key_ordinals: 1-based ordinals (among captured columns) of the row-identifying columns.
    :param row_filter_option: ``all``, ``all with mask`` or ``all with merge`` (already normalised).
    """
    if row_filter_option not in NET_ROW_FILTER_OPTIONS:
        raise ValueError(f"unknown net changes row filter option {row_filter_option!r}")
    with_mask = row_filter_option == "all with mask"
    merge = row_filter_option == "all with merge"
    key_positions = [_VALUES_AT + ordinal - 1 for ordinal in key_ordinals]

    # key -> [first operation, last row, aggregated mask]; re-inserted on every change so the dict
    # ends up ordered by each key's last change.
    state: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        operation = row[2]
        if operation == _UPDATE_OLD:
            continue
        key = tuple(row[p] for p in key_positions)
        entry = state.pop(key, None)
        if entry is None:
            entry = [operation, row, row[3]]
        else:
            entry[1] = row
            entry[2] = or_masks(entry[2], row[3])
        state[key] = entry

    for first_operation, last, mask in state.values():
        last_operation = last[2]
        if last_operation == _DELETE:
            if first_operation == _INSERT:
                continue
            operation = _DELETE
        elif merge:
            operation = _MERGE
        else:
            operation = _INSERT if first_operation == _INSERT else _UPDATE_NEW
        # 'all with mask': the OR of the key's masks in the window, for updates only (NULL otherwise).
        out_mask = mask if with_mask and operation == _UPDATE_NEW else None
        yield (last[0], operation, out_mask, *last[_VALUES_AT:])
