"""Create the sample database, its tables and their CDC capture instances through a pyodbc connection."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlserver_cdc_simulator.workload.odbc_client import cursor_with_autocommit, drain
from sqlserver_cdc_simulator.workload.sample_tables import SAMPLE_TABLES
from sqlserver_cdc_simulator.workload.schema import SampleTable, find_table


@dataclasses.dataclass
class SampleDatabase:
    """
    The sample database: its name and tables (all enabled for CDC unless asked otherwise).

    :param database: database name.
    :param tables: the tables created.
    """

    database: str
    tables: tuple[SampleTable, ...] = SAMPLE_TABLES

    @classmethod
    def create(
        cls,
        conn: Any,
        database: str = "cdc_sample",
        *,
        enable_cdc: bool = True,
        role_name: str | None = None,
        supports_net_changes: bool = True,
        drop_existing: bool = True,
        tables: Sequence[SampleTable] = SAMPLE_TABLES,
        allow_snapshot_isolation: bool = True,
    ) -> SampleDatabase:
        """
        Create the database and its tables and enable CDC on them; leave the connection in it.

        The database allows SNAPSHOT isolation (``ALLOW_SNAPSHOT_ISOLATION ON``) unless asked not to:
        the initial load's default consistent-point method needs it.

        :param conn: a pyodbc connection (autocommit on or off; the DDL is committed).
        :param database: name of the database to create.
        :param enable_cdc: run ``sys.sp_cdc_enable_db`` and ``sys.sp_cdc_enable_table``.
        :param role_name: ``@role_name`` gating access to the change data (None: no gating role).
        :param supports_net_changes: ``@supports_net_changes`` for each table.
        :param drop_existing: drop a database of that name first.
        :param tables: the tables to create (default: all sample tables).
        :param allow_snapshot_isolation: set ``ALLOW_SNAPSHOT_ISOLATION ON`` (False leaves it OFF, to
            test what happens without it).
        """
        quoted = "[" + database.replace("]", "]]") + "]"
        with cursor_with_autocommit(conn, True) as cursor:
            cursor.execute("USE master")
            if drop_existing and cursor.execute("SELECT DB_ID(?)", database).fetchone()[0] is not None:
                cursor.execute(f"DROP DATABASE {quoted}")
            cursor.execute(f"CREATE DATABASE {quoted}")
            if allow_snapshot_isolation:
                cursor.execute(f"ALTER DATABASE {quoted} SET ALLOW_SNAPSHOT_ISOLATION ON")
            cursor.execute(f"USE {quoted}")
            for table in tables:
                cursor.execute(table.create_statement())
            if enable_cdc:
                cursor.execute("EXEC sys.sp_cdc_enable_db")
                for table in tables:
                    cursor.execute(
                        "EXEC sys.sp_cdc_enable_table @source_schema = ?, @source_name = ?, @role_name = ?, "
                        "@supports_net_changes = ?",
                        table.schema,
                        table.name,
                        role_name,
                        1 if supports_net_changes else 0,
                    )
                    drain(cursor)
        return cls(database=database, tables=tuple(tables))

    def table(self, qualified_name: str) -> SampleTable:
        """
        The table called ``schema.name``.

        :param qualified_name: ``schema.name``.
        """
        return find_table(self.tables, qualified_name)
