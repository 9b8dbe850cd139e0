"""Temporary views that name a merge's source frame, unique per merge.

A session's temporary views are shared by its threads, and the job merges several tables at once in one
session (``concurrent_tables``): a fixed view name would let one table's MERGE read another's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def unique_view_name(prefix: str) -> str:
    """Return ``prefix`` followed by a random suffix, a valid unquoted Spark identifier.

    :param prefix: what the view holds, e.g. ``sqlserver_cdc_merge_source``.
    """
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


@contextmanager
def temporary_view(frame: DataFrame, prefix: str) -> Iterator[str]:
    """Register ``frame`` as a temporary view of its own; yield its name, drop the view afterwards.

    :param frame: the rows the view stands for.
    :param prefix: the start of the view's name.
    """
    name = unique_view_name(prefix)
    frame.createTempView(name)
    try:
        yield name
    finally:
        frame.sparkSession.catalog.dropTempView(name)
