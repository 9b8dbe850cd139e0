"""Registration of every CDC object into the simulator's extension registry."""

from __future__ import annotations

import weakref
from typing import Any

from sqlserver_cdc_simulator.cdc import catalog, functions, lob_limit, persistence
from sqlserver_cdc_simulator.cdc.capture_job import CaptureJob
from sqlserver_cdc_simulator.cdc.procedures import CdcProcedures, ddl_hook
from sqlserver_cdc_simulator.cdc.session_access import (
    capture_job_of,
    cdc_state,
    set_capture_job,
)
from sqlserver_cdc_simulator.extensions import ExtensionRegistry


def register_cdc(registry: ExtensionRegistry, engine: Any = None) -> None:
    """
    Add the CDC procedures, functions, tables, views and DDL rules to ``registry``.

    :param registry: the engine's extension registry.
    :param engine: the engine; with it, CDC state is kept across restarts (``--data``).
    """
    jobs: weakref.WeakSet[CaptureJob] = weakref.WeakSet()

    def stop_all_jobs(engine: Any = None) -> None:
        for job in list(jobs):
            job.stop()

    for name, procedure in CdcProcedures(jobs.add).procedures().items():
        registry.procedure(name, procedure)
    registry.functions_and_views(
        functions.SCALAR_FUNCTIONS, functions.TABLE_FUNCTION_PREFIXES, catalog.STATIC_VIEWS
    )
    registry.ddl_hook(ddl_hook)
    registry.value_check(lob_limit.check_replicated_lob)
    registry.procedure("sys.sp_configure", lob_limit.sp_configure)
    registry.procedure("sys.reconfigure", lob_limit.reconfigure)  # the statement parses as a bare EXEC
    # Engine.reset() calls these: a reset forgets the databases, so their capture jobs must stop.
    hooks = getattr(registry, "reset_hooks", None)
    if hooks is None:
        hooks = []
        registry.reset_hooks = hooks  # type: ignore[attr-defined]
    hooks.append(stop_all_jobs)
    registry.stop_cdc_jobs = stop_all_jobs  # type: ignore[attr-defined]

    if engine is not None and hasattr(registry, "state_hook"):

        def load(database: Any, value: Any) -> None:
            persistence.load_state(database, value, engine)
            state = cdc_state(database)
            if state is not None and state.start_job_on_first_use:

                def start() -> None:
                    job = CaptureJob(state)
                    set_capture_job(database, job)
                    jobs.add(job)
                    job.start()

                state.pending_job_start = start

        registry.state_hook(persistence.STATE_NAME, persistence.dump_state, load)


def run_capture_scan(engine: Any, database: str) -> None:
    """
    Run the capture job of ``database`` synchronously until it has read every committed transaction.

    The fixture exposes this as ``sqlserver_simulator.run_capture_scan(database)`` so tests need not
    sleep through polling intervals.

    :raises LookupError: when CDC is not enabled on the database.
    """
    db = engine.database(database)
    state = cdc_state(db)
    if state is None:
        raise LookupError(f"CDC is not enabled on database {database!r}; run sys.sp_cdc_enable_db first")
    state.catch_up()


def capture_job_running(engine: Any, database: str) -> bool:
    """Whether the capture job of ``database`` is running."""
    job = capture_job_of(engine.database(database))
    return job is not None and job.running
