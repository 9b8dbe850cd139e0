"""
The source side of the reconcile comparison: a table's rows in key order, summarised per key range.

Rows are read inside a consistent read transaction (``hooks.consistent_point``) with the
snapshot's select list and typed by the snapshot's converters, so each value is what the merge
wrote to the target; ``datetime2(7)`` is compared at microseconds, as the target stores it. The
digests and leaf bounds come from ``reconcile.digest``, which the target side uses too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.errors import SqlServerCdcError
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_converter
from airflow_provider_sqlserver_cdc.reconcile.digest import MASK64, Key, Summary, row_digest

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance

#: Key types whose order in SQL Server is the order of their Python values (ranges mean the same on both sides).
ORDERED_KEY_TYPES = frozenset(
    {
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "decimal",
        "numeric",
        "date",
        "datetime",
        "smalldatetime",
        "datetime2",
    }
)


class ReconcileKeyError(SqlServerCdcError):
    """The table's key cannot be split into key ranges that SQL Server and Python order alike."""


def range_key_columns(instance: CaptureInstance) -> list[CapturedColumn]:
    """The captured key columns to split ranges on; refuse keys whose order differs between the two sides."""
    by_name = {c.name: c for c in instance.columns}
    keys = [by_name.get(name) for name in instance.key_columns]
    if not keys or any(k is None for k in keys):
        raise ReconcileKeyError(
            f"Capture instance {instance.name!r} ({instance.source}) has no captured key columns "
            f"({instance.key_columns}); the reconcile compares rows by key. Capture the key columns."
        )
    found = [k for k in keys if k is not None]
    bad = [
        f"{k.name} {k.describe()}" for k in found if k.sql_type.lower() not in ORDERED_KEY_TYPES or k.nullable
    ]
    if bad:
        raise ReconcileKeyError(
            f"Capture instance {instance.name!r} ({instance.source}): the reconcile splits the table into key "
            f"ranges, which needs NOT NULL key columns of a type SQL Server and Python order alike "
            f"({', '.join(sorted(ORDERED_KEY_TYPES))}); not {', '.join(bad)} (a collation or uniqueidentifier "
            "order differs). Compare this table with a full re-snapshot instead."
        )
    return found


class RowTyper:
    """Driver rows of the select list -> tuples of values as the target holds them."""

    def __init__(self, instance: CaptureInstance) -> None:
        self.columns = list(instance.columns)
        self.converters = [column_converter(c) for c in self.columns]
        key_names = list(instance.key_columns)
        self.key_index = [next(i for i, c in enumerate(self.columns) if c.name == k) for k in key_names]

    def __call__(self, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """The rows' values (``datetime2(7)`` floored to microseconds, as Iceberg keeps it)."""
        if not rows:
            return []
        columns = list(zip(*rows, strict=True))
        lists = []
        for convert, values in zip(self.converters, columns, strict=True):
            array = convert(values)
            if pa.types.is_timestamp(array.type) and array.type.unit == "ns":
                array = array.cast(pa.timestamp("us"), safe=False)
            lists.append(array.to_pylist())
        return list(zip(*lists, strict=True))

    def key(self, values: Sequence[Any]) -> Key:
        """A row's key."""
        return tuple(values[i] for i in self.key_index)


@dataclass
class SourceSummary:
    """The source table at the comparison LSN: leaf bounds (lower keys of leaves 1..n) and per-leaf summaries."""

    bounds: list[Key]
    leaves: list[Summary]
    rows: int


def _stream(
    cursor: Any, sql: str, params: Sequence[Any], typer: RowTyper, batch_size: int
) -> Iterator[tuple]:
    cursor.execute(sql, *params)
    while True:
        rows = cursor.fetchmany(batch_size)
        if not rows:
            return
        yield from typer(rows)


def summarise_source(
    reader: Any, instance: CaptureInstance, *, leaf_rows: int, batch_size: int
) -> SourceSummary:
    """
    Read the whole table in key order (one query, in the reader's transaction) into leaves of ``leaf_rows`` rows.

    :param reader: a pyodbc connection inside the consistent read transaction.
    :param instance: the capture instance (columns and key columns loaded).
    :param leaf_rows: rows per leaf: the finest range compared, and what a repair reads per differing leaf.
    :param batch_size: rows fetched at a time (memory bound).
    """
    if leaf_rows < 1:
        raise ValueError("leaf_rows must be at least 1")
    keys = range_key_columns(instance)
    typer = RowTyper(instance)
    sql = tsql.key_range_query(
        instance.source_schema, instance.source_table, instance.columns, keys, lower=False, upper=False
    )
    bounds: list[Key] = []
    leaves: list[Summary] = [[0, 0]]
    total = 0
    cursor = reader.cursor()
    try:
        for values in _stream(cursor, sql, [], typer, batch_size):
            leaf = leaves[-1]
            if leaf[0] == leaf_rows:
                bounds.append(typer.key(values))
                leaf = [0, 0]
                leaves.append(leaf)
            leaf[0] += 1
            leaf[1] = (leaf[1] + row_digest(values)) & MASK64
            total += 1
    finally:
        cursor.close()
    return SourceSummary(bounds, leaves, total)


def read_key_range(
    reader: Any,
    instance: CaptureInstance,
    lower: Key | None,
    upper: Key | None,
    *,
    batch_size: int,
) -> Iterator[tuple[Any, ...]]:
    """
    The typed rows with ``lower <= key < upper`` in key order (None: unbounded), in the reader's transaction.

    :param reader: a pyodbc connection inside a consistent read transaction.
    :param instance: the capture instance.
    :param lower: inclusive lower key, or None.
    :param upper: exclusive upper key, or None.
    :param batch_size: rows fetched at a time.
    """
    keys = range_key_columns(instance)
    sql = tsql.key_range_query(
        instance.source_schema,
        instance.source_table,
        instance.columns,
        keys,
        lower=lower is not None,
        upper=upper is not None,
    )
    params = [
        *(tsql.keyset_parameters(lower) if lower else []),
        *(tsql.keyset_parameters(upper) if upper else []),
    ]
    cursor = reader.cursor()
    try:
        yield from _stream(cursor, sql, params, RowTyper(instance), batch_size)
    finally:
        cursor.close()
