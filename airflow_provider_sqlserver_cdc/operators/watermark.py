"""WatermarkCommitOperator: advance each capture instance's watermark once its window is merged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.operators.spark_merge import (
    APPLIED_RANGES_XCOM_KEY,
    MERGED_WINDOWS_XCOM_KEY,
)
from airflow_provider_sqlserver_cdc.state import advance_watermark, mirror_applied_ranges
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow, xcom_items
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, parse_ranges

if TYPE_CHECKING:
    from airflow.sdk import Context


def proven_empty(window: ChangeWindow) -> list[LsnRange]:
    """
    The LSN range a change window without rows proved free of changes of its capture instance.

    A window read from the change table (``[from, to]``) with no row holds no change there; one that
    continued an applied-through LSN (``applied_through``, set by the contiguity guard only when the
    source had no change between it and the window) proves that stretch too. A planned-empty window
    (not queried) proves only what the guard checked. The merge commits nothing for such a window,
    so the watermark Variable keeps this range (``state.mirror_applied_ranges``, ``empty``).
    """
    if window.kind != "changes" or window.position_kind != "lsn" or window.row_count:
        return []
    if window.applied_through is not None:
        first = int(Lsn.from_hex(window.applied_through)) + 1
    elif window.empty:
        return []
    else:
        first = int(window.from_lsn)
    last = int(window.to_lsn)
    return [(first, last)] if first <= last else []


class WatermarkCommitOperator(BaseOperator):
    """
    Mirror what the merge committed into each capture instance's watermark Variable, only moving forward.

    Place it downstream of the merge task, so it runs only after the merge has committed. It takes
    the XCom of CdcExtractOperator (or CdcSnapshotOperator), read with ``ChangeWindow.from_xcom``:
    a window dict, a list of them, the mapped results of ``.expand()``, their JSON text, or a list
    of these. Given the merge task's ``applied_lsn_ranges`` XCom (the ranges each table holds,
    read from the table), the Variable mirrors them and its LSN is their applied-through LSN
    (``state.mirror_applied_ranges``); without it, the LSN is the window's end. Either way a
    backfill of an old interval never moves a watermark back.

    :param windows: the extraction XCom (e.g. ``extract.output``). (templated)
    :param applied: the merge task's ``applied_lsn_ranges`` XCom, e.g.
        ``XComArg(merge, key="applied_lsn_ranges")``: capture instance -> applied LSN ranges. (templated)
    :param merge_task_id: instead of ``windows`` and ``applied``: the merge task whose XComs
        ``merged_windows`` and ``applied_lsn_ranges`` they are, pulled when this task runs. For a
        commit that runs whatever the merge's state (trigger rule ``all_done``): a merge that failed
        for some target tables pushed the committed tables' windows only, which are committed; one
        that pushed none (skipped, or failed before its job wrote a result) skips this task.
    """

    template_fields: Sequence[str] = ("windows", "applied")
    ui_color = "#d9ead3"

    def __init__(
        self, *, windows: Any = None, applied: Any = None, merge_task_id: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if (windows is None) == (merge_task_id is None):
            raise ValueError(f"{self.task_id}: pass windows (the extraction XCom) or merge_task_id, not both")
        self.windows = windows
        self.applied = applied
        self.merge_task_id = merge_task_id

    def _pull_from_merge(self, context: Context) -> None:
        """Take ``windows`` and ``applied`` from the merge task's XComs; skip when it pushed no windows."""
        ti = context["ti"]
        windows = ti.xcom_pull(task_ids=self.merge_task_id, key=MERGED_WINDOWS_XCOM_KEY)
        if windows is None:
            raise AirflowSkipException(
                f"{self.task_id}: the merge task {self.merge_task_id} pushed no merged windows (it was skipped, "
                "or failed before its job wrote a result): no watermark to commit"
            )
        self.windows = windows
        self.applied = ti.xcom_pull(task_ids=self.merge_task_id, key=APPLIED_RANGES_XCOM_KEY)

    def _applied_ranges(self) -> dict[str, str]:
        ranges: dict[str, str] = {}
        for item in xcom_items(self.applied):
            if isinstance(item, dict):
                ranges.update({str(k): str(v) for k, v in item.items() if v})
        return ranges

    def execute(self, context: Context) -> list[dict[str, Any]]:
        if self.merge_task_id is not None:
            self._pull_from_merge(context)
        dag_run = context.get("dag_run")
        run_id = getattr(dag_run, "run_id", None)
        applied = self._applied_ranges()
        outcome = []
        for window in ChangeWindow.from_xcom(self.windows):
            if window.capture_instance in applied:
                outcome.append(self._mirror(window, applied[window.capture_instance], run_id))
                continue
            lsn = window.to_lsn
            moved, previous = advance_watermark(
                window.state_key, lsn, commit_time=window.to_position_time, dag_run_id=run_id
            )
            if moved:
                self.log.info(
                    "%s: watermark %s -> %s (%s)",
                    window.capture_instance,
                    previous.lsn if previous else "none",
                    lsn.hex,
                    window.state_key,
                )
            else:
                self.log.info(
                    "%s: watermark stays at %s; window ends at %s, which is not newer (backfill or re-run)",
                    window.capture_instance,
                    previous.lsn if previous else "none",
                    lsn.hex,
                )
            outcome.append(
                {
                    "capture_instance": window.capture_instance,
                    "state_key": window.state_key,
                    "watermark": lsn.hex if moved else (previous.lsn if previous else None),
                    "moved": moved,
                }
            )
        return outcome

    def _mirror(self, window: ChangeWindow, ranges_text: str, run_id: str | None) -> dict[str, Any]:
        """Mirror the table's applied ranges of the window's capture instance into its Variable."""
        changed, previous, current = mirror_applied_ranges(
            window.state_key,
            parse_ranges(ranges_text),
            known_commit_time=(window.to_lsn, window.to_position_time),
            dag_run_id=run_id,
            empty=proven_empty(window),
        )
        if previous is not None and current.position < previous.position:
            self.log.warning(
                "%s: watermark moves back from %s to %s: the target table holds every change only up to %s "
                "(the stored value predates the mirrored ranges, or the table was restored)",
                window.capture_instance,
                previous.lsn,
                current.lsn,
                current.lsn,
            )
        self.log.info(
            "%s: watermark %s %s (applied LSN ranges %s%s; %s)",
            window.capture_instance,
            "->" if changed else "stays at",
            current.lsn,
            current.applied_ranges,
            f", no change of the instance in {current.empty_ranges}" if current.empty_ranges else "",
            window.state_key,
        )
        return {
            "capture_instance": window.capture_instance,
            "state_key": window.state_key,
            "watermark": current.lsn,
            "moved": changed and (previous is None or current.position > previous.position),
            "applied_ranges": current.applied_ranges,
        }
