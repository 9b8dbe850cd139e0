"""The merge job's errors: problems the user has to fix, with messages that say what to do."""

from __future__ import annotations


class MergeJobError(Exception):
    """A problem the user has to fix; the message says what, where and what to do."""


class SchemaEvolutionError(MergeJobError):
    """A window's schema cannot be applied to the target table."""
