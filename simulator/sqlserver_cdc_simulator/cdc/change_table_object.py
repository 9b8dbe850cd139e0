"""The change table as a table of the ``cdc`` schema, so catalog views and plain SELECTs see it.

SQL Server's ``cdc.<capture_instance>_CT`` is an ordinary (system-shipped) table: it is listed in
``sys.tables``, its columns are in ``sys.columns`` (the provider reads captured column types from
there) and it can be queried with any SELECT. :class:`ChangeTableObject` is an engine
:class:`~..storage.Table` whose rows are the capture instance's :class:`~.change_table.ChangeTable`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.cdc.capture_instance import CaptureInstance
from sqlserver_cdc_simulator.storage import Column, Table

LSN_TYPE = T.binary(10)


class ChangeTableObject(Table):
    """
    ``cdc.<capture_instance>_CT`` backed by the instance's change rows (read-only).

    :param instance: the capture instance.
    :param schema: the database's ``cdc`` schema.
    :param create_ticks: creation time (server local ticks).
    """

    def __init__(self, instance: CaptureInstance, schema: Any, create_ticks: int) -> None:
        columns = [
            Column("__$start_lsn", LSN_TYPE, False),
            Column("__$end_lsn", LSN_TYPE, True),
            Column("__$seqval", LSN_TYPE, False),
            Column("__$operation", T.INT, False),
            Column("__$update_mask", T.varbinary(128), True),
            *(Column(c.name, c.sql_type, True) for c in instance.captured_columns),
            Column("__$command_id", T.INT, True),
        ]
        super().__init__(instance.object_id, schema, instance.change_table_name, columns, create_ticks)
        self.flags["is_ms_shipped"] = True
        self.instance = instance

    def scan(self, xact: Any, snap: int) -> Iterator[tuple[Any, ...]]:
        """Every change row, in the table's column order."""
        return self.instance.change_table.table_rows()

    def scan_with_ids(self, xact: Any, snap: int) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """Change rows with synthetic row ids (the change table is maintained by the capture job only)."""
        return enumerate(self.instance.change_table.table_rows(), start=1)

    def row_count(self, snap: int) -> int:
        """Number of change rows."""
        return len(self.instance.change_table)


def attach_change_table(database: Any, instance: CaptureInstance, create_ticks: int) -> ChangeTableObject:
    """Create ``cdc.<ci>_CT`` in the database's ``cdc`` schema."""
    schema = database.schema("cdc")
    table = ChangeTableObject(instance, schema, create_ticks)
    schema.tables[table.name.lower()] = table
    return table


def detach_change_table(database: Any, instance: CaptureInstance) -> None:
    """Drop ``cdc.<ci>_CT``."""
    schema = database.schema("cdc")
    if schema is not None:
        schema.tables.pop(instance.change_table_name.lower(), None)
