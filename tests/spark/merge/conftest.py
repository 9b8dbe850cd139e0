"""Fixtures of the merge job's Spark tests: window directory, a namespace per test, the write modes."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import pytest

from airflow_provider_sqlserver_cdc.spark.merge.arguments import WRITE_MODES


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The base directory of the test's windows."""
    return tmp_path / "windows"


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of the ``lake`` catalog of the test's own."""
    name = re.sub(r"\W", "_", request.node.name)
    return f"lake.{name[:40]}_{zlib.crc32(name.encode()):08x}"


@pytest.fixture(params=WRITE_MODES)
def write_mode(request: pytest.FixtureRequest) -> str:
    """Each Iceberg write mode in turn."""
    return request.param


@pytest.fixture
def table(namespace: str) -> str:
    """The target table of the ``dbo_orders`` windows the tests write."""
    return f"{namespace}.dbo_orders"
