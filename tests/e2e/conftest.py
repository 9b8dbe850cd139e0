"""Fixtures of the end-to-end tests: a Spark session that reads the Iceberg targets."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_spark_conf, local_spark_session

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="module")
def target_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root directory of one end-to-end set-up (staging, warehouse, logs)."""
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="module")
def spark_reader(target_warehouse: Path) -> Iterator[object]:
    """A local Spark session with the DAG's Iceberg catalog ``lake`` on the set-up's warehouse."""
    # The DAG runs commit from other processes: no cached table metadata.
    conf = iceberg_spark_conf(target_warehouse / "warehouse", cache_enabled=False)
    session = local_spark_session(
        conf, master="local[1]", app_name="sqlserver-cdc-e2e-check", driver_memory="768m"
    )
    yield session
    session.stop()


@pytest.fixture
def shared_fernet_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """
    One Fernet key for this process and every DAG-run process it starts.

    The suite runs Airflow in unit-test mode, where each process draws its own random key: a
    watermark Variable written by one DAG run would be unreadable by the next run (and by the
    test). Real deployments share one configured key, as this fixture does.
    """
    from airflow.models.crypto import get_fernet
    from cryptography.fernet import Fernet

    key = Fernet.generate_key().decode()
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", key)
    get_fernet.cache_clear()
    yield key
    get_fernet.cache_clear()
