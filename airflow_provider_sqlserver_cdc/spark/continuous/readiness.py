"""Which of a table's new windows can be applied now: never one whose predecessor the table lacks.

A change window that continues an applied-through LSN (``applied_through``, the contiguity guard) can
be applied once the table holds that LSN, or once a window applied in the same micro-batch brings it.
Until then it is held back and tried again in the next micro-batch (the batch job refuses such a
window; the continuous job waits for its predecessor to land).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge.targets.base import ranges_after
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import Window
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, covers


@dataclass(frozen=True)
class Readiness:
    """A table's windows sorted out: to apply now, held back (with the LSN each waits for), already held."""

    ready: list[Window]
    held: list[tuple[Window, str]]
    applied: list[Window]


def sort_out(windows: Sequence[Window], applied: Mapping[str, list[LsnRange]]) -> Readiness:
    """Split one table's windows into ready, held back and already applied.

    :param windows: the table's windows found in this poll (any order).
    :param applied: capture instance -> the ranges the table holds.
    """
    done = [w for w in windows if covers(applied.get(w.manifest.capture_instance, []), *w.manifest.lsn_range)]
    waiting = sorted((w for w in windows if w not in done), key=lambda w: w.manifest.lsn_range)
    ready: list[Window] = []
    progress = True
    while progress:
        progress = False
        after = ranges_after(applied, ready)
        for window in list(waiting):
            if _continues(window, after):
                ready.append(window)
                waiting.remove(window)
                progress = True
                break
    held = [(w, str(w.manifest.applied_through)) for w in waiting]
    return Readiness(ready, held, done)


def _continues(window: Window, ranges: Mapping[str, list[LsnRange]]) -> bool:
    through = window.manifest.applied_through
    if window.manifest.kind != "changes" or through is None:
        return True
    lsn = int(Lsn.from_hex(through))
    return covers(ranges.get(window.manifest.capture_instance, []), lsn, lsn)
