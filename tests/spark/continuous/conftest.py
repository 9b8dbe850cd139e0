"""Fixtures of the continuous apply job's Spark tests: a staging path per test (its namespace: tests/spark/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "merge"))  # merge_runs: the merge tests' helpers


@pytest.fixture
def staging(tmp_path: Path) -> Path:
    """The staging path of the test's windows."""
    return tmp_path / "staging"
