"""Fixtures of the continuous apply job's Spark tests: a staging path and a namespace per test."""

from __future__ import annotations

import re
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "merge"))  # merge_runs: the merge tests' helpers


@pytest.fixture
def staging(tmp_path: Path) -> Path:
    """The staging path of the test's windows."""
    return tmp_path / "staging"


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace of the ``lake`` catalog of the test's own."""
    name = re.sub(r"\W", "_", request.node.name)
    return f"lake.{name[:40]}_{zlib.crc32(name.encode()):08x}"
