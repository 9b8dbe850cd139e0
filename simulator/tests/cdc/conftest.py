"""Fixtures for the CDC scenario tests: one fresh CDC-enabled database per test, on a backend.

See :mod:`cdc_scenario_support` for the backends: the simulator always, and the SQL Server named by
``SQLSERVER_CDC_TEST_ODBC`` (marker ``mssql``) when it is set.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator

import pyodbc
import pytest
from cdc_scenario_support import Backend, CdcDb, SimulatorBackend, SqlServerBackend


@pytest.fixture(params=["simulator", pytest.param("mssql", marks=pytest.mark.mssql)])
def backend(request: pytest.FixtureRequest) -> Backend:
    """The simulator, or the SQL Server named by ``SQLSERVER_CDC_TEST_ODBC``."""
    if request.param == "simulator":
        return SimulatorBackend(request.getfixturevalue("sqlserver_simulator"))
    return SqlServerBackend(os.environ["SQLSERVER_CDC_TEST_ODBC"])


def _drop(conn: pyodbc.Connection, name: str) -> None:
    cursor = conn.cursor()
    cursor.execute("USE master")
    if cursor.execute("SELECT DB_ID(?)", name).fetchone()[0] is None:
        return
    # A connection closed a moment ago may still be leaving the database on the server side.
    for attempt in range(50):
        try:
            cursor.execute(f"DROP DATABASE [{name}]")
            return
        except pyodbc.Error as error:
            if "(3702)" not in str(error) or attempt == 49:
                raise
            time.sleep(0.1)
    cursor.close()


@contextlib.contextmanager
def _fresh_database(backend: Backend, prefix: str, *, enable_cdc: bool) -> Iterator[CdcDb]:
    """Create a database, yield a handle with a connection to it, then drop it."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = backend.connect()
    admin.cursor().execute(f"CREATE DATABASE [{name}]").close()
    conn = backend.connect(name)
    db = CdcDb(backend, name, conn)
    if enable_cdc:
        db.execute("EXEC sys.sp_cdc_enable_db").close()
    try:
        yield db
    finally:
        if enable_cdc:
            with contextlib.suppress(pyodbc.Error):
                conn.cursor().execute("EXEC sys.sp_cdc_disable_db").close()
        conn.close()
        _drop(admin, name)
        admin.close()


@pytest.fixture
def cdc_db(backend: Backend) -> Iterator[CdcDb]:
    """A new database with ``sys.sp_cdc_enable_db`` run in it (tables are enabled by each test)."""
    with _fresh_database(backend, "cdc_t", enable_cdc=True) as db:
        yield db


@pytest.fixture
def plain_db(backend: Backend) -> Iterator[CdcDb]:
    """A new database without CDC."""
    with _fresh_database(backend, "cdc_p", enable_cdc=False) as db:
        yield db
