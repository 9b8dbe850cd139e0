"""What a statement's executed Spark plan did: its shuffles (``Exchange``), and whether one fed a table's scan."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class PlanShuffles:
    """The shuffles of an executed plan (subqueries not counted).

    :param exchanges: the ``Exchange`` nodes (shuffle or broadcast) of the plan.
    :param table_exchanges: those between the table's scan and the plan's root (the table's rows shuffled).
    :param table_scanned: whether the plan scans the table at all.
    """

    exchanges: int
    table_exchanges: int
    table_scanned: bool


def _children(node: Any) -> list[Any]:
    """Return a physical plan node's children, seeing through adaptive plans, query stages and command results."""
    name = node.getClass().getSimpleName()
    if name == "AdaptiveSparkPlanExec":
        return [node.executedPlan()]
    if name.endswith("QueryStageExec"):
        return [node.plan()]
    if name == "CommandResultExec":
        return [node.commandPhysicalPlan()]
    children = node.children()
    return [children.apply(i) for i in range(children.size())]


def _walk(node: Any, ancestors: tuple[str, ...] = ()) -> Iterator[tuple[Any, tuple[str, ...]]]:
    yield node, ancestors
    name = str(node.nodeName())
    for child in _children(node):
        yield from _walk(child, (*ancestors, name))


def _is_exchange(name: str) -> bool:
    return name.endswith("Exchange") and not name.startswith("Reused")


def _scans(name: str, table: str) -> bool:
    """Say whether a node name is a scan of ``table`` (``BatchScan lake.ns.t``; backticks ignored)."""
    return name.startswith("BatchScan ") and name.split(" ", 1)[1].replace("`", "") == table.replace("`", "")


def plan_shuffles(frame: DataFrame, table: str) -> PlanShuffles:
    """Count the shuffles of the plan that ran ``frame`` (e.g. the result of ``spark.sql("MERGE …")``).

    :param frame: a DataFrame whose plan has run (a command's result, or after an action).
    :param table: the dotted table name whose scan's shuffles are counted separately.
    """
    root = frame._jdf.queryExecution().executedPlan()
    exchanges, table_exchanges, scanned = 0, 0, False
    for node, ancestors in _walk(root):
        name = str(node.nodeName())
        exchanges += _is_exchange(name)
        if _scans(name, table):
            scanned = True
            table_exchanges = max(table_exchanges, sum(_is_exchange(a) for a in ancestors))
    return PlanShuffles(exchanges, table_exchanges, scanned)


#: The attribute of the log record that carries a ``MergeReport`` (for benchmarks and tests).
MERGE_REPORT_ATTRIBUTE = "merge_report"


@dataclass(frozen=True)
class MergeReport:
    """How one MERGE ran: its strategy, why, and the shuffles of its executed plan.

    :param strategy: ``storage-partitioned``, ``plain``, ``plain, runtime key filter`` or ``snapshot``.
    :param reason: why the strategy was chosen (why no storage-partitioned join, for instance).
    """

    table: str
    strategy: str
    shuffles: PlanShuffles
    reason: str = ""


def log_merge(
    log: logging.Logger, table: str, strategy: str, frame: DataFrame, reason: str = ""
) -> MergeReport:
    """Log how a MERGE ran (strategy, reason, ``Exchange`` count); return the report, also on the log record.

    :param frame: the result of ``spark.sql`` for the MERGE statement.
    """
    try:
        shuffles = plan_shuffles(frame, table)
    except Exception as err:  # internal Spark API: never fail a committed merge over a log line
        log.warning("target %s: could not read the MERGE's executed plan (%s)", table, err)
        shuffles = PlanShuffles(-1, -1, False)
    report = MergeReport(table, strategy, shuffles, reason)
    log.info(
        "target %s: MERGE strategy %s%s; executed plan: %d Exchange(s), %d on the target's side",
        table,
        strategy,
        f" ({reason})" if reason else "",
        shuffles.exchanges,
        shuffles.table_exchanges,
        extra={MERGE_REPORT_ATTRIBUTE: report},
    )
    return report
