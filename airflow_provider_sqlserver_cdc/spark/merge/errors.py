"""The merge job's errors: problems the user has to fix, with messages that say what to do."""

from __future__ import annotations

from typing import Any


class MergeJobError(Exception):
    """A problem the user has to fix; the message says what, where and what to do."""


class SchemaEvolutionError(MergeJobError):
    """A window's schema cannot be applied to the target table."""


class TableMergeError(MergeJobError):
    """Some target tables of the run failed; the others committed.

    :param result: the run's summary, table -> entry with ``status`` ``committed`` or ``failed``.
    :param failures: failed table -> the error that stopped it.
    """

    def __init__(self, message: str, result: dict[str, Any], failures: dict[str, BaseException]) -> None:
        super().__init__(message)
        self.result = result
        self.failures = failures

    @property
    def failed_tables(self) -> list[str]:
        """The failed target tables, in run order."""
        return list(self.failures)


#: Iceberg's exceptions for a commit that lost a race with another writer's commit.
COMMIT_CONFLICTS = (
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.CommitFailedException",
)


def is_commit_conflict(err: BaseException) -> bool:
    """Say whether an error is Iceberg refusing a commit because another writer committed first.

    :param err: the error a MERGE or commit raised (through py4j or PySpark's captured exceptions).
    """
    text = f"{type(err).__name__}: {err}"
    return any(name in text or name.rsplit(".", 1)[1] in text for name in COMMIT_CONFLICTS)
