"""The statements the workload sends for a sample table, with their ``?`` parameters, and the rows it reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlserver_cdc_simulator.workload.odbc_client import parse_datetimeoffset
from sqlserver_cdc_simulator.workload.schema import Key, Row, SampleTable

Statement = tuple[str, list[Any]]


def insert_statement(table: SampleTable, rows: list[Row]) -> Statement:
    """
    One multi-row INSERT of the writable columns.

    :param table: the table.
    :param rows: the rows to insert.
    """
    names = [c.name for c in table.writable_columns]
    placeholders = "(" + ", ".join("?" for _ in names) + ")"
    sql = f"INSERT INTO {table.quoted_name} ({', '.join(f'[{n}]' for n in names)}) VALUES " + ", ".join(
        placeholders for _ in rows
    )
    return sql, [table.parameter(n, row[n]) for row in rows for n in names]


def update_statement(table: SampleTable, key: Key, values: Row) -> Statement:
    """
    An UPDATE of some columns of the row with primary key ``key``.

    :param table: the table.
    :param key: the primary key of the row.
    :param values: the new values, by column name.
    """
    assignments = ", ".join(f"[{column}] = ?" for column in values)
    params = [table.parameter(column, value) for column, value in values.items()]
    return f"UPDATE {table.quoted_name} SET {assignments} WHERE {_where_key(table)}", params + list(key)


def delete_statement(table: SampleTable, key: Key) -> Statement:
    """
    A DELETE of the row with primary key ``key``.

    :param table: the table.
    :param key: the primary key of the row.
    """
    return f"DELETE FROM {table.quoted_name} WHERE {_where_key(table)}", list(key)


def _where_key(table: SampleTable) -> str:
    return " AND ".join(f"[{k}] = ?" for k in table.key)


def read_rows(cursor: Any, table: SampleTable) -> Iterator[Row]:
    """
    Read the writable columns of every row of a table.

    ``datetimeoffset`` columns are read as text (pyodbc has no converter for ODBC type -155) and
    parsed to aware datetimes.

    :param cursor: a pyodbc cursor.
    :param table: the table.
    """
    columns = table.writable_columns
    select = [f"CAST([{c.name}] AS nvarchar(40))" if c.is_datetimeoffset else f"[{c.name}]" for c in columns]
    offsets = [c.name for c in columns if c.is_datetimeoffset]
    cursor.execute(f"SELECT {', '.join(select)} FROM {table.quoted_name}")
    for record in cursor.fetchall():
        row = dict(zip([c.name for c in columns], record, strict=True))
        for name in offsets:
            row[name] = parse_datetimeoffset(row[name])
        yield row
