"""Fixtures of the end-to-end tests: a replication set-up on the simulator, a Spark session that reads its targets."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.testing.local_iceberg import (
    iceberg_spark_conf,
    local_spark_session,
    release_local_spark_session,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cdc_pipeline_harness import PipelineHarness


@pytest.fixture
def target_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root directory of one end-to-end set-up (staging, warehouse, logs); one per test (and driver)."""
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture
def spark_reader(target_warehouse: Path) -> Iterator[object]:
    """A local Spark session with the DAG's Iceberg catalog ``lake`` on the set-up's warehouse (a new session
    on the running Spark context after the first: each test's own catalog, no second JVM)."""
    # The DAG runs commit from other processes: no cached table metadata.
    conf = iceberg_spark_conf(target_warehouse / "warehouse", cache_enabled=False)
    session = local_spark_session(
        conf, master="local[1]", app_name="sqlserver-cdc-e2e-check", driver_memory="768m"
    )
    yield session
    release_local_spark_session(session)


@pytest.fixture
def pipeline_harness(
    sqlserver_simulator: Any, shared_fernet_key: str, target_warehouse: Path
) -> PipelineHarness:
    """The test's replication set-up: its own connection id (watermark Variables are keyed by it), one Fernet key."""
    return PipelineHarness(sqlserver_simulator, target_warehouse, conn_id=f"e2e_{uuid.uuid4().hex[:8]}")
