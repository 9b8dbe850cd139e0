"""The simulator's test suite: set-up, and the conformance fixtures (the same tests against the simulator or a real SQL Server).

Microsoft's ODBC Driver 18 (``make client-deps`` unpacks it into the repository's
``.cache/clients/msodbcsql18``) is registered beside the system's drivers for this process and its
children; the ``odbc_driver`` fixture (the simulator's pytest plugin) skips its Driver 18 runs when
it is missing. Tests marked ``mssql`` skip unless ``SQLSERVER_CDC_TEST_ODBC`` names a real server.

``sql_backend`` is parametrised: ``simulator`` (the ``sqlserver_simulator`` fixture) and ``mssql``
(a real server from ``SQLSERVER_CDC_TEST_ODBC``, marked ``mssql`` so the suite skips it without one).
Each test gets its own fresh database.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymssql
import pyodbc
import pytest

from sqlserver_cdc_simulator.odbc_drivers import register_test_drivers

# Registered by the distribution's pytest11 entry point when installed; listed for a run from the checkout.
pytest_plugins = ["sqlserver_cdc_simulator.pytest_plugin"]

REPO_ROOT = Path(__file__).resolve().parents[2]
_ODBC_INI_DIR = Path(tempfile.mkdtemp(prefix="sqlserver-cdc-simulator-odbc-"))
atexit.register(shutil.rmtree, _ODBC_INI_DIR, True)
register_test_drivers(REPO_ROOT / ".cache" / "clients" / "msodbcsql18" / "driver", _ODBC_INI_DIR)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests that need a real SQL Server (marker ``mssql``) unless ``SQLSERVER_CDC_TEST_ODBC`` is set."""
    if os.environ.get("SQLSERVER_CDC_TEST_ODBC"):
        return
    skip = pytest.mark.skip(reason="set SQLSERVER_CDC_TEST_ODBC to an ODBC connection string to run")
    for item in items:
        if "mssql" in item.keywords:
            item.add_marker(skip)


class Backend:
    """How to reach a SQL Server (simulated or real) with both drivers, inside one test database."""

    def __init__(self, name: str, odbc: str, pymssql_args: dict[str, Any], database: str) -> None:
        self.name = name
        self._odbc = odbc
        self._pymssql = pymssql_args
        self.database = database

    @property
    def is_simulator(self) -> bool:
        return self.name == "simulator"

    def odbc_string(self, database: str | None = None, **overrides: str) -> str:
        parts = dict(p.split("=", 1) for p in self._odbc.strip(";").split(";") if "=" in p)
        parts = {k.upper(): v for k, v in parts.items()}
        parts["DATABASE"] = database or self.database
        for k, v in overrides.items():
            parts[k.upper()] = v
        return ";".join(f"{k}={v}" for k, v in parts.items()) + ";"

    def pyodbc(self, autocommit: bool = True, database: str | None = None) -> pyodbc.Connection:
        conn = pyodbc.connect(self.odbc_string(database), autocommit=autocommit, timeout=10)
        conn.add_output_converter(-155, _datetimeoffset_as_text)
        return conn

    def pymssql(self, autocommit: bool = True, database: str | None = None) -> Any:
        conn = pymssql.connect(**self._pymssql, database=database or self.database, login_timeout=10)
        if autocommit:
            conn.autocommit(True)
        return conn


def _datetimeoffset_as_text(raw: bytes) -> str:
    """pyodbc has no datetimeoffset type: decode SQL_SS_TIMESTAMPOFFSET_STRUCT to ISO text."""
    import struct

    y, mo, d, h, mi, s, frac, th, tm = struct.unpack("<6hI2h", raw)
    return f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}.{frac // 100:07d} {'+' if th >= 0 and tm >= 0 else '-'}{abs(th):02d}:{abs(tm):02d}"


def _pymssql_args_from_odbc(odbc: str) -> dict[str, Any]:
    parts = {k.upper(): v for k, v in (p.split("=", 1) for p in odbc.strip(";").split(";") if "=" in p)}
    server = parts.get("SERVER", "localhost")
    port = parts.get("PORT")
    m = re.match(r"(?:tcp:)?([^,]+)(?:,(\d+))?", server)
    host = m.group(1) if m else server
    port = port or (m.group(2) if m and m.group(2) else "1433")
    return {"server": host, "port": port, "user": parts.get("UID", "sa"), "password": parts.get("PWD", "")}


@pytest.fixture(params=["simulator", pytest.param("mssql", marks=pytest.mark.mssql)])
def sql_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A fresh database on the simulator or on the real SQL Server of SQLSERVER_CDC_TEST_ODBC."""
    name = "conf_" + uuid.uuid4().hex[:10]
    if "FreeTDS" not in pyodbc.drivers() and request.param == "simulator":
        pytest.skip("the FreeTDS ODBC driver is not installed (Debian package tdsodbc)")
    if request.param == "simulator":
        sim = request.getfixturevalue("sqlserver_simulator")
        odbc = sim.odbc_connection_string()
        args = {"server": sim.host, "port": str(sim.port), "user": sim.user, "password": sim.password}
    else:
        odbc = os.environ["SQLSERVER_CDC_TEST_ODBC"]
        args = _pymssql_args_from_odbc(odbc)
    admin = pyodbc.connect(
        Backend(request.param, odbc, args, "master").odbc_string("master"), autocommit=True, timeout=10
    )
    admin.execute(f"CREATE DATABASE [{name}]")
    admin.execute(f"ALTER DATABASE [{name}] SET ALLOW_SNAPSHOT_ISOLATION ON")
    try:
        yield Backend(request.param, odbc, args, name)
    finally:
        try:
            if request.param == "mssql":
                admin.execute(f"ALTER DATABASE [{name}] SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
            admin.execute(f"DROP DATABASE [{name}]")
        except pyodbc.Error:
            pass
        admin.close()


@pytest.fixture(params=["pyodbc", "pymssql"])
def driver(request: pytest.FixtureRequest) -> str:
    """The client driver a test runs with."""
    return request.param


@pytest.fixture
def connect(sql_backend: Backend, driver: str) -> Any:
    """``connect(autocommit=True)`` -> a DB-API connection of the parametrised driver to the test database."""

    def factory(autocommit: bool = True, database: str | None = None) -> Any:
        if driver == "pyodbc":
            return sql_backend.pyodbc(autocommit=autocommit, database=database)
        return sql_backend.pymssql(autocommit=autocommit, database=database)

    return factory


@pytest.fixture
def cursor_after(connect: Any) -> Iterator[Callable[..., Any]]:
    """``cursor_after(*statements)`` -> a cursor of a new connection that has run them (closed after the test)."""
    connections: list[Any] = []

    def factory(*statements: str) -> Any:
        conn = connect()
        connections.append(conn)
        cursor = conn.cursor()
        for sql in statements:
            cursor.execute(sql)
        return cursor

    yield factory
    for conn in connections:
        conn.close()


def sql_error_number(exc: BaseException) -> int | None:
    """The SQL Server error number in a pyodbc or pymssql exception."""
    if isinstance(exc, pymssql.Error) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    text = str(exc)
    m = re.search(r"\((\d+)\) \(SQL", text)
    if m:
        return int(m.group(1))
    m = re.search(r"^\((\d+),", text)
    return int(m.group(1)) if m else None


@pytest.fixture
def error_number() -> Callable[[BaseException], int | None]:
    """``error_number(exc)`` -> the SQL Server error number in a pyodbc or pymssql exception."""
    return sql_error_number
