"""Support for the CDC scenario tests: backends (simulator or SQL Server) and a CDC database handle.

Every scenario test runs against the simulator (pyodbc + FreeTDS, through the package's
``sqlserver_simulator`` fixture) and, when ``SQLSERVER_CDC_TEST_ODBC`` holds an ODBC connection
string for a SQL Server 2022 with SQL Server Agent, against that server too (marker ``mssql``).
A synchronous capture scan is the simulator fixture's ``run_capture_scan`` or, on SQL Server,
``sys.sp_cdc_scan`` (which SQL Server runs synchronously next to the Agent job).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyodbc
import pytest


class Backend:
    """A server the scenarios run on."""

    name = "backend"
    simulated = False

    def connection_string(self, database: str | None = None) -> str:
        raise NotImplementedError

    def connect(
        self, database: str | None = None, *, autocommit: bool = True, **extra: str
    ) -> pyodbc.Connection:
        """A new pyodbc connection (to ``database`` when given)."""
        cs = self.connection_string(database)
        for key, value in extra.items():
            cs = _replace(cs, key, value)
        return pyodbc.connect(cs, autocommit=autocommit)

    def capture(self, conn: pyodbc.Connection, database: str) -> None:
        """Run capture scans until every committed transaction has been processed."""
        conn.cursor().execute("EXEC sys.sp_cdc_scan @maxtrans = 100000, @maxscans = 100").close()

    def advance_clock(self, seconds: float) -> None:
        """Move the server clock forward (only the simulator can)."""
        raise NotImplementedError

    def freeze_clock(self) -> None:
        """Stop the server clock (only the simulator can)."""
        raise NotImplementedError


def _replace(connection_string: str, key: str, value: str) -> str:
    parts = [p for p in connection_string.split(";") if p and not p.upper().startswith(key.upper() + "=")]
    parts.append(f"{key}={value}")
    return ";".join(parts) + ";"


class SimulatorBackend(Backend):
    name = "simulator"
    simulated = True

    def __init__(self, simulator: Any) -> None:
        self.simulator = simulator

    def connection_string(self, database: str | None = None) -> str:
        return self.simulator.odbc_connection_string(database=database)

    def capture(self, conn: pyodbc.Connection, database: str) -> None:
        self.simulator.run_capture_scan(database)

    def advance_clock(self, seconds: float) -> None:
        self.simulator.clock.advance(seconds)

    def freeze_clock(self) -> None:
        self.simulator.clock.freeze()


class SqlServerBackend(Backend):
    name = "mssql"

    def __init__(self, connection_string: str) -> None:
        self._cs = connection_string

    def connection_string(self, database: str | None = None) -> str:
        return self._cs if database is None else _replace(self._cs, "DATABASE", database)


@dataclass
class CdcDb:
    """A fresh database with CDC enabled, and an autocommit connection to it."""

    backend: Backend
    name: str
    conn: pyodbc.Connection

    def execute(self, sql: str, *params: Any) -> pyodbc.Cursor:
        """Run a statement on the fixture's connection."""
        return self.conn.cursor().execute(sql, *params)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run a query and fetch every row as a tuple."""
        cursor = self.conn.cursor()
        cursor.execute(sql, *params)
        rows = [tuple(r) for r in cursor.fetchall()]
        cursor.close()
        return rows

    def scalar(self, sql: str, *params: Any) -> Any:
        """Run a query returning one value."""
        cursor = self.conn.cursor()
        cursor.execute(sql, *params)
        row = cursor.fetchone()
        cursor.close()
        return None if row is None else row[0]

    def run(self, *statements: str) -> None:
        """Run statements one after another on the fixture's connection."""
        for sql in statements:
            self.execute(sql).close()

    def track(self, create_table: str, table: str, **options: Any) -> None:
        """
        Create a table, enable it for CDC and stop the capture job, so that scans happen only on request.

        :param create_table: the CREATE TABLE statement.
        :param table: the table's name in ``dbo``.
        :param options: ``sys.sp_cdc_enable_table`` parameters (see :meth:`enable_table`).
        """
        self.run(create_table)
        self.enable_table(table, **options)
        self.run("EXEC sys.sp_cdc_stop_job @job_type = N'capture'")

    def capture(self) -> None:
        """Run the capture job synchronously."""
        self.backend.capture(self.conn, self.name)

    def enable_table(self, table: str, schema: str = "dbo", **options: Any) -> None:
        """``sys.sp_cdc_enable_table`` with ``@role_name = NULL`` unless given."""
        options.setdefault("role_name", None)
        names = ["source_schema", "source_name", *options]
        sql = "EXEC sys.sp_cdc_enable_table " + ", ".join(f"@{n} = ?" for n in names)
        cursor = self.conn.cursor()
        cursor.execute(sql, schema, table, *options.values())
        while cursor.nextset():
            pass
        cursor.close()

    def connect(self, **extra: str) -> pyodbc.Connection:
        """Another connection to this database."""
        return self.backend.connect(self.name, **extra)


def lsn(value: bytes | bytearray | None) -> bytes | None:
    """Normalise a binary(10) value fetched through pyodbc."""
    return None if value is None else bytes(value)


def error_number(excinfo: pytest.ExceptionInfo[BaseException]) -> int:
    """The SQL Server error number in a pyodbc error's text ``... (313) (SQLExecDirectW)``."""
    text = str(excinfo.value)
    import re

    numbers = re.findall(r"\((\d+)\) \(SQL", text)
    assert numbers, text
    return int(numbers[0])


#: the result set columns that open sp_cdc_get_captured_columns' and sp_cdc_get_ddl_history's rows: the capture
#: instance and its source table, as (name, the Python type pyodbc gives, precision)
INSTANCE_RESULT_COLUMNS = [
    ("source_schema", str, 128),
    ("source_table", str, 128),
    ("capture_instance", str, 128),
]
#: sys.sp_cdc_get_captured_columns' result set (sys-sp-cdc-get-captured-columns-transact-sql.md, "Result Sets");
#: precision tells int (10) from smallint (5) and tinyint (3)
CAPTURED_COLUMNS_RESULT = [
    *INSTANCE_RESULT_COLUMNS,
    ("column_name", str, 128),
    ("column_id", int, 10),
    ("column_ordinal", int, 10),
    ("data_type", str, 128),
    ("character_maximum_length", int, 10),
    ("numeric_precision", int, 3),  # tinyint
    ("numeric_precision_radix", int, 5),  # smallint
    ("numeric_scale", int, 10),
    ("datetime_precision", int, 5),  # smallint
]
