"""Several target tables merged at once in one Spark application: a thread pool, a Spark session per thread.

Each thread gets its own session (``SparkSession.newSession``: its own SQL settings and temporary
views over the shared context, catalogs and executors), so a table's MERGE settings
(``staged_merge.SPJ_CONF``, the runtime key filter's) never leak into another table's statement, and
its own fair-scheduler pool (used when the application runs with ``spark.scheduler.mode=FAIR``), so a
large table does not hold the executors while the small ones wait. PySpark's pinned threads keep the
commit properties of a table's MERGE on its thread. One table's failure leaves the others running.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG = logging.getLogger("sqlserver_cdc.merge_job")

#: The fair-scheduler pool of the thread merging a table: ``sqlserver-cdc-<n>``.
POOL_PREFIX = "sqlserver-cdc-"

Item = TypeVar("Item")


def run_concurrently(
    spark: SparkSession,
    items: Sequence[Item],
    work: Callable[[SparkSession, Item], None],
    threads: int,
    prepare_session: Callable[[SparkSession], None],
) -> dict[int, BaseException]:
    """Run ``work(session, item)`` for every item on up to ``threads`` threads; return index -> error of failed items.

    :param spark: the application's session; each thread works in a new session of it.
    :param items: e.g. the target tables' plans.
    :param work: what to do for one item; what it raises is that item's failure only.
    :param threads: how many items run at once.
    :param prepare_session: applied to each new session (the job's settings, ``job.configure_session``).
    """

    def one(index: int) -> BaseException | None:
        session = spark.newSession()
        prepare_session(session)
        session.sparkContext.setLocalProperty("spark.scheduler.pool", f"{POOL_PREFIX}{index % threads}")
        try:
            work(session, items[index])
        except Exception as err:
            return err
        finally:
            session.sparkContext.setLocalProperty("spark.scheduler.pool", None)
        return None

    with ThreadPoolExecutor(max_workers=max(threads, 1), thread_name_prefix="merge-table") as pool:
        outcomes = list(pool.map(one, range(len(items))))
    return {index: error for index, error in enumerate(outcomes) if error is not None}
