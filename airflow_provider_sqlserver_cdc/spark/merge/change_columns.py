"""The change columns: what a window's Parquet files carry and what the merge adds to a target table."""

from __future__ import annotations

SOURCE_META_COLUMNS = ("__$start_lsn", "__$seqval", "__$operation", "__$update_mask", "__$commit_time")
START_LSN = "_cdc_start_lsn"
SEQVAL = "_cdc_seqval"
OPERATION = "_cdc_operation"
COMMIT_TIME = "_cdc_commit_time"
DELETED = "_cdc_deleted"
#: The columns the merge adds to a target table: name, Spark SQL type, nullable.
TARGET_META_COLUMNS = (
    (START_LSN, "BINARY", False),
    (SEQVAL, "BINARY", False),
    (OPERATION, "INT", False),
    (COMMIT_TIME, "TIMESTAMP", True),
    (DELETED, "BOOLEAN", False),
)
#: A change's position in the log: the newest position per key wins (``window.net_effect``).
POSITION_COLUMNS = (START_LSN, SEQVAL, OPERATION)
