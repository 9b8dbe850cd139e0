"""pytest plugin of the simulator distribution (entry point ``pytest11``): a running simulator as fixtures.

Fixtures:

* ``sqlserver_simulator`` -- a SQL Server simulator serving on a free local port, with fresh
  state for every test (one server per test session, reset between tests). It yields a
  :class:`SimulatorHandle`: ``host``, ``port``, ``user``, ``password``,
  ``odbc_connection_string(database)``, ``airflow_connection(database)`` (``AIRFLOW_CONN_<ID>``
  JSON; both with the handle's ``driver``, FreeTDS unless ``odbc_driver`` chose another),
  ``connect(database, autocommit)`` (pyodbc), ``pymssql_connect(database)``, ``clock`` (set /
  advance / freeze), ``engine`` and ``run_capture_scan(database)``.
* ``odbc_driver`` -- parametrises a test over FreeTDS and Microsoft's ODBC Driver 18 (the latter
  skips, saying why, when it is not registered; :func:`sqlserver_cdc_simulator.odbc_drivers.register_test_drivers`
  registers it) and makes the simulator handle's connections use it:
  ``pytestmark = pytest.mark.usefixtures("odbc_driver")`` runs a module with both.
* ``sqlserver_simulator_session`` -- the session-scoped server underneath, for fixtures that
  need one server for many tests without resets.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from sqlserver_cdc_simulator.connections import (
    FREETDS_DRIVER,
    MS_ODBC_DRIVER,
    mssql_connection_json,
    odbc_connection_string,
)

if TYPE_CHECKING:
    from sqlserver_cdc_simulator import Engine, SimulatorServer
    from sqlserver_cdc_simulator.clock import ServerClock

# The engine (and sqlglot) is imported only when a fixture is used: loading the plugin costs nothing.


class SimulatorHandle:
    """A running simulator and the ways to reach it.

    :param server: the running server
    :param password: the ``sa`` password
    """

    user = "sa"

    def __init__(self, server: SimulatorServer, password: str) -> None:
        self.server = server
        self.password = password
        self.driver = FREETDS_DRIVER

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def engine(self) -> Engine:
        return self.server.engine

    @property
    def clock(self) -> ServerClock:
        """The server clock: ``set(datetime)``, ``advance(timedelta)``, ``freeze()``, ``set_timezone(name)``."""
        return self.server.engine.clock

    def odbc_connection_string(self, database: str | None = None) -> str:
        """A pyodbc connection string using the handle's ``driver`` (FreeTDS: TDS 7.4; Driver 18: TLS)."""
        return odbc_connection_string(
            host=self.host,
            port=self.port,
            database=database,
            user=self.user,
            password=self.password,
            driver=self.driver,
        )

    def airflow_connection(
        self, database: str, *, login: str | None = None, password: str | None = None
    ) -> str:
        """
        Return an Airflow ``mssql`` connection to ``database`` in JSON, the value of ``AIRFLOW_CONN_<ID>``.

        :param database: the database the connection opens.
        :param login: another login than ``sa``.
        :param password: that login's password.
        """
        return mssql_connection_json(
            self.host, self.port, login or self.user, password or self.password, database, driver=self.driver
        )

    def connect(self, database: str | None = None, autocommit: bool = True) -> Any:
        """A pyodbc connection."""
        import pyodbc

        return pyodbc.connect(self.odbc_connection_string(database), autocommit=autocommit, timeout=10)

    def pymssql_connect(self, database: str | None = None, autocommit: bool = False) -> Any:
        """A pymssql connection (what Airflow's MsSqlHook uses)."""
        import pymssql

        conn = pymssql.connect(
            server=self.host,
            port=str(self.port),
            user=self.user,
            password=self.password,
            database=database or "master",
            login_timeout=10,
        )
        if autocommit:
            conn.autocommit(True)
        return conn

    def execute(self, sql: str, database: str | None = None) -> list[list[tuple[Any, ...]]]:
        """Run T-SQL inside the engine as ``sa`` (no network); returns the result sets' rows."""
        return self.engine.execute(sql, database=database)

    def run_capture_scan(self, database: str) -> None:
        """Run the CDC capture job of *database* until it has read every committed transaction."""
        from sqlserver_cdc_simulator.cdc.registration import run_capture_scan

        run_capture_scan(self.engine, database)

    def reset(self) -> None:
        """Disconnect clients and forget all state."""
        self.server.close_connections()
        self.engine.reset()


@pytest.fixture(scope="session")
def sqlserver_simulator_session() -> Iterator[SimulatorHandle]:
    """One simulator for the whole test session."""
    from sqlserver_cdc_simulator import Engine, SimulatorServer

    password = "Sim-" + secrets.token_hex(6) + "!"
    engine = Engine(password)
    server = SimulatorServer(engine, "127.0.0.1", 0).start()
    try:
        yield SimulatorHandle(server, password)
    finally:
        for hook in list(engine.registry.reset_hooks):
            hook(engine)
        server.stop()


@pytest.fixture(params=[FREETDS_DRIVER, MS_ODBC_DRIVER], ids=["freetds", "msodbc18"])
def odbc_driver(
    request: pytest.FixtureRequest, sqlserver_simulator_session: SimulatorHandle
) -> Iterator[str]:
    """The ODBC driver this run of the test uses; the simulator handle's connections use it too."""
    import pyodbc

    driver = request.param
    if driver not in pyodbc.drivers():
        pytest.skip(
            f"ODBC driver {driver!r} is not registered with unixODBC (the test suites' conftest.py register "
            "Microsoft's Driver 18 from .cache/clients/msodbcsql18, which make client-deps unpacks from the "
            "wheel mssql-python-odbc; it exists for Linux x86_64 only)"
        )
    sqlserver_simulator_session.driver = driver
    yield driver
    sqlserver_simulator_session.driver = FREETDS_DRIVER


@pytest.fixture
def sqlserver_simulator(
    request: pytest.FixtureRequest, sqlserver_simulator_session: SimulatorHandle
) -> Iterator[SimulatorHandle]:
    """A SQL Server simulator with fresh state for this test (its driver from ``odbc_driver`` when used)."""
    if "odbc_driver" in request.fixturenames:
        request.getfixturevalue("odbc_driver")
    sqlserver_simulator_session.reset()
    yield sqlserver_simulator_session
    sqlserver_simulator_session.server.close_connections()
