"""Fixtures of the snapshot tests: ``source``, a sample CDC database on the simulator (snapshot isolation on)."""

from __future__ import annotations

import pytest
from snapshot_source import SourceDb


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    db = SourceDb(sqlserver_simulator, monkeypatch)
    yield db
    db.close()
