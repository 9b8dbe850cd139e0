"""pytest plugin registered by the package (entry point ``pytest11``).

Fixtures:

* ``sqlserver_simulator`` -- a SQL Server simulator serving on a free local port, with fresh
  state for every test (one server per test session, reset between tests). It yields a
  :class:`SimulatorHandle`: ``host``, ``port``, ``user``, ``password``,
  ``odbc_connection_string(database)``, ``airflow_connection(database)`` (``AIRFLOW_CONN_<ID>``
  JSON; both with the handle's ``driver``, FreeTDS unless ``odbc_driver`` chose another), ``connect(database, autocommit)`` (pyodbc), ``pymssql_connect(database)``, ``clock`` (set / advance / freeze), ``engine`` and
  ``run_capture_scan(database)``.
* ``odbc_driver`` -- parametrises a test over the ODBC drivers of the suite (FreeTDS and Microsoft's
  ODBC Driver 18; the latter skips, saying why, when it is not registered) and makes the simulator
  handle's connections use it: ``pytestmark = pytest.mark.usefixtures("odbc_driver")`` runs a module
  with both.
* ``sqlserver_simulator_session`` -- the session-scoped server underneath, for fixtures that
  need one server for many tests without resets.
* ``shared_fernet_key`` -- one Fernet key for the test process and the DAG-run processes it
  starts (see :mod:`airflow_provider_sqlserver_cdc.testing.dag_runs`).
* ``postgres_server`` -- one throw-away PostgreSQL cluster per test session on a free loopback
  port (:mod:`airflow_provider_sqlserver_cdc.testing.postgres_server`); skipped without PostgreSQL.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from airflow_provider_sqlserver_cdc.hooks.odbc_connection import (
    FREETDS_DRIVER,
    MS_ODBC_DRIVER,
    is_freetds,
    odbc_connection_string,
)
from airflow_provider_sqlserver_cdc.testing.airflow_connections import mssql_connection_json

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.testing.simulator import Engine, SimulatorServer
    from airflow_provider_sqlserver_cdc.testing.simulator.clock import ServerClock

# The simulator (and sqlglot, its `simulator` extra) is imported only when a fixture is used, so
# installing the provider without the extra never breaks a pytest run that loads this plugin.


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
        from airflow_provider_sqlserver_cdc.testing.odbc_drivers import MS_DRIVER_OPTIONS

        return odbc_connection_string(
            host=self.host,
            port=self.port,
            database=database,
            user=self.user,
            password=self.password,
            driver=self.driver,
            options=None if is_freetds(self.driver) else MS_DRIVER_OPTIONS,
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
        from airflow_provider_sqlserver_cdc.testing.simulator.cdc.registration import run_capture_scan

        run_capture_scan(self.engine, database)

    def reset(self) -> None:
        """Disconnect clients and forget all state."""
        self.server.close_connections()
        self.engine.reset()


@pytest.fixture(scope="session")
def sqlserver_simulator_session() -> Iterator[SimulatorHandle]:
    """One simulator for the whole test session."""
    try:
        from airflow_provider_sqlserver_cdc.testing.simulator import Engine, SimulatorServer
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        pytest.skip(
            f"the SQL Server simulator needs the 'simulator' extra (pip install 'airflow-provider-sqlserver-cdc[simulator]'): {e}"
        )
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
            f"ODBC driver {driver!r} is not registered with unixODBC (tests/conftest.py registers Microsoft's "
            "Driver 18 from .cache/clients/msodbcsql18, which make client-deps unpacks from the wheel "
            "mssql-python-odbc; it exists for Linux x86_64 only)"
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


@pytest.fixture
def shared_fernet_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """
    One Fernet key for this process and every DAG-run process it starts.

    Airflow in unit-test mode draws a random key per process: a Variable (a watermark) written by
    one DAG run would be unreadable by the next run and by the test. Real deployments share one
    configured key, as this fixture does through ``AIRFLOW__CORE__FERNET_KEY``.
    """
    from airflow.models.crypto import get_fernet
    from cryptography.fernet import Fernet

    key = Fernet.generate_key().decode()
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", key)
    get_fernet.cache_clear()
    yield key
    get_fernet.cache_clear()


# --------------------------------------------------------------------------- PostgreSQL (relational targets)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One throw-away PostgreSQL cluster for the test session (``testing.postgres_server.PostgresServer``).

    Skips the test with the reason when the server binaries are not installed.
    """
    from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer.start()
    except PostgresUnavailable as err:
        pytest.skip(str(err))
    try:
        yield server
    finally:
        server.stop()
