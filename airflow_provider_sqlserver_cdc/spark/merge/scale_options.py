"""The merge job's scale options as the operator and the pipeline settings give them: key buckets, tables at once.

``--partition-buckets N|auto`` lays out the tables the job creates for the storage-partitioned MERGE
(docs/merge-performance.md) and ``--concurrent-tables N`` merges N tables of a run at once. The
operator checks a value here before spark-submit, so a wrong one fails the task with the setting's
name instead of the job's usage text, and passes it only when it is not the job's default.
"""

from __future__ import annotations

#: ``partition_buckets`` value for "from the size of the windows that create the table".
AUTO_BUCKETS = "auto"
#: The job's defaults: tables created unpartitioned, merged one after another.
DEFAULT_PARTITION_BUCKETS = 0
DEFAULT_CONCURRENT_TABLES = 1
#: What each option takes, for the errors of the operator and the pipeline settings.
PARTITION_BUCKETS_RULE = (
    f"a whole number of at least 0 (0: unpartitioned tables) or '{AUTO_BUCKETS}' (from the table's size)"
)
CONCURRENT_TABLES_RULE = "a whole number of at least 1 (1: one table after another)"


def partition_buckets_value(value: int | str) -> int | None:
    """Return the key buckets ``value`` asks for: N (0: unpartitioned), or None for ``auto``.

    :param value: a whole number of at least 0, its text, or ``auto``.
    :raises ValueError: naming the setting and what it takes.
    """
    text = str(value).strip().lower()
    if text == AUTO_BUCKETS:
        return None
    if isinstance(value, bool) or not text.isdigit():
        raise ValueError(f"partition_buckets must be {PARTITION_BUCKETS_RULE}, got {value!r}")
    return int(text)


def concurrent_tables_value(value: int | str) -> int:
    """Return how many target tables ``value`` asks to merge at once.

    :param value: a whole number of at least 1, or its text.
    :raises ValueError: naming the setting and what it takes.
    """
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        raise ValueError(f"concurrent_tables must be {CONCURRENT_TABLES_RULE}, got {value!r}")
    return int(text)


def scale_arguments(partition_buckets: int | str, concurrent_tables: int | str) -> list[str]:
    """Return ``--partition-buckets`` / ``--concurrent-tables`` for the values that are not the job's default.

    :param partition_buckets: see :func:`partition_buckets_value`.
    :param concurrent_tables: see :func:`concurrent_tables_value`.
    """
    buckets = partition_buckets_value(partition_buckets)
    tables = concurrent_tables_value(concurrent_tables)
    arguments: list[str] = []
    if buckets != DEFAULT_PARTITION_BUCKETS:
        arguments += ["--partition-buckets", AUTO_BUCKETS if buckets is None else str(buckets)]
    if tables != DEFAULT_CONCURRENT_TABLES:
        arguments += ["--concurrent-tables", str(tables)]
    return arguments


def is_template(value: object) -> bool:
    """Say whether ``value`` is a Jinja template still to render (checked once rendered, at execute time)."""
    return isinstance(value, str) and "{{" in value
