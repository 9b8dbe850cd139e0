"""What crosses the pyodbc client: value conversions it needs and cursors with a chosen autocommit."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from typing import Any


def iso_offset(value: dt.datetime | None) -> str | None:
    """
    Send an aware datetime as text: pyodbc cannot bind one; SQL Server converts the text exactly.

    :param value: the aware datetime (or None).
    """
    return None if value is None else value.isoformat(sep=" ")


def iso_time(value: dt.time | None) -> str | None:
    """
    Send a time of day as text: pyodbc binds ``datetime.time`` as SQL_TYPE_TIME and drops the fraction.

    :param value: the time of day (or None).
    """
    return None if value is None else value.isoformat()


def parse_datetimeoffset(text: str | None) -> dt.datetime | None:
    """
    Read SQL Server's text form ``2024-01-02 03:04:05.1234567 +05:30`` as an aware datetime (microseconds).

    :param text: the text (or None).
    """
    if text is None:
        return None
    stamp, offset = text.strip().rsplit(" ", 1)
    if "." in stamp:
        head, fraction = stamp.split(".")
        stamp = f"{head}.{fraction[:6].ljust(6, '0')}"
    return dt.datetime.fromisoformat(f"{stamp}{offset}")


@contextlib.contextmanager
def cursor_with_autocommit(conn: Any, autocommit: bool) -> Iterator[Any]:
    """
    Yield a cursor of ``conn`` with autocommit set; close it and restore the setting afterwards.

    :param conn: a pyodbc connection.
    :param autocommit: the autocommit setting while the cursor is in use.
    """
    previous = conn.autocommit
    conn.autocommit = autocommit
    try:
        cursor = conn.cursor()
        try:
            yield cursor
        finally:
            cursor.close()
    finally:
        conn.autocommit = previous


def drain(cursor: Any) -> None:
    """
    Read past the informational messages and result sets a procedure returned.

    :param cursor: a pyodbc cursor that ran the procedure.
    """
    while cursor.nextset():
        pass


def execute_statements(conn: Any, *statements: str) -> None:
    """
    Run each statement on one cursor of ``conn``, reading past what it returns (:func:`drain`).

    :param conn: a pyodbc connection (autocommit, or the caller commits).
    """
    cursor = conn.cursor()
    try:
        for statement in statements:
            cursor.execute(statement)
            drain(cursor)
    finally:
        cursor.close()
