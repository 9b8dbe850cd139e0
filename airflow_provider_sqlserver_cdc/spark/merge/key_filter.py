"""Key filtering of the MERGE's target scan: the key range of the changes and Spark's runtime key filter."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.statements import quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan

INTEGER_KEY_TYPE = re.compile(r"^(INT|BIGINT|DECIMAL\(\d+,\s*0\))$")


@dataclass(frozen=True)
class KeyRange:
    """The lowest and highest value of the first key column among a MERGE's changes.

    :param sql_type: the column's Spark SQL type: INT, BIGINT or DECIMAL(p,0) (SQL Server's
        integer types and numeric/decimal with scale 0).
    """

    column: str
    lowest: int
    highest: int
    sql_type: str

    def condition(self, qualifier: str = "") -> str:
        """Return ``column BETWEEN lowest AND highest`` as Spark SQL, with literals of the column's type.

        Decimal bounds are cast to the column's type, so Spark compares without casting the column
        and can push the condition into the Iceberg scan.
        """
        low, high = str(self.lowest), str(self.highest)
        if self.sql_type.startswith("DECIMAL"):
            low, high = f"CAST({low} AS {self.sql_type})", f"CAST({high} AS {self.sql_type})"
        return f"{qualifier}{quote(self.column)} BETWEEN {low} AND {high}"


def source_key_range(
    changes: DataFrame, plan: TargetPlan, known: tuple[int, int] | None = None
) -> KeyRange | None:
    """Return the range of the first key column in ``changes``, if it holds whole numbers.

    Whole-number keys only (``INTEGER_KEY_TYPE``): their bounds are exact literals. Unless the bounds
    are ``known``, one small Spark job reads the key column of the windows.

    :param known: the lowest and highest key, read while the job checked the windows (``check_rows``).
    """
    from pyspark.sql import functions as F

    key = plan.key_columns[0]
    sql_type = plan.column_types.get(key.lower(), "").upper()
    if not INTEGER_KEY_TYPE.match(sql_type):
        return None
    if known is not None:
        return KeyRange(key, known[0], known[1], sql_type)
    row = changes.agg(F.min(F.col(quote(key))), F.max(F.col(quote(key)))).first()
    if row is None or row[0] is None:
        return None
    return KeyRange(key, int(row[0]), int(row[1]), sql_type)


#: Spark's default cap on a runtime Bloom filter (``spark.sql.optimizer.runtime.bloomFilter.maxNumBits``).
BLOOM_FILTER_MAX_BITS = 64 * 1024 * 1024


def runtime_key_filter_conf(change_rows: int) -> dict[str, str]:
    """Return the session settings for the MERGE statement that make Spark filter the target scan by key.

    They let Spark build a Bloom filter of the source keys and apply it to the target scan (see
    ``checkpointed_net_effect``), sized for ``change_rows`` keys at most (8 bits a key: about 2 %
    false positives, within Spark's 8 MB cap). Spark's defaults only filter scans over 10 GB by
    sources under 10 MB, and skip a source small enough to broadcast (a MERGE cannot broadcast it:
    the target side of its outer join is the one that would be built).
    """
    keys = max(change_rows, 1)
    return {
        "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
        "spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": "0",
        "spark.sql.optimizer.runtime.bloomFilter.creationSideThreshold": "1024TB",
        "spark.sql.optimizer.runtime.bloomFilter.expectedNumItems": str(keys),
        "spark.sql.optimizer.runtime.bloomFilter.numBits": str(min(8 * keys, BLOOM_FILTER_MAX_BITS)),
        "spark.sql.autoBroadcastJoinThreshold": "-1",
    }


#: The runtime key filter pays for its checkpoint when the target rows the MERGE scans outnumber the
#: change rows at least this many times. Measured with ``benchmarks/merge.py``'s data at scale 1, side
#: by side (docs/merge-performance.md): 0.88x the plain MERGE's time at ~2.9 times (1M uniformly
#: spread changes into 5M rows), 1.18x at ~0.6 times (1M recent changes, whose key range keeps a
#: fifth of the target); earlier, before the checkpoint kept its partitioning, 0.34x at ~290 times.
RUNTIME_KEY_FILTER_MIN_RATIO = 2
#: The same against the storage-partitioned MERGE of a bucketed target, which shuffles no target row
#: either: measured (docs/merge-performance.md) with the earlier checkpoint, 1.00x at ~3 times.
RUNTIME_KEY_FILTER_MIN_RATIO_BUCKETED = 4


def runtime_key_filter_pays(
    target_rows: int | None, change_rows: int, min_ratio: int = RUNTIME_KEY_FILTER_MIN_RATIO
) -> bool:
    """Say whether to merge through ``checkpointed_net_effect`` with ``runtime_key_filter_conf``.

    :param target_rows: the rows the MERGE's target scan reads (``merge_strategy.TargetFiles.scanned_rows``), None if unknown.
    :param change_rows: the rows of the windows, update before-images included.
    :param min_ratio: target rows per change row from which the filter pays: ``RUNTIME_KEY_FILTER_MIN_RATIO``,
        or ``RUNTIME_KEY_FILTER_MIN_RATIO_BUCKETED`` against a storage-partitioned MERGE.
    """
    return target_rows is not None and target_rows >= min_ratio * max(change_rows, 1)


@contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set Spark SQL settings for the duration of the block, then put back what was there."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
