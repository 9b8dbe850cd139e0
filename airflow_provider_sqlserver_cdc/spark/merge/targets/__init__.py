"""Kinds of target tables the merge job writes to: the interface (``base``) and its implementations."""

from __future__ import annotations
