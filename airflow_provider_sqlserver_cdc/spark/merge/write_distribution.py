"""How the rows a statement writes reach Iceberg's writers: as the statement's tasks hold them, unshuffled.

A table's ``write.distribution-mode`` (the job creates tables with ``hash``) makes Spark shuffle a
write's rows to the writers first, so that each writer gets whole partitions (or, for deletes, whole
data files) and files come out near the target size. For writes whose rows are already grouped well,
or too few to matter, that shuffle only costs: a merge-on-read MERGE writes only the changed rows
(measured: ``benchmarks/merge.py``, docs/merge-performance.md), the storage-partitioned MERGE's tasks
each hold one bucket, and the rewrite's tasks hold the rows of the files they read.
``spark.sql.iceberg.distribution-mode`` stands for the table's setting for one statement only
(set with ``key_filter.session_conf``), so every other writer of the table keeps the table's.
"""

from __future__ import annotations

#: Session settings of a write that needs no shuffle to Iceberg's writers.
UNSHUFFLED_WRITE_CONF = {"spark.sql.iceberg.distribution-mode": "none"}
