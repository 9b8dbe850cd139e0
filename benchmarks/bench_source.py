"""What the benchmarks share: the simulator process, its ODBC string, 10-column tables, CPU readings.

The simulator process and the Airflow connection to it come from the provider's test harness
(``airflow_provider_sqlserver_cdc.testing``), as in the tests and the demo.

Also runs one measured reader in a fresh process (the calling script again, with ``--child``),
so that its CPU time and peak RSS belong to that reader alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import decimal
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from airflow_provider_sqlserver_cdc.hooks.odbc_connection import odbc_connection_string
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from sqlserver_cdc_simulator.connections import mssql_connection_json
from sqlserver_cdc_simulator.process import SimulatorProcess, SimulatorStartError

PASSWORD = "Bench-Pa55word!"
COLUMNS = (
    "id int NOT NULL PRIMARY KEY, c_bigint bigint NULL, c_decimal decimal(18,4) NULL, c_nvarchar nvarchar(50) NULL, "
    "c_varchar varchar(30) NULL, c_datetime2 datetime2(7) NULL, c_date date NULL, c_float float NULL, c_bit bit NULL, "
    "c_guid uniqueidentifier NULL"
)
ROWS_PER_INSERT = 200  # 10 parameters per row, SQL Server allows 2100 per statement


def start_simulator(*options: str) -> SimulatorProcess:
    """
    Start the simulator in its own process (``with``: stopped at the end of the block).

    :param options: further command-line options of the simulator, e.g. ``"--timezone", "Asia/Kolkata"``.
    """
    try:
        return SimulatorProcess.start(PASSWORD, *options)
    except SimulatorStartError as err:
        raise SystemExit(f"simulator did not start: {err}") from None


def odbc(host: str, port: int, database: str | None = None) -> str:
    """The pyodbc + FreeTDS connection string of the simulator (as ``sa``)."""
    return odbc_connection_string(host=host, port=port, database=database, user="sa", password=PASSWORD)


@dataclasses.dataclass(frozen=True)
class BenchServer:
    """The server a benchmark reads: a fresh simulator, or the one ``--odbc`` names."""

    #: the pyodbc connection string (of the server's default database).
    connection_string: str
    #: the simulator's process id (its CPU seconds are read), ``None`` for ``--odbc``.
    pid: int | None
    #: the connection string of another database on the same server.
    database: Callable[[str], str]


@contextlib.contextmanager
def bench_server(odbc_string: str | None) -> Iterator[BenchServer]:
    """
    The server of a benchmark run: ``odbc_string`` (``--odbc``) as it is, or else a simulator
    started for the block and stopped at its end.
    """
    if odbc_string:
        yield BenchServer(odbc_string, None, lambda name: f"{odbc_string};DATABASE={name};")
        return
    simulator = start_simulator()
    try:
        yield BenchServer(
            odbc(simulator.host, simulator.port),
            simulator.pid,
            lambda name: odbc(simulator.host, simulator.port, name),
        )
    finally:
        simulator.stop()


def create_cdc_database(host: str, port: int, database: str) -> tuple[Any, Any]:
    """
    Create ``database`` with snapshot isolation allowed and CDC enabled; return an autocommit pyodbc
    connection and a cursor on it, in that database.
    """
    import pyodbc

    conn = pyodbc.connect(odbc(host, port), autocommit=True)
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE {database}")
    cur.execute(f"ALTER DATABASE {database} SET ALLOW_SNAPSHOT_ISOLATION ON")
    cur.execute(f"USE {database}")
    cur.execute("EXEC sys.sp_cdc_enable_db")
    return conn, cur


def create_cdc_table(cursor: Any, table: str) -> None:
    """Create ``dbo.<table>`` with the 10 benchmark columns (:data:`COLUMNS`) and enable CDC on it."""
    cursor.execute(f"CREATE TABLE dbo.{table} ({COLUMNS})")
    cursor.execute(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = ?, @role_name = NULL", table
    )


def bench_row(i: int) -> tuple:
    """Row ``i`` of a benchmark table, one value per column of :data:`COLUMNS`."""
    return (
        i,
        i * 1_000_003,
        decimal.Decimal(i % 100_000_000).scaleb(-4),
        f"name {i} é",
        f"code-{i % 9973}",
        dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i, microseconds=i % 1_000_000),
        dt.date(2020, 1, 1) + dt.timedelta(days=i % 3650),
        i / 7.0,
        i % 2 == 0,
        uuid.UUID(int=i * 2654435761 % (1 << 128)),
    )


def insert_rows(cursor: Any, table: str, first: int, end: int) -> None:
    """Insert rows ``first`` .. ``end - 1`` into ``dbo.{table}``, :data:`ROWS_PER_INSERT` per statement."""
    placeholders = "(" + ",".join("?" * 10) + ")"
    for start in range(first, end, ROWS_PER_INSERT):
        chunk = [bench_row(i) for i in range(start, min(start + ROWS_PER_INSERT, end))]
        cursor.execute(
            f"INSERT INTO dbo.{table} VALUES {','.join([placeholders] * len(chunk))}",
            *[v for row in chunk for v in row],
        )


def count_rows(cursor: Any, batch_size: int) -> int:
    """Fetch every row of the cursor's result, ``batch_size`` at a time, discarding them; return how many."""
    rows = 0
    while batch := cursor.fetchmany(batch_size):
        rows += len(batch)
    return rows


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds used so far by process ``pid`` (from ``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(before: resource.struct_rusage, after: resource.struct_rusage) -> float:
    """User plus system CPU seconds of this process between two ``getrusage`` readings."""
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@contextlib.contextmanager
def measured() -> Iterator[dict[str, float]]:
    """Measure the ``with`` block: the dict it yields gets ``cpu_s``, ``wall_s`` and ``peak_rss_mb`` at its end."""
    reading: dict[str, float] = {}
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.monotonic()
    yield reading
    after = resource.getrusage(resource.RUSAGE_SELF)
    reading.update(
        cpu_s=cpu_seconds(before, after),
        wall_s=time.monotonic() - started,
        peak_rss_mb=after.ru_maxrss / 1024,
    )


def run_child(script: str, simulator: SimulatorProcess, database: str, label: str, **options: object) -> dict:
    """
    Run ``script`` again in a fresh process with ``options``; return the JSON its last output line holds.

    The process gets the Airflow connection ``bench`` (type ``mssql``) to the simulator's ``database``.

    :param label: what is measured, for the error message when the process fails.
    :param options: the child's command-line options: ``batch_size=5`` becomes ``--batch-size 5``;
        ``--host`` and ``--port`` of the simulator are added.
    """
    options = {**options, "host": simulator.host, "port": simulator.port}
    args = [item for name, value in options.items() for item in (f"--{name.replace('_', '-')}", str(value))]
    env = os.environ.copy()
    env[connection_variable("bench")] = mssql_connection_json(
        simulator.host, simulator.port, "sa", PASSWORD, database
    )
    # The simulator connection names its driver (FreeTDS: the simulator speaks no TLS) in the extra.
    env["AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA"] = "True"
    env.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-airflow-"))
    proc = subprocess.run(
        [sys.executable, script, *args], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{label} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
