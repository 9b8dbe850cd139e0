"""Read a sample table's captured changes and replay them: the table contents CDC says the source holds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlserver_cdc_simulator.workload.schema import Key, Row, SampleTable

#: The metadata columns :func:`read_all_changes` puts before the table's writable columns.
CHANGE_COLUMNS = ("__$start_lsn", "__$seqval", "__$operation")

# __$operation of a delete in fn_cdc_get_all_changes_* (2 is an insert, 4 the row after an update).
_DELETE = 1


def read_all_changes(
    cursor: Any, table: SampleTable, low: Any = None, high: Any = None
) -> list[tuple[Any, ...]]:
    """
    Read ``cdc.fn_cdc_get_all_changes_<instance>(low, high, N'all')`` in commit order.

    Each row holds :data:`CHANGE_COLUMNS`, then the table's writable columns (a ``datetimeoffset``
    column needs an output converter for ODBC type -155 on the connection).

    :param cursor: a pyodbc cursor in the sample database.
    :param table: the sample table (its default capture instance is read).
    :param low: the first LSN (default: ``sys.fn_cdc_get_min_lsn`` of the capture instance).
    :param high: the last LSN (default: ``sys.fn_cdc_get_max_lsn()``).
    """
    instance = table.capture_instance
    if low is None:
        low = cursor.execute("SELECT sys.fn_cdc_get_min_lsn(?)", instance).fetchone()[0]
    if high is None:
        high = cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0]
    columns = ", ".join([*CHANGE_COLUMNS, *(f"[{c.name}]" for c in table.writable_columns)])
    cursor.execute(
        f"SELECT {columns} FROM cdc.fn_cdc_get_all_changes_{instance}(?, ?, N'all') "
        "ORDER BY __$start_lsn, __$seqval, __$operation",
        low,
        high,
    )
    return [tuple(record) for record in cursor.fetchall()]


def replay_changes(table: SampleTable, changes: Iterable[tuple[Any, ...]]) -> dict[Key, Row]:
    """
    Apply changes read by :func:`read_all_changes` in order to an empty table; return its rows.

    The result compares with :attr:`Workload.model` of the workload that made the changes.

    :param table: the sample table.
    :param changes: rows of :func:`read_all_changes`.
    """
    names = [c.name for c in table.writable_columns]
    rows: dict[Key, Row] = {}
    skip = len(CHANGE_COLUMNS)
    operation = CHANGE_COLUMNS.index("__$operation")
    for change in changes:
        row = dict(zip(names, change[skip:], strict=True))
        key = table.key_of(row)
        if change[operation] == _DELETE:
            del rows[key]
        else:
            rows[key] = row
    return rows
