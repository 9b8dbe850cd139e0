"""
Airflow Variables in a dict, for tests that run the watermark code without a metadata database.

Importable from any test module by its name (``tests/`` is on ``sys.path`` through its ``conftest.py``);
the real Airflow Variables are used by tests/operators/test_watermark.py and the end-to-end tests.
"""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc import state


class Variables(dict):
    """The ``get``/``set`` of Airflow's ``Variable`` that :mod:`state` calls, on a dict."""

    def get(self, key, default=None):
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value


def in_memory_variables(monkeypatch: pytest.MonkeyPatch) -> Variables:
    """Make :mod:`state` read and write its Variables in a new :class:`Variables` for this test; return it."""
    store = Variables()
    monkeypatch.setattr(state, "_variable", lambda: store)
    return store
