"""Fixtures of the maintenance job's Spark tests: those of the merge job's tests (windows, a namespace per test)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

MERGE_TESTS = Path(__file__).resolve().parents[1] / "merge"
# The merge tests' helpers (merge_runs) and fixtures: the maintenance tests merge windows the same way.
sys.path.insert(0, str(MERGE_TESTS))
_spec = importlib.util.spec_from_file_location("merge_test_fixtures", MERGE_TESTS / "conftest.py")
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
base, table = _fixtures.base, _fixtures.table  # the namespace fixture: tests/spark/conftest.py
