"""How the rows a statement writes reach Iceberg's writers: as the statement's tasks hold them, unshuffled.

A table's ``write.distribution-mode`` (the job creates tables with ``hash``) makes Spark shuffle a
write's rows to the writers first, so that each writer gets whole partitions (or, for deletes, whole
data files) and files come out near the target size. For writes whose rows are already grouped well,
or too few to matter, that shuffle only costs: a merge-on-read MERGE writes only the changed rows
(measured: ``benchmarks/merge.py``, docs/merge-performance.md), the storage-partitioned MERGE's tasks
each hold one bucket, and the rewrite's tasks hold the rows of the files they read. A
merge-on-read MERGE skips it only where each write task writes one position-delete file per
partition (``write.delete.granularity=partition``, the job's default): with ``file`` granularity,
every task would write a delete file for every data file it touches.
``spark.sql.iceberg.distribution-mode`` stands for the table's setting for one statement only
(set with ``key_filter.session_conf``), so every other writer of the table keeps the table's.
"""

from __future__ import annotations

from typing import Any

#: Session settings of a write that needs no shuffle to Iceberg's writers.
UNSHUFFLED_WRITE_CONF = {"spark.sql.iceberg.distribution-mode": "none"}


def writes_delete_files_per_partition(iceberg_table: Any) -> bool:
    """Say whether the table's writers write one position-delete file per partition (not one per data file).

    :param iceberg_table: the Iceberg ``Table`` (Java API).
    """
    return str(iceberg_table.properties().get("write.delete.granularity") or "").lower() == "partition"
