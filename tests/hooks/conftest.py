"""Fixtures of the hook tests: an Airflow connection in the environment."""

from __future__ import annotations

import json

import pytest

SECRET = "s3cr;et}pw"


@pytest.fixture
def secret() -> str:
    """The password of the connection :func:`conn_env` makes (with ODBC's special characters)."""
    return SECRET


@pytest.fixture
def conn_env(monkeypatch):
    """Return a factory that puts an ``mssql`` connection with the given extras into the environment."""

    def make(conn_id="cdc_src", **extra):
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}",
            json.dumps(
                {
                    "conn_type": "mssql",
                    "host": "db.example",
                    "port": 14330,
                    "login": "cdc_reader",
                    "password": SECRET,
                    "schema": "shop",
                    "extra": extra,
                }
            ),
        )
        return conn_id

    return make
