"""Initial snapshot of captured tables: a consistent copy and the LSN it is consistent at (docs/snapshot.md)."""

from __future__ import annotations
