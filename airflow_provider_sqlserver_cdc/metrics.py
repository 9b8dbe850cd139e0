"""
The provider's metrics, through Airflow's Stats (StatsD, DogStatsD or OpenTelemetry, as ``[metrics]`` configures).

Every name starts with :data:`PREFIX` (after Airflow's own ``[metrics] statsd_prefix``, default
``airflow``) and ends with the capture instance (the stream), so plain StatsD, which drops tags,
still tells instances apart; the same value carries the tag ``capture_instance`` for backends
that keep tags. docs/operations.md ("Metrics") lists them with an example alert rule.

===========================================  =======  ============================================
name (``sqlserver_cdc.`` + ... + ``.<ci>``)  type     meaning
===========================================  =======  ============================================
``retention_headroom_minutes``               gauge    minutes before the CDC cleanup may delete the
                                                      oldest unapplied change (time to loss)
``lag_seconds``                              gauge    server clock minus the commit time the target
                                                      is complete up to (its applied-through LSN)
``backlog_age_seconds``                      gauge    age of the oldest change not applied yet
``rows_applied.<operation>``                 counter  rows of merged windows by operation (insert,
                                                      update, delete, snapshot)
``window_seconds``                           timer    extraction (or snapshot) of a window
``merge_seconds``                            timer    the merge task's spark-submit, per table it
                                                      committed
===========================================  =======  ============================================
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.hooks.retention_headroom import RetentionHeadroom

PREFIX = "sqlserver_cdc"
HEADROOM = "retention_headroom_minutes"
LAG = "lag_seconds"
BACKLOG_AGE = "backlog_age_seconds"
ROWS_APPLIED = "rows_applied"
WINDOW_SECONDS = "window_seconds"
MERGE_SECONDS = "merge_seconds"

# Stats names allow ASCII letters, digits, "_", ".", "-" (Airflow's validator); "." would add a level.
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def metric_name(metric: str, capture_instance: str) -> str:
    """``sqlserver_cdc.<metric>.<capture instance>``, the instance's unsafe characters replaced by ``_``."""
    return f"{PREFIX}.{metric}.{_UNSAFE.sub('_', capture_instance)}"


def _stats() -> Any:
    from airflow.sdk.observability.stats import Stats

    return Stats


def _tags(capture_instance: str) -> dict[str, str]:
    return {"capture_instance": capture_instance}


def gauge(metric: str, capture_instance: str, value: float) -> None:
    """Set a gauge of one capture instance."""
    _stats().gauge(metric_name(metric, capture_instance), value, tags=_tags(capture_instance))


def count(metric: str, capture_instance: str, value: int) -> None:
    """Add ``value`` to a counter of one capture instance."""
    _stats().incr(metric_name(metric, capture_instance), value, tags=_tags(capture_instance))


def timing(metric: str, capture_instance: str, seconds: float) -> None:
    """Record a duration of one capture instance."""
    _stats().timing(
        metric_name(metric, capture_instance), dt.timedelta(seconds=seconds), tags=_tags(capture_instance)
    )


def emit_headroom(report: RetentionHeadroom) -> None:
    """The time-to-loss gauges of one report (nothing for a stream without a watermark)."""
    if report.minutes_left is not None:
        gauge(HEADROOM, report.stream, report.minutes_left)
    if report.lag_seconds is not None:
        gauge(LAG, report.stream, report.lag_seconds)
    if report.backlog_age_seconds is not None:
        gauge(BACKLOG_AGE, report.stream, report.backlog_age_seconds)


def emit_rows_applied(capture_instance: str, rows: Mapping[str, int]) -> None:
    """The ``rows_applied.<operation>`` counters of one capture instance (zero counts are skipped)."""
    for operation, value in rows.items():
        if value:
            count(f"{ROWS_APPLIED}.{operation}", capture_instance, int(value))
