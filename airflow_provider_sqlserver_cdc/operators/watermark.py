"""WatermarkCommitOperator: advance each capture instance's watermark once its window is merged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_sqlserver_cdc.state import advance_watermark
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

if TYPE_CHECKING:
    from airflow.sdk import Context


class WatermarkCommitOperator(BaseOperator):
    """
    Store each window's ``to_lsn`` as the watermark of its capture instance, only moving forward.

    Place it downstream of the merge task, so it runs only after the merge has committed. It takes
    the XCom of CdcExtractOperator (or CdcSnapshotOperator), read with ``ChangeWindow.from_xcom``:
    a window dict, a list of them, the mapped results of ``.expand()``, their JSON text, or a list
    of these. A backfill of an old interval never moves a watermark back.

    :param windows: the extraction XCom (e.g. ``extract.output``). (templated)
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
        for window in ChangeWindow.from_xcom(self.windows):
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
