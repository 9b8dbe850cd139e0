"""Registration of the Change Tracking objects into the simulator's extension registry."""

from __future__ import annotations

from typing import Any

from sqlserver_cdc_simulator.extensions import (
    DdlEvent,
    ExtensionRegistry,
    ProcedureArgs,
    ProcedureResult,
)
from sqlserver_cdc_simulator.sql import dialect

from . import errors, functions
from .cleanup import reset_table, run_cleanup
from .context import with_context
from .recording import record_commit
from .state import state_of
from .statements import alter_statement, rewrite_changetable


def register_change_tracking(registry: ExtensionRegistry) -> None:
    """Add the change tracking statements, functions, views, procedure and hooks to *registry*."""
    registry.functions_and_views(
        functions.SCALAR_FUNCTIONS, functions.TABLE_FUNCTION_PREFIXES, functions.VIEWS
    )
    registry.procedure("sys.sp_flush_CT_internal_table_on_demand", flush_on_demand)
    registry.commit_hook(record_commit)
    registry.statement_hook(alter_statement)
    registry.statement_prefix("CHANGE_TRACKING_CONTEXT", with_context)
    registry.ddl_hook(table_ddl)
    if rewrite_changetable not in dialect.TEXT_REWRITERS:
        dialect.TEXT_REWRITERS.append(rewrite_changetable)


def flush_on_demand(session: Any, args: ProcedureArgs) -> ProcedureResult:
    """sys.sp_flush_CT_internal_table_on_demand [@TableToClean =] 'table': run the retention cleanup now."""
    database = session.engine.database(session.database)
    state = state_of(database)
    if state is None:
        return ProcedureResult()
    name = args.get("TableToClean", 0)
    tables = None
    if name:
        table = session.lookup_table_by_text(str(name))
        tracked = state.tables.get(table.object_id) if table is not None else None
        tables = [tracked] if tracked is not None else []
    run_cleanup(session.engine, state, tables)
    return ProcedureResult()


def table_ddl(session: Any, event: DdlEvent) -> None:
    """TRUNCATE TABLE resets a tracked table's change information; DROP TABLE ends its tracking; dropping its
    primary key is refused (manage-change-tracking-sql-server.md)."""
    database = session.engine.databases.get(event.database.lower())
    state = state_of(database) if database is not None else None
    if state is None or event.object_id not in state.tables:
        return
    if event.kind == "drop_primary_key" and event.phase == "before":
        raise errors.primary_key_drop_refused(constraint=event.columns[0], table=event.table)
    if event.kind == "truncate_table" and event.phase == "before":
        xact = getattr(session, "xact", None)
        reset_table(session.engine, state, state.tables[event.object_id], xact.xid if xact is not None else 0)
    elif event.kind == "drop_table" and event.phase == "after":
        del state.tables[event.object_id]
