"""The job's result line: a marker, then the run's summary as JSON, for whoever reads the driver's output."""

from __future__ import annotations

import json
from typing import Any

RESULT_MARKER = "SQLSERVER_CDC_MERGE_RESULT"
COMMITTED = "committed"
FAILED = "failed"


def result_line(result: dict[str, Any]) -> str:
    """Return the line the job prints with its summary.

    :param result: target table -> its entry (``status``, ``applied``, ``skipped``, ...).
    """
    return f"{RESULT_MARKER} {json.dumps(result, sort_keys=True)}"


def parse_result_line(line: str) -> dict[str, Any] | None:
    """Return the summary a result line carries, or None if the line is not one (or is cut short).

    :param line: a line of the driver's output, possibly after a log prefix.
    """
    _, marker, payload = line.partition(RESULT_MARKER + " ")
    if not marker:
        return None
    try:
        result = json.loads(payload)
    except ValueError:
        return None
    return result if isinstance(result, dict) else None
