"""AppliedWindowsTrigger: wait, in the triggerer, until the continuous apply application has applied a run's windows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow.triggers.base import TriggerEvent

from airflow_provider_sqlserver_cdc.spark.continuous.published_state import (
    APPLIED,
    FAILED,
    ApplyLock,
    ApplyState,
    RunProgress,
    RunWindow,
    lock_uri,
    run_progress,
    state_uri,
    utc_now,
)
from airflow_provider_sqlserver_cdc.staging_files import read_text
from airflow_provider_sqlserver_cdc.triggers.dataclass_trigger import DataclassTrigger


def read_progress(staging: str, windows: Sequence[RunWindow]) -> RunProgress:
    """Read what the application published and say where the run's windows stand (blocking I/O).

    :param staging: the staging path the application applies.
    :param windows: the run's windows.
    """
    state_text = read_text(state_uri(staging))
    lock_text = read_text(lock_uri(staging))
    return run_progress(
        ApplyState.from_json(state_text) if state_text else None,
        ApplyLock.from_json(lock_text) if lock_text else None,
        windows,
        staging=staging,
    )


@dataclass(kw_only=True, eq=False, repr=False)
class AppliedWindowsTrigger(DataclassTrigger):
    """
    Poll the continuous apply application's published state until the run's windows are in their tables.

    The file reads run in a worker thread, off the triggerer's event loop; no Spark is involved.
    Events carry ``status`` (``applied``, ``failed`` or ``timeout``), ``message`` and
    ``applied_lsn_ranges`` (capture instance -> the ranges its table holds).

    :param staging_path: the staging path the application applies (its state is under it).
    :param windows: the run's windows, as ``RunWindow.to_dict`` gives them.
    :param poll_interval: seconds between reads.
    :param timeout_at: ISO 8601 instant after which the trigger reports a timeout, saying whether the
        application is down or behind.
    """

    staging_path: str
    windows: list[dict[str, Any]]
    poll_interval: float = 2.0
    timeout_at: str

    def __post_init__(self) -> None:
        super().__post_init__()
        self.windows = [dict(w) for w in self.windows]
        self.poll_interval = float(self.poll_interval)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        windows = [RunWindow.from_dict(w) for w in self.windows]
        deadline = datetime.fromisoformat(self.timeout_at)
        while True:
            progress = await asyncio.to_thread(read_progress, self.staging_path, windows)
            if progress.status in (APPLIED, FAILED) or utc_now() >= deadline:
                status = progress.status if progress.status in (APPLIED, FAILED) else "timeout"
                yield TriggerEvent(
                    {
                        "status": status,
                        "message": progress.message,
                        "applied_lsn_ranges": progress.applied_lsn_ranges,
                    }
                )
                return
            await asyncio.sleep(self.poll_interval)
