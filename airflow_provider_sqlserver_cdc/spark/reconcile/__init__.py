"""The target side of the reconcile comparison (docs/reconcile.md): per-range row counts and digests of an Iceberg table."""

from __future__ import annotations
