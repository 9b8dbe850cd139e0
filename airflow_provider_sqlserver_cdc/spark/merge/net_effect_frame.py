"""The net-effect rule (``window.net_effect``) on a Spark DataFrame of changes: the newest change per key."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import DELETED, OPERATION, POSITION_COLUMNS
from airflow_provider_sqlserver_cdc.spark.merge.key_filter import session_conf
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote
from airflow_provider_sqlserver_cdc.window.net_effect import DELETING_OPERATIONS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LOG = logging.getLogger("sqlserver_cdc.merge_job")

RANK = "_cdc_rank"


def ranked_changes(changes: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """Number each key's changes from the newest: ``_cdc_rank`` 1 is the one the net effect keeps.

    Newest means the highest ``(_cdc_start_lsn, _cdc_seqval, _cdc_operation)``. A window function
    (one shuffle by key, one sort) rather than ``max(struct(...))``, which Spark can only run as a
    sort-based aggregate with a partial and a final sort; its output stays partitioned and sorted
    by key, which the MERGE join reuses.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest_first = Window.partitionBy(*[F.col(quote(k)) for k in key_columns]).orderBy(
        *[F.col(c).desc() for c in POSITION_COLUMNS]
    )
    return changes.withColumn(RANK, F.row_number().over(latest_first))


def latest_per_key(ranked: DataFrame) -> DataFrame:
    """Keep rank 1 of ``ranked_changes``, with ``_cdc_deleted`` true for a delete or a before-image."""
    from pyspark.sql import functions as F

    return (
        ranked.where(F.col(RANK) == 1)
        .drop(RANK)
        .withColumn(DELETED, F.col(OPERATION).isin(*DELETING_OPERATIONS))
    )


def net_effect_frame(changes: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """Apply the net-effect rule (see ``window/net_effect.py``) to a DataFrame of changes: one row per key."""
    return latest_per_key(ranked_changes(changes, key_columns))


#: Bytes of change rows per partition of a checkpoint: the size adaptive execution aims at by default
#: (``spark.sql.adaptive.advisoryPartitionSizeInBytes``, 64 MB).
CHECKPOINT_PARTITION_BYTES = 64 * 1024 * 1024
#: In-memory bytes per byte of a window's Parquet files (compressed columns): a rough factor.
PARQUET_EXPANSION = 4


def checkpoint_partitions(window_bytes: int, shuffle_partitions: int, cores: int) -> int:
    """Return how many partitions a checkpoint of this many bytes of windows should have.

    One per 64 MB of rows, as adaptive execution would coalesce its shuffle into. More partitions
    than cores run in waves: then the count is rounded up to whole waves, so that no task runs
    alone at the end. At most ``spark.sql.shuffle.partitions``: each partition becomes a task of
    the MERGE, and each task writes its own data and delete files.

    :param window_bytes: the size of the windows' Parquet files.
    :param shuffle_partitions: the session's ``spark.sql.shuffle.partitions``.
    :param cores: the tasks the application runs at once (``SparkContext.defaultParallelism``).
    """
    wanted = max(1, -(-max(window_bytes, 0) * PARQUET_EXPANSION // CHECKPOINT_PARTITION_BYTES))
    if cores > 0 and wanted > cores:
        wanted = -(-wanted // cores) * cores
    return max(1, min(wanted, shuffle_partitions))


@contextmanager
def checkpointed_net_effect(
    changes: DataFrame, key_columns: Sequence[str], partitions: int | None = None
) -> Iterator[DataFrame]:
    """Yield the net effect of ``changes`` over a local checkpoint of the ranked changes; release it afterwards.

    The yielded frame keeps rank 1 over the checkpointed ranked changes. That is a selective filter
    over a materialized leaf: the shape Spark's runtime filter needs to build a Bloom filter of the
    source keys (``runtime_key_filter_conf``) and drop, in the target scan, the rows no change
    touches before they are shuffled and sorted for the join. A window function between the filter
    and the Parquet scan would hide that shape. A local checkpoint keeps the rows as they are
    (memory, then disk); Spark's columnar cache, the other such leaf, costs more to build than the
    filter saves on large windows (docs/merge-job.md). Like any local checkpoint it is lost with an
    executor: the MERGE then fails before it commits, and a retry is safe.

    :param partitions: plan the checkpoint into this many partitions by key, without adaptive
        execution: the checkpoint then keeps that partitioning and its order (adaptive execution
        would hide them), and a join on the key shuffles and sorts only its other side. None: as
        adaptive execution partitions it.
    """
    settings = {}
    if partitions is not None:
        settings = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(partitions)}
    with session_conf(changes.sparkSession, settings):
        ranked = ranked_changes(changes, key_columns).localCheckpoint(eager=True)
    try:
        yield latest_per_key(ranked)
    finally:
        try:
            ranked._jdf.queryExecution().analyzed().rdd().unpersist(False)
        except Exception as err:  # an internal Spark API: the blocks go with the session anyway
            LOG.warning("could not release the local checkpoint of the ranked changes (%s)", err)
