"""Change windows of one table grouped by the columns they carry, so that a row changes only the columns its window holds.

Around a schema change the windows of one run carry different columns: the old capture instance's
part lacks a column added on the source (and, after a ``DROP COLUMN``, the part after the DDL
lacks the dropped column: ``extraction.ddl_split``), the new instance's part, the blind-spot back-fill
and the re-read of added columns carry the new list. One MERGE of their union would give every
row of a window without a column a NULL in it (``unionByName(allowMissingColumns=True)``): the
target would lose the value a dropped column held, or the back-filled value of an added one.

So the windows are taken in the order their rows apply (a window read at a consistent LSN ``P``,
``manifest.backfill``, at ``P``; any other at its first LSN) and cut where the set of columns
changes; each group is one MERGE whose ``UPDATE SET`` names only its own columns, in that order, and
the LSN guard keeps a newer change authoritative across them. A run without a schema change has
one group: one MERGE, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.lsn import Lsn

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_sqlserver_cdc.spark.merge.window_reader import Window


def apply_position(window: Window) -> tuple[int, int]:
    """
    Return where the window's rows apply: a consistent read's LSN, else the window's first LSN.

    :param window: a change window.
    """
    manifest = window.manifest
    consistent = (manifest.backfill or {}).get("consistent_lsn")
    if consistent:
        return int(Lsn.from_hex(consistent)), 1
    return manifest.lsn_range[0], 0


def column_set(window: Window) -> frozenset[str]:
    """Return the lower-cased names of the columns the window carries."""
    return frozenset(c["name"].lower() for c in window.manifest.columns)


def column_groups(windows: Sequence[Window]) -> list[list[Window]]:
    """
    Return the change windows in the order their rows apply, cut where the columns they carry change.

    A window without rows changes no column, so it joins the group beside it: its LSN range is
    recorded with that group's commit (a group of empty windows alone would record nothing).

    :param windows: one table's pending change windows.
    """
    groups: list[tuple[frozenset[str], list[Window]]] = []
    empty: list[Window] = []
    for window in sorted(windows, key=apply_position):
        if window.manifest.row_count == 0:
            if groups:
                groups[-1][1].append(window)
            else:
                empty.append(window)
            continue
        columns = column_set(window)
        if groups and groups[-1][0] == columns:
            groups[-1][1].append(window)
        else:
            groups.append((columns, [*empty, window]))
            empty = []
    return [group for _, group in groups] + ([empty] if empty else [])
