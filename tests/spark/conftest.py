"""Fixtures for the Spark tests: one local[2] SparkSession with Iceberg on a Hadoop catalog."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

# Re-exported: tests/snapshot and tests/operators load this module by path for these two.
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar as iceberg_runtime_jar
from airflow_provider_sqlserver_cdc.testing.local_iceberg import (
    iceberg_spark_conf,
    local_spark_session,
    release_local_spark_session,
)


@pytest.fixture(scope="session")
def spark_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Hadoop catalog warehouse directory (catalog ``lake``) of the shared session."""
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(spark_warehouse: Path) -> Iterator[object]:
    """One local[2] SparkSession with Iceberg for the whole test session."""
    session = local_spark_session(iceberg_spark_conf(spark_warehouse), app_name="sqlserver-cdc-tests")
    yield session
    release_local_spark_session(session)


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of the ``lake`` catalog of the test's own."""
    name = re.sub(r"\W", "_", request.node.name)
    return f"lake.{name[:40]}_{zlib.crc32(name.encode()):08x}"
