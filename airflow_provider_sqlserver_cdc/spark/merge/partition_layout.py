"""How target tables are partitioned for a storage-partitioned MERGE, and whether an existing table allows one.

Tables the job creates are partitioned by ``bucket(N, first key column)``. A MERGE whose source is an
Iceberg table with the same partition spec then joins bucket by bucket (Spark's storage-partitioned
join): neither side is shuffled (docs/merge-performance.md). Existing tables keep their spec; one
whose partition fields all derive from key columns gets the same treatment, any other falls back to
the plain MERGE.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_sqlserver_cdc.spark.merge.statements import quote

#: Rows per bucket the size heuristic aims at (about 40-100 MB of Parquet for typical row widths).
ROWS_PER_BUCKET = 1_000_000
#: The most buckets the heuristic chooses (a setting may choose more).
MAX_BUCKETS = 256

#: Iceberg transform names (``Transform.toString()``) -> their Spark SQL partition transform.
_TRANSFORMS = {"identity": "{col}", "year": "years({col})", "month": "months({col})", "day": "days({col})"}
_TRANSFORMS["hour"] = "hours({col})"
_PARAMETRIZED = re.compile(r"^(bucket|truncate)\[(\d+)\]$")


def bucket_count(rows: int, parallelism: int, setting: int | None = None) -> int:
    """Return the number of key buckets of a new table: the setting, else one per ``ROWS_PER_BUCKET`` rows.

    The heuristic rounds up to a power of two and gives at least ``parallelism`` buckets (a bucket is
    one task of the MERGE), at most ``MAX_BUCKETS``.

    :param rows: the rows the table starts with (the windows that create it: a snapshot's rows).
    :param parallelism: the Spark application's default parallelism.
    :param setting: ``--partition-buckets``: the count to use; 0 leaves the table unpartitioned.
    """
    if setting is not None:
        return max(setting, 0)
    wanted = max(math.ceil(rows / ROWS_PER_BUCKET), parallelism, 1)
    return min(1 << (wanted - 1).bit_length(), MAX_BUCKETS)


def creation_partitioning(key_columns: Sequence[str], buckets: int) -> str:
    """Return the ``PARTITIONED BY`` clause of a new table (empty for 0 buckets).

    :param key_columns: the table's key columns; the first one is bucketed.
    :param buckets: from ``bucket_count``.
    """
    if buckets <= 0 or not key_columns:
        return ""
    return f" PARTITIONED BY (bucket({buckets}, {quote(key_columns[0])}))"


@dataclass(frozen=True)
class StagingLayout:
    """The partition spec a MERGE's staging table copies from its target, as Spark SQL transforms.

    :param transforms: e.g. ``("bucket(16, `id`)",)``, for ``PARTITIONED BY``.
    """

    transforms: tuple[str, ...]

    def clause(self) -> str:
        """Return the ``PARTITIONED BY`` clause of the staging table."""
        return f" PARTITIONED BY ({', '.join(self.transforms)})"


def _java_list(values: Any) -> list[Any]:
    return [values.get(i) for i in range(values.size())]


def staging_layout(iceberg: Any, key_columns: Sequence[str]) -> StagingLayout | str:
    """Return the staging table's layout when a storage-partitioned MERGE applies, else why it does not.

    It applies when the table has one partition spec (no older spec whose files the scan would have
    to group differently) and every partition field is a bucket, truncate, identity or time transform
    of a key column (the MERGE joins on all key columns; Spark lets the join keys cover the
    partition keys with ``spark.sql.requireAllClusterKeysForCoPartition=false``).

    :param iceberg: the target's Iceberg ``Table`` (Java API, through py4j).
    :param key_columns: the table's key columns.
    """
    spec = iceberg.spec()
    if spec.isUnpartitioned():
        return "the table is not partitioned (tables created before partitioning keep their spec)"
    if iceberg.specs().size() > 1:
        return f"the table has had {iceberg.specs().size()} partition specs; its files are not grouped alike"
    keys = {k.lower() for k in key_columns}
    schema = iceberg.schema()
    transforms = []
    for field in _java_list(spec.fields()):
        column = str(schema.findColumnName(field.sourceId()))
        transform = str(field.transform().toString())
        if column.lower() not in keys:
            return f"partition field {field.name()} ({transform} of {column}) is not on a key column"
        parametrized = _PARAMETRIZED.match(transform)
        if parametrized:
            transforms.append(f"{parametrized.group(1)}({parametrized.group(2)}, {quote(column)})")
        elif transform in _TRANSFORMS:
            transforms.append(_TRANSFORMS[transform].format(col=quote(column)))
        else:
            return f"partition field {field.name()} has the transform {transform}, which a staging table cannot copy"
    return StagingLayout(tuple(transforms))
