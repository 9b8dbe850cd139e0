"""Fixtures of the end-to-end tests: a Spark session that reads the Iceberg targets."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cdc_pipeline_harness import iceberg_runtime_jar


@pytest.fixture(scope="module")
def target_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root directory of one end-to-end set-up (staging, warehouse, logs)."""
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="module")
def spark_reader(target_warehouse: Path) -> Iterator[object]:
    """A local Spark session with the DAG's Iceberg catalog ``lake`` on the set-up's warehouse."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[1]")
        .appName("sqlserver-cdc-e2e-check")
        .config("spark.jars", iceberg_runtime_jar())
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.lake.type", "hadoop")
        .config("spark.sql.catalog.lake.warehouse", str(target_warehouse / "warehouse"))
        .config("spark.sql.catalog.lake.cache-enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
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
