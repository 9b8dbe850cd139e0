"""Capture instances: their metadata and how one source-row change becomes change-table rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlserver_cdc_simulator.cdc.change_table import ChangeTable
from sqlserver_cdc_simulator.cdc.update_mask import full_mask, mask_from_ordinals
from sqlserver_cdc_simulator.types import SqlType

DELETE, INSERT, UPDATE_OLD, UPDATE_NEW = 1, 2, 3, 4

# Types whose before-image SQL Server leaves NULL in an update unless the column changed.
MAX_LOB_TYPES = frozenset({"xml"})
# Legacy LOB types: NULL in deletes and update before-images, always.
LEGACY_LOB_TYPES = frozenset({"text", "ntext", "image"})

RESERVED_COLUMN_NAMES = frozenset(
    {"__$start_lsn", "__$end_lsn", "__$seqval", "__$operation", "__$update_mask", "__$command_id"}
)


@dataclass(frozen=True)
class CapturedColumn:
    """
    One row of ``cdc.captured_columns``, plus the declared type the change table uses.

    :param name: column name in the source table.
    :param column_id: the column's ``column_id`` in the source table.
    :param sql_type: the column's type in the change table (``timestamp`` becomes ``binary(8)``).
    :param ordinal: 1-based position among the captured columns (its bit in the update mask).
    :param is_computed: whether the source column is computed (its captured value is always NULL).
    :param source_type_name: the source column's type name when the change table uses another
        (``timestamp``, captured as ``binary(8)``).
    """

    name: str
    column_id: int
    sql_type: SqlType
    ordinal: int
    is_computed: bool = False
    source_type_name: str | None = None

    @property
    def column_type(self) -> str:
        """``cdc.captured_columns.column_type``: the source column's bare type name."""
        return self.source_type_name or self.sql_type.name

    @property
    def is_max_lob(self) -> bool:
        """varchar(max), nvarchar(max), varbinary(max) or xml."""
        return self.sql_type.is_max or self.sql_type.name in MAX_LOB_TYPES

    @property
    def is_legacy_lob(self) -> bool:
        """text, ntext or image."""
        return self.sql_type.name in LEGACY_LOB_TYPES


@dataclass(frozen=True)
class IndexColumn:
    """One row of ``cdc.index_columns``."""

    name: str
    index_ordinal: int
    column_id: int


@dataclass
class CaptureInstance:
    """
    A capture instance: ``cdc.change_tables`` metadata, its columns and its change table.

    ``start_lsn`` is the low-water mark: the LSN of ``sys.sp_cdc_enable_table`` from the start (so
    ``sys.fn_cdc_get_min_lsn`` can exceed ``sys.fn_cdc_get_max_lsn`` until the capture job has run,
    as on SQL Server), later moved up by cleanup. cdc-change-tables-transact-sql.md allows NULL ("the
    low endpoint has not been established"); the simulator never leaves it NULL.
    """

    name: str
    source_schema: str
    source_table: str
    source_object_id: int
    object_id: int
    captured_columns: list[CapturedColumn]
    index_name: str | None
    index_columns: list[IndexColumn]
    supports_net_changes: bool
    role_name: str | None
    create_date: dt.datetime
    enable_lsn: bytes
    start_lsn: bytes | None = None
    filegroup_name: str | None = None
    has_drop_pending: bool = False
    partition_switch: bool = True
    change_table: ChangeTable = field(default_factory=ChangeTable)

    @property
    def change_table_name(self) -> str:
        """The change table's name in the ``cdc`` schema."""
        return f"{self.name}_CT"

    @property
    def column_names(self) -> list[str]:
        """Captured column names in ordinal order."""
        return [c.name for c in self.captured_columns]

    @property
    def key_ordinals(self) -> list[int]:
        """Ordinals (among captured columns) of the columns that identify a row for net changes."""
        by_name = {c.name.lower(): c.ordinal for c in self.captured_columns}
        return [
            by_name[ic.name.lower()] for ic in sorted(self.index_columns, key=lambda ic: ic.index_ordinal)
        ]

    def column_ordinal(self, column_name: str | None) -> int | None:
        """``sys.fn_cdc_get_column_ordinal``: the ordinal of a captured column, NULL when not captured."""
        if column_name is None:
            return None
        wanted = column_name.lower()
        for column in self.captured_columns:
            if column.name.lower() == wanted:
                return column.ordinal
        return None

    def projection(self, source_columns: Sequence[str]) -> list[int]:
        """For each captured column, its index in a source row with ``source_columns`` (-1 if dropped)."""
        positions = {name.lower(): i for i, name in enumerate(source_columns)}
        result = []
        for column in self.captured_columns:
            position = positions.get(column.name.lower(), -1)
            result.append(-1 if column.is_computed else position)
        return result


