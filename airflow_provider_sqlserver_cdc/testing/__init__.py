"""Test support shipped with the provider: the SQL Server CDC simulator and its pytest plugin."""

from __future__ import annotations
