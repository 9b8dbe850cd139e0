"""WatermarkCommitOperator: advance each capture instance's watermark once its window is merged."""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.state import advance_watermark

if TYPE_CHECKING:
    from airflow.sdk import Context


def _as_windows(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = ast.literal_eval(value)
    if isinstance(value, dict):
        return [value]
    windows: list[dict[str, Any]] = []
    for item in value or []:
        windows.extend(_as_windows(item))
    return windows


class WatermarkCommitOperator(BaseOperator):
    """
    Store each window's ``to_lsn`` as the watermark of its capture instance, only moving forward.

    Place it downstream of the merge task, so it runs only after the merge has committed. It takes
    the XCom of CdcExtractOperator (or CdcSnapshotOperator): a dict, a list of dicts, or the
    mapped results of ``.expand()``. A backfill of an old interval never moves a watermark back.

    :param windows: the extraction XCom (e.g. ``extract.output``), each with ``state_key`` and ``to_lsn``.
    """

    template_fields: Sequence[str] = ("windows",)
    ui_color = "#d9ead3"

    def __init__(self, *, windows: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.windows = windows

    def execute(self, context: Context) -> list[dict[str, Any]]:
        dag_run = context.get("dag_run")
        run_id = getattr(dag_run, "run_id", None)
        outcome = []
        for window in _as_windows(self.windows):
            missing = [k for k in ("state_key", "to_lsn", "capture_instance") if k not in window]
            if missing:
                raise ValueError(f"Not an extraction result (lacks {', '.join(missing)}): {window!r}")
            lsn = Lsn.from_hex(window["to_lsn"])
            moved, previous = advance_watermark(
                window["state_key"],
                lsn,
                commit_time=window.get("to_lsn_time"),
                dag_run_id=run_id,
            )
            if moved:
                self.log.info(
                    "%s: watermark %s -> %s (%s)",
                    window["capture_instance"],
                    previous.lsn if previous else "none",
                    lsn.hex,
                    window["state_key"],
                )
            else:
                self.log.info(
                    "%s: watermark stays at %s; window ends at %s, which is not newer (backfill or re-run)",
                    window["capture_instance"],
                    previous.lsn if previous else "none",
                    lsn.hex,
                )
            outcome.append(
                {
                    "capture_instance": window["capture_instance"],
                    "state_key": window["state_key"],
                    "watermark": lsn.hex if moved else (previous.lsn if previous else None),
                    "moved": moved,
                }
            )
        return outcome
