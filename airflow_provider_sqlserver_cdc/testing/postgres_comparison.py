"""Compare a source table in SQL Server with its PostgreSQL target (the relational target's proof of exactness).

The PostgreSQL variant of :mod:`~airflow_provider_sqlserver_cdc.testing.table_comparison`: the
source is read the same way (a plain ``SELECT`` through pyodbc with exact converters); the
target's live rows (``NOT _cdc_deleted``) are read with psycopg, and the column types are checked
against the target's documented mapping (``spark.merge.targets.postgres_sql.postgres_type``).

Precision compared: everything exactly, except what PostgreSQL keeps in microseconds: time(7)
and datetime2(7) are compared floored to microseconds (the target floors the seventh digit), and
datetimeoffset as the instant, floored to microseconds (timestamptz keeps no offset).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import DELETED
from airflow_provider_sqlserver_cdc.spark.merge.targets.postgres_sql import postgres_type, split_table
from airflow_provider_sqlserver_cdc.testing.table_comparison import (
    Key,
    OffsetDateTime,
    TableComparison,
    TimeOfDay,
    compare_each_source,
    compare_rows,
    expected_target_type,
    read_source_rows,
    target_table_name,
    target_value,
)


def expected_postgres_type(column: CapturedColumn) -> str:
    """The PostgreSQL type the target documents for a captured column (``format_type`` spelling)."""
    return postgres_type(asdict(column), expected_target_type(column))


def _time_micros(value: TimeOfDay) -> dt.time:
    return dt.time(value.hour, value.minute, value.second, value.nanosecond // 1000)


def _instant(value: OffsetDateTime) -> dt.datetime:
    local = value.local.replace(microsecond=value.nanosecond // 1000)
    return (local - dt.timedelta(minutes=value.offset_minutes)).replace(tzinfo=dt.UTC)


#: Source values (already in table_comparison's representation) -> what PostgreSQL can hold.
_SOURCE_AS_POSTGRES: dict[str, Callable[[Any], Any]] = {
    "time": _time_micros,
    "datetimeoffset": _instant,
}
_POSTGRES_VALUES: dict[str, Callable[[Any], Any]] = {
    "uniqueidentifier": lambda value: str(value).upper(),
    "datetimeoffset": lambda value: value.astimezone(dt.UTC),
    "binary": bytes,
    "varbinary": bytes,
    "image": bytes,
    "rowversion": bytes,
    "timestamp": bytes,
}


def _postgres_value(column: CapturedColumn, value: Any) -> Any:
    if value is None:
        return None
    sql_type = column.sql_type.lower()
    if sql_type in _POSTGRES_VALUES:
        return _POSTGRES_VALUES[sql_type](value)
    if sql_type in ("time", "datetimeoffset"):
        return value
    return target_value(column, value)


def read_postgres_rows(
    conn: Any, table: str, instance: CaptureInstance, result: TableComparison
) -> dict[Key, dict[str, Any]]:
    """
    Read the PostgreSQL target's live rows; record schema differences in ``result``.

    :param conn: a psycopg connection to the target database.
    :param table: the target ``schema.table``.
    :param instance: the capture instance (its columns say what the target should hold).
    :param result: where schema differences and the count of tombstones go.
    """
    schema, name = split_table(table)
    types = {
        str(column).lower(): str(pg_type)
        for column, pg_type in conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
            [f'"{schema}"."{name}"'],
        ).fetchall()
    }
    if not types:
        result.schema_differences.append(f"target table {table} does not exist")
        return {}
    for column in instance.columns:
        wanted = expected_postgres_type(column)
        have = types.get(column.name.lower())
        if have is None:
            result.schema_differences.append(f"column {column.name} is missing in the target")
        elif have != wanted:
            result.schema_differences.append(
                f"column {column.name} is {have} in the target, documented {wanted}"
            )
    if result.schema_differences:
        return {}
    quoted = f'"{schema}"."{name}"'
    result.deleted_rows = conn.execute(f"SELECT count(*) FROM {quoted} WHERE {DELETED}").fetchone()[0]
    select = ", ".join('"' + c.name.replace('"', '""') + '"' for c in instance.columns)
    rows: dict[Key, dict[str, Any]] = {}
    for record in conn.execute(f"SELECT {select} FROM {quoted} WHERE NOT {DELETED}"):
        row = {c.name: _postgres_value(c, v) for c, v in zip(instance.columns, record, strict=True)}
        rows[tuple(row[k] for k in instance.key_columns)] = row
    return rows


def compare_postgres_table(
    pg_conn: Any, source_conn: Any, instance: CaptureInstance, target_table: str
) -> TableComparison:
    """
    Compare the source table of ``instance`` with its PostgreSQL target.

    :param pg_conn: a psycopg connection to the target database.
    :param source_conn: a pyodbc connection to the source database.
    :param instance: the capture instance with columns and key columns loaded.
    :param target_table: the target ``schema.table``.
    """
    result = TableComparison(instance.name, instance.source, target_table)
    target = read_postgres_rows(pg_conn, target_table, instance, result)
    source = read_source_rows(source_conn, instance)
    for row in source.values():
        for column in instance.columns:
            convert = _SOURCE_AS_POSTGRES.get(column.sql_type.lower())
            if convert is not None and row[column.name] is not None:
                row[column.name] = convert(row[column.name])
    source = {tuple(row[k] for k in instance.key_columns): row for row in source.values()}
    if result.schema_differences:
        result.source_rows = len(source)
        return result
    return compare_rows(instance, source, target, result)


def compare_postgres_tables(
    pg_conn: Any, hook: Any, capture_instances: Iterable[str], schema: str, template: str = "{schema}_{table}"
) -> list[TableComparison]:
    """
    Compare every capture instance's source table with its PostgreSQL target, in order.

    :param pg_conn: a psycopg connection to the target database.
    :param hook: the source's ``SqlServerCdcHook``.
    :param capture_instances: the capture instances.
    :param schema: the targets' schema (the merge job's ``--namespace``).
    :param template: the merge job's ``--table-name-template``.
    """
    return compare_each_source(
        hook,
        capture_instances,
        hook.get_capture_instance,
        lambda conn, instance: compare_postgres_table(
            pg_conn, conn, instance, target_table_name(instance, schema, template)
        ),
    )
