"""Fixtures of the snapshot tests: ``source``, a sample CDC database on the simulator (snapshot isolation on),
and ``spark`` for the modules that merge what they copied."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from snapshot_source import SourceDb

from airflow_provider_sqlserver_cdc.testing.local_iceberg import (
    iceberg_spark_conf,
    local_spark_session,
    release_local_spark_session,
)


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    db = SourceDb(sqlserver_simulator, monkeypatch)
    yield db
    db.close()


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A local Spark session with Iceberg (the one of tests/spark when it already runs) and the catalog
    named by the module's ``CATALOG``, on a warehouse of the module's own."""
    catalog = request.module.CATALOG
    conf = iceberg_spark_conf(tmp_path_factory.mktemp(f"{catalog}-warehouse"), catalog=catalog)
    session = local_spark_session(conf, app_name=f"sqlserver-cdc-{catalog}-tests")
    yield session
    release_local_spark_session(session)
