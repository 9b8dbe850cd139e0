"""The value conversion of ``ALTER TABLE … ALTER COLUMN``: strict where CAST is lenient.

A CAST to a shorter string or binary type cuts the value silently; changing a column's type does
not: a value that does not fit fails the statement with error 2628 (string or binary data would be
truncated), and a number out of the new type's range with error 8115 (arithmetic overflow). The
capture job applies the same conversion to the change table's rows when a captured column's type
changes (about-change-data-capture-sql-server.md, "Handling changes to source tables"), and fails
with the same errors when a stored change row does not fit
(known-issues-and-errors-change-data-capture.md, "DDL changes to source tables").
"""

from __future__ import annotations

from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.errors import SqlError, arithmetic_overflow, truncation
from sqlserver_cdc_simulator.values import check_fits, convert

_OVERFLOW_NUMBERS = frozenset({220, 8115})


def convert_column_value(value: Any, src: T.SqlType, dst: T.SqlType, *, table: str, column: str) -> Any:
    """
    Convert one stored value of a column whose type changes from ``src`` to ``dst``.

    :param value: the stored value.
    :param src: the column's type before.
    :param dst: the column's type after.
    :param table: the table's three-part name (for error 2628).
    :param column: the column's name.
    :raises SqlError: 2628 when a string or binary value does not fit ``dst``, 8115 on overflow.
    """
    if value is None:
        return None
    if dst.name in T.STRING_TYPES or dst.name in ("binary", "varbinary"):
        wide = T.SqlType(
            {"char": "varchar", "nchar": "nvarchar", "binary": "varbinary"}.get(dst.name, dst.name),
            length=T.MAX,
        )
        whole = convert(value, src, wide)
        if dst.length != T.MAX and not check_fits(_without_trailing_blanks(whole, dst), dst):
            shown = whole if isinstance(whole, str) else "0x" + bytes(whole).hex().upper()
            raise truncation(table=table, column=column, value=shown)
    try:
        return convert(value, src, dst)
    except SqlError as error:
        if error.number in _OVERFLOW_NUMBERS:
            raise arithmetic_overflow(dst.name) from None
        raise


def _without_trailing_blanks(value: Any, dst: T.SqlType) -> Any:
    """Trailing blanks of a char value never make it too long (they are padding, as in comparisons)."""
    if isinstance(value, str) and dst.name in T.STRING_TYPES:
        return value.rstrip(" ")
    return value