@dataclass(frozen=True, slots=True)
class RowChange:
    """
    One row operation of a committed transaction, as the capture job reads it from the log.

    :param operation: ``insert``, ``delete`` or ``update``.
    :param lsn: the LSN of the operation's log record (becomes ``__$seqval``).
    :param columns: the source table's column names at the time of the operation.
    :param before: the row before the operation (deletes and updates), in ``columns`` order.
    :param after: the row after the operation (inserts and updates), in ``columns`` order.
    """

    operation: str
    lsn: bytes
    columns: tuple[str, ...]
    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None


class ChangeRowBuilder:
    """Turns :class:`RowChange` records into change-table rows for one capture instance."""

    def __init__(self, instance: CaptureInstance) -> None:
        self._instance = instance
        self._count = len(instance.captured_columns)
        self._full_mask = full_mask(self._count)
        self._projections: dict[tuple[str, ...], list[int]] = {}
        self._max_lob = [c.is_max_lob for c in instance.captured_columns]
        self._legacy_lob = [c.is_legacy_lob for c in instance.captured_columns]

    def _project(self, columns: tuple[str, ...], row: tuple[Any, ...]) -> list[Any]:
        projection = self._projections.get(columns)
        if projection is None:
            projection = self._instance.projection(columns)
            self._projections[columns] = projection
        return [None if p < 0 else row[p] for p in projection]

    def rows(self, change: RowChange, start_lsn: bytes) -> list[tuple[Any, ...]]:
        """The change rows (one, or two for an update) for ``change`` committed at ``start_lsn``."""
        if change.operation == "insert":
            assert change.after is not None
            return [
                (start_lsn, change.lsn, INSERT, self._full_mask, *self._project(change.columns, change.after))
            ]
        if change.operation == "delete":
            assert change.before is not None
            values = self._project(change.columns, change.before)
            for i, legacy in enumerate(self._legacy_lob):
                if legacy:
                    values[i] = None
            return [(start_lsn, change.lsn, DELETE, self._full_mask, *values)]
        if change.operation == "update":
            assert change.before is not None and change.after is not None
            before = self._project(change.columns, change.before)
            after = self._project(change.columns, change.after)
            changed = [i + 1 for i in range(self._count) if not _same_value(before[i], after[i])]
            mask = mask_from_ordinals(changed, self._count)
            changed_set = set(changed)
            for i in range(self._count):
                if self._legacy_lob[i] or (self._max_lob[i] and (i + 1) not in changed_set):
                    before[i] = None
            return [
                (start_lsn, change.lsn, UPDATE_OLD, mask, *before),
                (start_lsn, change.lsn, UPDATE_NEW, mask, *after),
            ]
        raise ValueError(f"unknown row operation {change.operation!r}")


def _same_value(left: Any, right: Any) -> bool:
    if left is None or right is None:
        return left is None and right is None
    return type(left) is type(right) and left == right


def parse_column_list(text: str) -> list[str]:
    """
    Split ``@captured_column_list``: comma-separated names, each optionally in ``[...]`` or ``"..."``.

    :raises ValueError: for a quoted name that is not terminated (SQL Server's error 22965).
    """
    names: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if text[i] in '["':
            close = "]" if text[i] == "[" else '"'
            i += 1
            buf = []
            while True:
                if i >= n:
                    raise ValueError("unterminated quoted column name")
                if text[i] == close:
                    if i + 1 < n and text[i + 1] == close:
                        buf.append(close)
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            names.append("".join(buf))
            while i < n and text[i] in " \t\r\n":
                i += 1
            if i < n and text[i] != ",":
                raise ValueError("unexpected text after a quoted column name")
            i += 1
        else:
            j = text.find(",", i)
            if j < 0:
                j = n
            name = text[i:j].strip()
            if name:
                names.append(name)
            i = j + 1
    return names
