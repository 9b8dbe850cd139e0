"""
The provider's test fixtures, an opt-in pytest plugin (nothing registers it: no ``pytest11`` entry point).

A test suite loads it from its ``conftest.py``: ``pytest_plugins = ["airflow_provider_sqlserver_cdc.testing.fixtures"]``
(this project's ``tests/conftest.py`` does). The simulator's fixtures (``sqlserver_simulator``,
``odbc_driver``) come from the ``sqlserver-cdc-simulator`` distribution's own plugin.

Fixtures:

* ``shared_fernet_key`` -- one Fernet key for the test process and the DAG-run processes it
  starts (see :mod:`airflow_provider_sqlserver_cdc.testing.dag_runs`).
* ``postgres_server`` -- one throw-away PostgreSQL cluster per test session on a free loopback
  port (:mod:`airflow_provider_sqlserver_cdc.testing.postgres_server`); skipped without PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


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
