"""CaptureInstance and CapturedColumn: metadata of one CDC capture instance."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from airflow_provider_sqlserver_cdc.errors import NoKeyColumnsError
from airflow_provider_sqlserver_cdc.lsn import Lsn


@dataclass(frozen=True)
class CapturedColumn:
    """
    One captured column with its full SQL Server type.

    :param name: column name.
    :param ordinal: ``column_ordinal`` in the capture instance (1-based; the update-mask bit).
    :param sql_type: type name as in ``sys.types`` (e.g. ``decimal``, ``nvarchar``).
    :param max_length: ``sys.columns.max_length`` in bytes (-1 for the (max) types).
    :param precision: ``sys.columns.precision``.
    :param scale: ``sys.columns.scale`` (fraction digits for time, datetime2, datetimeoffset).
    :param nullable: ``sys.columns.is_nullable``.
    :param computed: a computed column of the source table (``is_computed``): CDC captures it as
        NULL, so the provider leaves it out (docs/operations.md, "Computed columns").
    """

    name: str
    ordinal: int
    sql_type: str
    max_length: int
    precision: int
    scale: int
    nullable: bool = True
    computed: bool = False

    def describe(self) -> str:
        """The type as T-SQL declares it, e.g. ``decimal(18,2)`` or ``nvarchar(max)``."""
        t = self.sql_type.lower()
        if t in ("decimal", "numeric"):
            return f"{t}({self.precision},{self.scale})"
        if t in ("varchar", "char", "varbinary", "binary"):
            return f"{t}(max)" if self.max_length == -1 else f"{t}({self.max_length})"
        if t in ("nvarchar", "nchar"):
            return f"{t}(max)" if self.max_length == -1 else f"{t}({self.max_length // 2})"
        if t in ("time", "datetime2", "datetimeoffset"):
            return f"{t}({self.scale})"
        return t


@dataclass(frozen=True)
class CaptureInstance:
    """
    A capture instance and its source table.

    :param name: the capture instance (e.g. ``dbo_orders``).
    :param source_schema: schema of the source table.
    :param source_table: name of the source table.
    :param start_lsn: the LSN at which the instance started capturing.
    :param supports_net_changes: whether net-change functions exist.
    :param role_name: the gating role (None when ungated).
    :param index_name: the unique index that identifies rows (None if none).
    :param create_date: when the instance was created (server local time).
    :param columns: captured columns in ordinal order (empty until loaded), without computed ones.
    :param key_columns: key column names in index order (empty when the table has no key, or when
        a key column is computed).
    :param computed_columns: captured computed columns, left out of ``columns``: CDC captures them
        as NULL (docs/operations.md, "Computed columns").
    :param computed_key_columns: the key columns that are computed (then ``key_columns`` is empty).
    """

    # Alike only in shape to the simulator's CapturedColumn (it must not import the provider) and ChangeWindow.
    name: str
    source_schema: str
    source_table: str
    start_lsn: Lsn
    supports_net_changes: bool = False
    role_name: str | None = None
    index_name: str | None = None
    create_date: datetime | None = None
    columns: tuple[CapturedColumn, ...] = field(default=())
    key_columns: tuple[str, ...] = field(default=())
    computed_columns: tuple[str, ...] = field(default=())
    computed_key_columns: tuple[str, ...] = field(default=())

    @property
    def source(self) -> str:
        """``schema.table`` of the source table."""
        return f"{self.source_schema}.{self.source_table}"


def capture_instance_names(value: str | Sequence[str] | None) -> list[str]:
    """
    The capture instances an operator was given, as a list.

    :param value: one name (or ``schema.table``), a list of them, or None (none given).
    """
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def require_key_columns(instances: Iterable[CaptureInstance]) -> None:
    """Raise NoKeyColumnsError for the first instance without key columns (the merge matches rows by key)."""
    for instance in instances:
        computed_keys = instance.computed_key_columns or tuple(
            k for k in instance.key_columns if k.lower() not in {c.name.lower() for c in instance.columns}
        )
        if computed_keys and instance.columns:
            raise NoKeyColumnsError(
                f"Capture instance {instance.name!r} (source {instance.source}) identifies rows by "
                f"{', '.join(computed_keys)}, a computed column: CDC captures computed columns as NULL, so "
                "its change rows carry no key and the merge cannot match them. Identify rows by regular "
                "columns: re-enable CDC on the table with @index_name = N'<unique index on non-computed "
                'columns>\' under a new capture instance (docs/operations.md, "Computed columns").'
            )
        if not instance.key_columns:
            raise NoKeyColumnsError(
                f"Capture instance {instance.name!r} (source {instance.source}) has no key columns: the "
                "table has no primary key and the instance was enabled without @index_name, so the "
                "merge cannot match rows. Add a primary key, or re-enable CDC with "
                "@index_name = N'<unique index>', or pass require_key_columns=False."
            )
