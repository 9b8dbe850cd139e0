"""How a sample table is described: its columns, keys and CREATE TABLE statement."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from sqlserver_cdc_simulator.workload.value_generators import ValueGenerator

Row = dict[str, Any]
Key = tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class ColumnSpec:
    """
    A column of a sample table.

    :param name: column name.
    :param declaration: T-SQL type (and constraints) as written in CREATE TABLE.
    :param generate: draws a value; ``None`` for server-generated columns (rowversion).
    :param parameter: converts a model value to the ``?`` parameter pyodbc sends (default: as is).
    """

    name: str
    declaration: str
    generate: ValueGenerator | None
    parameter: Callable[[Any], Any] | None = None

    @property
    def is_datetimeoffset(self) -> bool:
        """Whether the column is a ``datetimeoffset`` (pyodbc reads it only as text)."""
        return self.declaration.startswith("datetimeoffset")


@dataclasses.dataclass(frozen=True)
class SampleTable:
    """
    A table of the sample database.

    :param schema: schema name.
    :param name: table name.
    :param columns: all columns in declaration order.
    :param key: primary-key column names (new keys are drawn from a counter per key column).
    :param unique: a unique secondary key column (drawn from a counter), if any.
    :param constraints: extra table constraints for CREATE TABLE.
    """

    schema: str
    name: str
    columns: tuple[ColumnSpec, ...]
    key: tuple[str, ...]
    unique: str | None = None
    constraints: tuple[str, ...] = ()

    @property
    def qualified_name(self) -> str:
        """``schema.name``."""
        return f"{self.schema}.{self.name}"

    @property
    def quoted_name(self) -> str:
        """``[schema].[name]``."""
        return f"[{self.schema}].[{self.name}]"

    @property
    def capture_instance(self) -> str:
        """The default capture instance name SQL Server derives: ``schema_name``."""
        return f"{self.schema}_{self.name}"

    @property
    def writable_columns(self) -> tuple[ColumnSpec, ...]:
        """Columns the client writes (all but server-generated ones)."""
        return tuple(c for c in self.columns if c.generate is not None)

    @property
    def data_columns(self) -> tuple[ColumnSpec, ...]:
        """Writable columns that are neither key nor unique key."""
        skip = set(self.key) | ({self.unique} if self.unique else set())
        return tuple(c for c in self.writable_columns if c.name not in skip)

    def key_of(self, row: Row) -> Key:
        """
        The primary-key tuple of a row.

        :param row: the row, by column name.
        """
        return tuple(row[k] for k in self.key)

    def parameter(self, name: str, value: Any) -> Any:
        """
        The ``?`` parameter pyodbc sends for a value of a column.

        :param name: the column name.
        :param value: the value as the model holds it.
        """
        for column in self.columns:
            if column.name == name and column.parameter is not None:
                return column.parameter(value)
        return value

    def create_statement(self) -> str:
        """The CREATE TABLE statement."""
        parts = [f"[{c.name}] {c.declaration}" for c in self.columns]
        parts.append(f"CONSTRAINT [PK_{self.name}] PRIMARY KEY ({', '.join(f'[{k}]' for k in self.key)})")
        if self.unique:
            parts.append(f"CONSTRAINT [UQ_{self.name}_{self.unique}] UNIQUE ([{self.unique}])")
        parts.extend(self.constraints)
        return f"CREATE TABLE {self.quoted_name} (\n  " + ",\n  ".join(parts) + "\n)"


def find_table(tables: Sequence[SampleTable], qualified_name: str) -> SampleTable:
    """
    The table called ``schema.name`` among ``tables``.

    :param tables: the tables to look in.
    :param qualified_name: ``schema.name``.
    :raises KeyError: no table has that name.
    """
    for table in tables:
        if table.qualified_name == qualified_name:
            return table
    raise KeyError(f"{qualified_name} is not one of the tables {[t.qualified_name for t in tables]}")
