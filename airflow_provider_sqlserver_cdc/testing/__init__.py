"""
The provider's test harness (opt-in, extra ``testing``): table comparison, DAG runs, a local Iceberg, PostgreSQL (docs/testing.md).

Nothing here is imported by the provider, and nothing registers a pytest plugin: a suite loads
:mod:`.fixtures` through ``pytest_plugins``. The SQL Server simulator is its own distribution,
``sqlserver-cdc-simulator`` (``simulator/`` in this repository).
"""

from __future__ import annotations
