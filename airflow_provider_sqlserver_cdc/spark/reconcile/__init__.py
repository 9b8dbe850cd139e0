"""The target side of the reconcile comparison (docs/reconcile.md): the Spark job ``job``."""

from __future__ import annotations
