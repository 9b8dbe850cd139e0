"""CDC state across restarts of a simulator started with ``--data``.

The engine's durable snapshot keeps tables, rows and the transaction log; through the registry's
``state_hook`` it also keeps each database's CDC state: capture instances with their change rows,
``cdc.lsn_time_mapping``, ``cdc.ddl_history``, the job settings and how far the capture process
has read the log. Transactions committed after the snapshot are replayed into the log on start and
captured by the capture job as usual. A capture job that was running is started again at the first
CDC access after the restart (the engine is still replaying its journal while the state is loaded).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlserver_cdc_simulator.cdc.capture_instance import (
    CapturedColumn,
    CaptureInstance,
    IndexColumn,
)
from sqlserver_cdc_simulator.cdc.change_table_object import attach_change_table
from sqlserver_cdc_simulator.cdc.database_state import (
    CaptureJobSettings,
    CdcDatabase,
    CleanupJobSettings,
    DdlHistoryRow,
)
from sqlserver_cdc_simulator.cdc.session_access import set_cdc_state
from sqlserver_cdc_simulator.cdc.time_mapping import LsnTimeMappingRow

STATE_NAME = "cdc"
FORMAT_VERSION = 1
_INSTANCE_FIELDS = [f.name for f in dataclasses.fields(CaptureInstance) if f.name != "change_table"]


def _shallow(value: Any) -> dict[str, Any]:
    """A dataclass's fields as a dict, without converting nested dataclasses (such as SqlType)."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def dump_state(database: Any) -> dict[str, Any] | None:
    """The database's CDC state as picklable values (None when CDC is not enabled)."""
    # The raw flag, not cdc_state(): reading the state for a snapshot must not start a capture job.
    state = database.flags.get("cdc")
    if state is None:
        return None
    with state.lock:
        instances = []
        for instance in state.instances.values():
            fields = {name: getattr(instance, name) for name in _INSTANCE_FIELDS}
            fields["captured_columns"] = [_shallow(c) for c in instance.captured_columns]
            fields["index_columns"] = [_shallow(c) for c in instance.index_columns]
            table = instance.change_table
            instances.append(
                {"fields": fields, "rows": list(table._rows), "command_ids": list(table._command_ids)}
            )
        return {
            "format_version": FORMAT_VERSION,
            "instances": instances,
            "mapping": [row.as_tuple() for row in state.mapping.rows()],
            "ddl_history": [_shallow(row) for row in state.ddl_history],
            "capture_job": None if state.capture_job is None else _shallow(state.capture_job),
            "cleanup_job": None if state.cleanup_job is None else _shallow(state.cleanup_job),
            "processed_lsn": state.processed_lsn,
            "capture_running": state.capture_running,
        }


def load_state(database: Any, value: dict[str, Any] | None, engine: Any) -> None:
    """Rebuild a database's CDC state from :func:`dump_state`'s value."""
    if not value or value.get("format_version") != FORMAT_VERSION:
        return
    state = CdcDatabase(database, engine.clock, engine.mutex, engine)
    for saved in value["instances"]:
        fields = dict(saved["fields"])
        fields["captured_columns"] = [CapturedColumn(**c) for c in fields["captured_columns"]]
        fields["index_columns"] = [IndexColumn(**c) for c in fields["index_columns"]]
        instance = CaptureInstance(**fields)
        instance.change_table.append_rows(saved["rows"], saved["command_ids"])
        state.add_instance(instance)
        attach_change_table(database, instance, database.create_ticks)
    for row in value["mapping"]:
        state.mapping.append(LsnTimeMappingRow(*row))
    state.ddl_history = [DdlHistoryRow(**row) for row in value["ddl_history"]]
    if value["capture_job"] is not None:
        state.capture_job = CaptureJobSettings(**value["capture_job"])
    if value["cleanup_job"] is not None:
        state.cleanup_job = CleanupJobSettings(**value["cleanup_job"])
    state.processed_lsn = value["processed_lsn"]
    state.start_job_on_first_use = bool(value["capture_running"])
    set_cdc_state(database, state)
