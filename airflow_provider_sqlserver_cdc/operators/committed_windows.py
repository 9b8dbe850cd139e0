"""The windows of a partly failed merge whose target tables committed: what the watermark commit may take.

One table's trouble stays that table's: when some target tables of a merge fail, the tables that
committed have their watermarks advanced in the same run (``WatermarkCommitOperator``), and the
failed tables' capture instances keep theirs until a retry or a later run merges them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from airflow_provider_sqlserver_cdc.spark.merge.result_file import MergeResult, TableResult
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow


def table_capture_instances(table: TableResult) -> set[str]:
    """Return the capture instances whose windows a table's result names (labels ``{capture instance} {range}``).

    :param table: one target table's entry of the job's result file.
    """
    labels = (*table.applied, *table.skipped, *table.failed_windows)
    return (
        {label.rsplit(" ", 1)[0] for label in labels if " " in label}
        | set(table.applied_lsn_ranges)
        | set(table.max_applied_lsn)
    )


def committed_windows(windows: Iterable[ChangeWindow], result: MergeResult) -> list[ChangeWindow]:
    """Return the windows whose capture instance's target table committed, in order.

    A window counts only when a committed table names its capture instance and no failed table
    does (a table that failed after committing some windows keeps its watermark where it is; the
    retry skips what it holds).

    :param windows: the windows the merge took.
    :param result: the job's result file.
    """
    committed = set().union(*(table_capture_instances(t) for t in result.committed()))
    failed = set().union(*(table_capture_instances(t) for t in result.failed()))
    return [w for w in windows if w.capture_instance in committed and w.capture_instance not in failed]


def uncommitted_instances(windows: Sequence[ChangeWindow], committed: Sequence[ChangeWindow]) -> list[str]:
    """Return the capture instances of ``windows`` left out of ``committed``, each once, in order."""
    kept = {w.capture_instance for w in committed}
    return list(dict.fromkeys(w.capture_instance for w in windows if w.capture_instance not in kept))
