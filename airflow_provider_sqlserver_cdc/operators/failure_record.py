"""What a failed window or merge task leaves: an XCom naming its capture instances and the error.

The pipeline's last task (``pipeline.run_outcome``) reads it to fail the run naming each failed
capture instance and what to do, after the run's other windows were merged and committed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names
from airflow_provider_sqlserver_cdc.hooks.odbc_connection import REDACTED

if TYPE_CHECKING:
    from airflow.sdk import Context

#: XCom key of a failed task's record: ``{"capture_instances": [...], "error": "...", "message": "..."}``,
#: with ``errors`` (capture instance -> why, when they differ) and ``kind`` (:data:`MERGE_FAILURE`) if given
FAILURE_XCOM_KEY = "failure"
#: ``kind`` of a merge task's record: its capture instances' watermarks did not advance in the run
MERGE_FAILURE = "merge"
#: the error message is cut to this many characters in the record (the task log has it whole)
MAX_MESSAGE_CHARS = 4000
#: each capture instance's own message (``errors``) is cut to this many characters
MAX_INSTANCE_MESSAGE_CHARS = 1000
LOG = logging.getLogger(__name__)

# user:password@ in a URL, and password-like key=value pairs (ODBC, JDBC, URL query).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@")
_KEY_PASSWORD = re.compile(
    r"(?P<head>\b(?:password|passwd|pwd|sslpassword)[\"']?\s*[=:]\s*)"
    r"(?:\{(?:[^}]|\}\})*\}|\"[^\"]*\"|'[^']*'|[^\s;&,'\")]+)",
    re.IGNORECASE,
)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """
    Return ``text`` with the given secrets and anything shaped like a password replaced by ``***``.

    Provider errors name no secret; this keeps one that a driver or a command line echoes out of XCom.

    :param text: an error message.
    :param secrets: values known to be secret (e.g. the JDBC target's password).
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _URL_PASSWORD.sub(rf"\g<head>{REDACTED}@", text)
    return _KEY_PASSWORD.sub(rf"\g<head>{REDACTED}", text)


def record_failure(
    context: Context,
    capture_instance: str | list[str] | None,
    err: BaseException,
    *,
    errors: Mapping[str, str] | None = None,
    kind: str | None = None,
    secrets: Iterable[str] = (),
) -> None:
    """
    Push the failure record of a task that is about to fail; never raises (the task's own error matters).

    :param context: the failing task's context.
    :param capture_instance: the capture instance(s) the task wrote or merged windows for.
    :param err: the error the task fails with (provider errors name no secret; the message is
        scrubbed all the same, :func:`scrub`).
    :param errors: capture instance -> its own error message, when they differ (a merge's failed tables).
    :param kind: what failed, for the remedy (:data:`MERGE_FAILURE`); None for a window task.
    :param secrets: values to keep out of the record besides password-shaped ones.
    """
    ti = context.get("ti")
    if ti is None:
        return
    secrets = list(secrets)
    record: dict[str, Any] = {
        "capture_instances": capture_instance_names(capture_instance),
        "error": type(err).__name__,
        "message": scrub(str(err), secrets)[:MAX_MESSAGE_CHARS],
    }
    if errors:
        record["errors"] = {
            str(name): scrub(message, secrets)[:MAX_INSTANCE_MESSAGE_CHARS]
            for name, message in errors.items()
        }
    if kind:
        record["kind"] = kind
    try:
        ti.xcom_push(key=FAILURE_XCOM_KEY, value=record)
    except Exception:  # the task's own error is what it fails with
        LOG.warning("could not record the failure of %s in XCom", record["capture_instances"], exc_info=True)
