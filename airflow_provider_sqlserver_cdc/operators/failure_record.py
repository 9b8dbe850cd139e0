"""What a window-writing task leaves behind when it fails: an XCom naming the capture instance and the error.

The pipeline's last task (``pipeline.run_outcome``) reads it to fail the run naming each failed
capture instance and what to do, after the run's other windows were merged and committed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names

if TYPE_CHECKING:
    from airflow.sdk import Context

#: XCom key of a failed task's record: ``{"capture_instances": [...], "error": "...", "message": "..."}``
FAILURE_XCOM_KEY = "failure"
#: the error message is cut to this many characters in the record (the task log has it whole)
MAX_MESSAGE_CHARS = 4000
LOG = logging.getLogger(__name__)


def record_failure(context: Context, capture_instance: str | list[str] | None, err: BaseException) -> None:
    """
    Push the failure record of a task that is about to fail; never raises (the task's own error matters).

    :param context: the failing task's context.
    :param capture_instance: the capture instance(s) the task wrote windows for.
    :param err: the error the task fails with (provider errors name no secret).
    """
    ti = context.get("ti")
    if ti is None:
        return
    record: dict[str, Any] = {
        "capture_instances": capture_instance_names(capture_instance),
        "error": type(err).__name__,
        "message": str(err)[:MAX_MESSAGE_CHARS],
    }
    try:
        ti.xcom_push(key=FAILURE_XCOM_KEY, value=record)
    except Exception:  # the task's own error is what it fails with
        LOG.warning("could not record the failure of %s in XCom", record["capture_instances"], exc_info=True)
