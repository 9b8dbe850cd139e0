"""The change columns: what a window's Parquet files carry and what the merge adds to a target table of each mode."""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.window.net_effect import DELETE

SOURCE_META_COLUMNS = ("__$start_lsn", "__$seqval", "__$operation", "__$update_mask", "__$commit_time")
START_LSN = "_cdc_start_lsn"
SEQVAL = "_cdc_seqval"
OPERATION = "_cdc_operation"
COMMIT_TIME = "_cdc_commit_time"
DELETED = "_cdc_deleted"
VALID_FROM = "_valid_from"
VALID_TO = "_valid_to"
IS_CURRENT = "_is_current"
#: The columns the merge adds to a target table: name, Spark SQL type, nullable.
TARGET_META_COLUMNS = (
    (START_LSN, "BINARY", False),
    (SEQVAL, "BINARY", False),
    (OPERATION, "INT", False),
    (COMMIT_TIME, "TIMESTAMP", True),
    (DELETED, "BOOLEAN", False),
)
#: The columns a history table has beyond a current-state table's (``table_modes.meta_columns``).
HISTORY_COLUMNS = (
    (VALID_FROM, "TIMESTAMP", True),
    (VALID_TO, "TIMESTAMP", True),
    (IS_CURRENT, "BOOLEAN", False),
)
#: A change's position in the log: the newest position per key wins (``window.net_effect``).
POSITION_COLUMNS = (START_LSN, SEQVAL, OPERATION)


def retired_row_values(lsn: str) -> dict[str, str]:
    """The change columns (SQL) of a target row a snapshot at ``lsn`` (an SQL literal) lacks: a delete there."""
    return {START_LSN: lsn, SEQVAL: lsn, OPERATION: str(DELETE), DELETED: "true"}
