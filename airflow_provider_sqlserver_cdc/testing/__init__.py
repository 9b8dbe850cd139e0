"""Test support shipped with the provider: the SQL Server CDC simulator, its pytest plugin and the harness around it (docs/testing.md)."""

from __future__ import annotations
