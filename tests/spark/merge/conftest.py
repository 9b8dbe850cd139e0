"""Fixtures of the merge job's Spark tests: window directory, a namespace per test, the write modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_sqlserver_cdc.spark.merge.arguments import WRITE_MODES


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The base directory of the test's windows."""
    return tmp_path / "windows"


@pytest.fixture(params=WRITE_MODES)
def write_mode(request: pytest.FixtureRequest) -> str:
    """Each Iceberg write mode in turn."""
    return request.param


@pytest.fixture
def table(namespace: str) -> str:
    """The target table of the ``dbo_orders`` windows the tests write."""
    return f"{namespace}.dbo_orders"
