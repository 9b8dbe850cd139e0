"""Spark SQL statements of the merge: identifier quoting, MERGE INTO and the snapshot clause."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import (
    DELETED,
    OPERATION,
    POSITION_COLUMNS,
    SEQVAL,
    START_LSN,
    TARGET_META_COLUMNS,
    retired_row_values,
)


class KeyCondition(Protocol):
    """A condition on the target's key columns (``key_filter.KeyRange``)."""

    def condition(self, qualifier: str = "") -> str:
        """Return the condition as Spark SQL, its columns qualified by ``qualifier``."""
        ...


def quote(identifier: str) -> str:
    """Quote one identifier part for Spark SQL."""
    return "`" + identifier.replace("`", "``") + "`"


def quote_table(name: str) -> str:
    """Quote a dotted ``catalog.namespace.table`` name part by part."""
    return ".".join(quote(part) for part in name.split("."))


def newer_condition(left: str, right: str) -> str:
    """Return the LSN guard: the row aliased ``left`` holds a newer change than the one aliased ``right``."""
    fields_left = ", ".join(f"'{c}', {left}.{c}" for c in POSITION_COLUMNS)
    fields_right = ", ".join(f"'{c}', {right}.{c}" for c in POSITION_COLUMNS)
    return f"named_struct({fields_left}) > named_struct({fields_right})"


def merge_sql(
    table: str,
    source_view: str,
    columns: Sequence[str],
    key_columns: Sequence[str],
    hard: bool,
    key_range: KeyCondition | None = None,
) -> str:
    """Return the MERGE INTO statement that applies net-effect rows newer than the target's rows.

    :param key_range: the range of the source's first key column: the target rows outside it cannot
        match, and saying so lets Spark filter the target scan (and Iceberg skip data files by their
        column bounds) before the join.
    """
    keys = {k.lower() for k in key_columns}
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in key_columns)
    if key_range is not None:
        on += " AND " + key_range.condition("t.")
    value_columns = [c for c in columns if c.lower() not in keys]
    meta = [c for c, _, _ in TARGET_META_COLUMNS]
    updates = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in (*value_columns, *meta))
    insert_columns = [*key_columns, *value_columns, *meta]
    insert = (
        f"INSERT ({', '.join(quote(c) for c in insert_columns)}) "
        f"VALUES ({', '.join('s.' + quote(c) for c in insert_columns)})"
    )
    newer = newer_condition("s", "t")
    clauses = []
    if hard:
        clauses.append(f"WHEN MATCHED AND {newer} AND s.{DELETED} THEN DELETE")
    clauses.append(f"WHEN MATCHED AND {newer} THEN UPDATE SET {updates}")
    clauses.append(
        f"WHEN NOT MATCHED AND NOT s.{DELETED} THEN {insert}" if hard else f"WHEN NOT MATCHED THEN {insert}"
    )
    return f"MERGE INTO {quote_table(table)} t USING {source_view} s ON {on} " + " ".join(clauses)


def snapshot_clause(snapshot_lsn: str, hard: bool) -> str:
    """Return the clause that retires target rows absent from a snapshot taken at ``snapshot_lsn``."""
    lsn = f"X'{snapshot_lsn[2:]}'"
    older = (
        f"named_struct('{START_LSN}', t.{START_LSN}, '{SEQVAL}', t.{SEQVAL}, '{OPERATION}', t.{OPERATION}) < "
        f"named_struct('{START_LSN}', {lsn}, '{SEQVAL}', {lsn}, '{OPERATION}', 2)"
    )
    if hard:
        return f" WHEN NOT MATCHED BY SOURCE AND {older} THEN DELETE"
    retired = ", ".join(f"t.{column} = {value}" for column, value in retired_row_values(lsn).items())
    return f" WHEN NOT MATCHED BY SOURCE AND {older} AND NOT t.{DELETED} THEN UPDATE SET {retired}"
