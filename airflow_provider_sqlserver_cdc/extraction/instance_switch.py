"""
The switch from a table's capture instance to a second one, at the second one's ``start_lsn``.

A capture instance keeps the columns it was created with, so after ``ALTER TABLE … ADD`` (or a
captured column's ``DROP``) the table needs a second capture instance to be followed (SQL Server
allows two per table). The pipeline keeps reading under the name the DAG gave (the *stream*: its
watermark Variable, its window directories, the capture instance its manifests and the target's
applied LSN ranges name), and reads each LSN range from the instance that holds it: the old one
up to the new one's ``start_lsn - 1``, the new one from ``start_lsn`` on. A window that spans the
switch is split in two; together they cover it with no gap and no overlap.

The second instance is either created by a DBA (picked up by the next run) or, with
``create_capture_instance``, by the extract itself (``sys.sp_cdc_enable_table``, needs db_owner).
With ``disable_old_capture_instance`` the old instance is disabled once the target holds every
change up to the switch. Once the old instance is gone the stream's name is found again from its
lineage Variable (``<watermark key>__source_table``), written when the switch is first seen.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc import state, tsql
from airflow_provider_sqlserver_cdc.capture_instance import require_key_columns
from airflow_provider_sqlserver_cdc.errors import CaptureInstanceNotFoundError, SchemaChangeError
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.schema_drift import DdlEvent, check_schema_drift, schema_drift

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable, Sequence

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow

#: The most capture instances SQL Server allows on one table (sys.sp_cdc_enable_table, error 22926).
MAX_INSTANCES_PER_TABLE = 2
LINEAGE_SUFFIX = "__source_table"
#: The extract creates no capture instance and disables none unless told to (both need db_owner).
DEFAULT_CREATE_CAPTURE_INSTANCE = False
DEFAULT_DISABLE_OLD_CAPTURE_INSTANCE = False


class CaptureInstanceLimitError(SchemaChangeError):
    """A table needs a third capture instance while its switch to the second one is not complete."""


@dataclass(frozen=True)
class InstanceSwitch:
    """
    The capture instances one stream reads: ``old`` up to ``new.start_lsn - 1``, ``new`` from it on.

    :param stream: the capture instance name the DAG gave (state key, windows, manifests).
    :param old: the oldest existing capture instance of the table (columns loaded).
    :param new: the table's newer capture instance, if there is one (columns loaded).
    """

    stream: str
    old: CaptureInstance
    new: CaptureInstance | None = None

    @property
    def switch_lsn(self) -> Lsn | None:
        """The LSN the stream reads the new instance from (its ``start_lsn``), or None."""
        return self.new.start_lsn if self.new is not None else None

    @property
    def newest(self) -> CaptureInstance:
        """The instance that follows the table's schema best: the new one if there is one."""
        return self.new if self.new is not None else self.old

    def parts(self, window: LsnWindow) -> list[tuple[CaptureInstance, LsnWindow]]:
        """
        Return the window's parts, each with the instance to read it from, in LSN order.

        :param window: the stream's planned (and guarded) window.
        """
        start = self.switch_lsn
        if start is None or self.new is None:
            return [(self.old, window)]
        if window.is_empty:
            return [(self.new if window.to_lsn >= start else self.old, window)]
        if window.to_lsn < start:
            return [(self.old, window)]
        if window.from_lsn >= start:
            return [(self.new, window)]
        before = Lsn.from_int(int(start) - 1)
        return [
            (self.old, replace(window, to_lsn=before, to_time=None)),
            (self.new, replace(window, from_lsn=start, from_time=None, planned_from_lsn=None)),
        ]


def successor_name(stream: str, existing: Sequence[str]) -> str:
    """
    Return the name of a further capture instance of the stream: ``<stream>_v2``, ``_v3``, ... unused.

    :param stream: the stream's name.
    :param existing: every capture instance name of the database.
    """
    taken = {name.lower() for name in existing}
    for number in range(2, 1000):
        suffix = f"_v{number}"
        name = stream[: tsql.CAPTURE_INSTANCE_MAX_CHARS - len(suffix)] + suffix
        if name.lower() not in taken:
            return name
    raise ValueError(f"no free capture instance name for {stream!r}")


def _table_instances(instances: Sequence[CaptureInstance], schema: str, table: str) -> list[CaptureInstance]:
    same = [i for i in instances if (i.source_schema, i.source_table) == (schema, table)]
    return sorted(same, key=lambda i: (int(i.start_lsn), i.create_date or 0, i.name))


def _with_columns(hook: SqlServerCdcHook, instance: CaptureInstance) -> CaptureInstance:
    if instance.columns:
        return instance
    return hook.with_columns(instance)


def lineage_key(state_key: str) -> str:
    """Return the Variable that names the stream's source table (``schema.table``)."""
    return state_key + LINEAGE_SUFFIX


def _variable() -> Any:
    """Airflow's Variable, as ``state`` reaches it (one place to replace it in tests)."""
    return state._variable()


def read_lineage(state_key: str) -> tuple[str, str] | None:
    """Return the stream's source table as (schema, table), or None when no switch was recorded."""
    value = _variable().get(lineage_key(state_key), default=None)
    if not value or "." not in str(value):
        return None
    schema, table = str(value).split(".", 1)
    return schema, table


def write_lineage(state_key: str, instance: CaptureInstance) -> None:
    """Record the stream's source table, so that the stream outlives its first capture instance."""
    text = f"{instance.source_schema}.{instance.source_table}"
    if _variable().get(lineage_key(state_key), default=None) != text:
        _variable().set(lineage_key(state_key), text)


def resolve_switch(
    hook: SqlServerCdcHook, stream: str, state_key: str, instances: Sequence[CaptureInstance]
) -> InstanceSwitch:
    """
    Return the instances the stream reads now.

    The stream's own instance is the old one; a newer instance of the same table is the new one.
    When the stream's instance no longer exists, its lineage Variable names the table, whose
    remaining instance(s) take over.

    :param hook: the source hook.
    :param stream: the capture instance name the DAG gave.
    :param state_key: the stream's watermark Variable.
    :param instances: every capture instance of the database (columns not needed).
    """
    own = next((i for i in instances if i.name.lower() == stream.lower()), None)
    if own is None:
        table = read_lineage(state_key)
        found = _table_instances(instances, *table) if table else []
        if not found:
            raise CaptureInstanceNotFoundError(
                f"capture instance {stream!r} does not exist"
                + (f" and table {'.'.join(table)} has no capture instance left" if table else "")
                + ". Enable CDC on the table again (sys.sp_cdc_enable_table) and re-snapshot it, or remove "
                "it from the DAG's tables"
            )
        chain = found
    else:
        chain = [
            i
            for i in _table_instances(instances, own.source_schema, own.source_table)
            if i.start_lsn >= own.start_lsn
        ]
        chain = [own, *[i for i in chain if i.name != own.name]]
    old = _with_columns(hook, chain[0])
    new = _with_columns(hook, chain[1]) if len(chain) > 1 else None
    if new is not None:
        write_lineage(state_key, old)
    return InstanceSwitch(stream, old, new)


def create_successor(
    hook: SqlServerCdcHook,
    switch: InstanceSwitch,
    instances: Sequence[CaptureInstance],
    *,
    reason: str,
    state_key: str,
    log: logging.Logger | None = None,
) -> InstanceSwitch:
    """
    Create the next capture instance of the stream's table and return the switch to it.

    :param hook: the source hook (its login needs db_owner).
    :param switch: the stream's instances now; its newest must not have a successor yet.
    :param instances: every capture instance of the database.
    :param reason: what the newest instance misses (for the error and the log).
    :param state_key: the stream's watermark Variable (its lineage is recorded first).
    :param log: where the creation is reported.
    """
    newest = switch.newest
    if switch.new is not None:
        raise CaptureInstanceLimitError(
            f"table {newest.source} needs a third capture instance ({reason}) while the switch of stream "
            f"{switch.stream!r} from {switch.old.name!r} to {switch.new.name!r} (at LSN {switch.new.start_lsn.hex}) "
            f"is not complete, and SQL Server allows {MAX_INSTANCES_PER_TABLE} per table. Nothing was written. "
            "Let the pipeline merge past the switch first (runs up to the new instance's start), then disable "
            f"{switch.old.name!r} (EXEC sys.sp_cdc_disable_table @source_schema = N'{newest.source_schema}', "
            f"@source_name = N'{newest.source_table}', @capture_instance = N'{switch.old.name}', or set "
            "extract.disable_old_capture_instance: true) and run again; the rows changed in between are "
            "back-filled by primary key (docs/schema-changes.md)"
        )
    name = successor_name(switch.stream, [i.name for i in instances])
    statement = tsql.enable_capture_instance_statement(
        newest.source_schema,
        newest.source_table,
        name,
        role_name=newest.role_name,
        index_name=newest.index_name,
    )
    write_lineage(state_key, newest)
    hook.run_statement(statement, doing=f"creating capture instance {name!r} for {newest.source} ({reason})")
    if log is not None:
        log.warning("%s: %s; created capture instance %s: %s", switch.stream, reason, name, statement)
    created = hook.get_capture_instance(name)
    return InstanceSwitch(switch.stream, newest, created)


def disable_completed_old(
    hook: SqlServerCdcHook,
    switch: InstanceSwitch,
    applied_through: Lsn | None,
    *,
    state_key: str,
    needed_from: Lsn | None = None,
    log: logging.Logger | None = None,
) -> InstanceSwitch:
    """
    Disable the old instance once the target holds every change it is read for; return the switch after.

    :param hook: the source hook (its login needs db_owner).
    :param switch: the stream's instances.
    :param applied_through: the target's applied-through LSN (watermark), None when unknown.
    :param needed_from: the start of this run's window: the old instance stays while it starts before
        the switch.
    :param state_key: the stream's watermark Variable (its lineage is recorded first).
    :param log: where the disabling is reported.
    """
    start = switch.switch_lsn
    if (
        switch.new is None
        or start is None
        or applied_through is None
        or int(applied_through) < int(start) - 1
        or (needed_from is not None and int(needed_from) < int(start))
    ):
        return switch
    old = switch.old
    write_lineage(state_key, old)
    statement = tsql.disable_capture_instance_statement(old.source_schema, old.source_table, old.name)
    hook.run_statement(statement, doing=f"disabling capture instance {old.name!r} after the switch")
    if log is not None:
        log.warning(
            "%s: the target holds every change up to %s; disabled the old capture instance %s",
            switch.stream,
            applied_through.hex,
            old.name,
        )
    return InstanceSwitch(switch.stream, switch.new, None)


def follow_schema(
    hook: SqlServerCdcHook,
    switch: InstanceSwitch,
    window: LsnWindow,
    instances: Sequence[CaptureInstance],
    *,
    on_schema_change: str,
    create_capture_instance: bool,
    state_key: str,
    log: logging.Logger | None = None,
) -> tuple[InstanceSwitch, list[DdlEvent]]:
    """
    Return the switch that follows the table's schema through the window, and the window's DDL events.

    DDL the newest instance does not follow (a column added, a captured column dropped) needs a
    further instance: created here with ``create_capture_instance`` (it starts after the window, whose
    DDL-to-end range is then back-filled), else SchemaChangeError under ``on_schema_change`` ``fail``.
    DDL the old instance misses while a new instance follows is expected: the switch handles it.
    A column rename always fails: the target cannot tell a renamed column from a new one.

    :param hook: the source hook.
    :param switch: the stream's instances.
    :param window: the stream's window.
    :param instances: every capture instance of the database (for a new instance's name).
    :param on_schema_change: ``fail`` or ``ignore``.
    :param create_capture_instance: create the next capture instance when one is needed (db_owner).
    :param state_key: the stream's watermark Variable.
    :param log: where DDL is reported.
    """
    if window.is_empty:
        return switch, []
    events: dict[Lsn, DdlEvent] = {}
    newest_events: list[DdlEvent] = []
    for reader, part in switch.parts(window):
        if part.is_empty:
            continue
        found = hook.get_ddl_events(reader.name, part.from_lsn, part.to_lsn)
        events.update((e.lsn, e) for e in found)
        if reader is switch.newest:
            newest_events.extend(found)
    ordered = [events[lsn] for lsn in sorted(events)]
    renames = [e for e in ordered if "sp_rename" in e.command.lower()]
    if renames:
        first = renames[0]
        raise SchemaChangeError(
            f"capture instance {switch.newest.name!r} (stream {switch.stream!r}, table {switch.newest.source}): "
            f"a column was renamed ({first.command!r} at LSN {first.lsn.hex}, {first.time or 'unknown time'}). "
            "The target cannot tell a renamed column from a new one, so nothing was written. Rename the column "
            "in the target table too (ALTER TABLE ... RENAME COLUMN), create a new capture instance, and "
            're-snapshot the table (trigger the DAG with conf {"resnapshot": ["' + switch.stream + '"]})'
        )
    newest = switch.newest
    drift = schema_drift(newest.columns, hook.get_source_columns(newest.name), newest_events)
    if drift.loses_data:
        if create_capture_instance:
            switch = create_successor(
                hook, switch, instances, reason=drift.describe(), state_key=state_key, log=log
            )
        else:
            check_schema_drift(newest, drift, on_schema_change=on_schema_change)
    if ordered and log is not None:
        log.warning(
            "%s: DDL on %s in this window (%s): %s",
            switch.stream,
            newest.source,
            "; ".join(f"{e.command} at {e.lsn.hex}" for e in ordered),
            drift.describe(),
        )
    return switch, ordered


def load_switches(
    hook: SqlServerCdcHook,
    names: Sequence[str],
    state_key: Callable[[str], str],
    *,
    require_keys: bool = True,
) -> tuple[list[InstanceSwitch], list[CaptureInstance]]:
    """
    Return each named stream's instances, and every capture instance of the database.

    :param hook: the source hook.
    :param names: capture instance names (the streams), or ``schema.table`` for a table's newest instance.
    :param state_key: a stream's name -> its watermark Variable.
    :param require_keys: raise NoKeyColumnsError for an instance without key columns.
    """
    if not names:
        raise ValueError("capture_instance is empty: give at least one capture instance")
    instances = hook.get_capture_instances()
    known = {i.name.lower() for i in instances}
    switches = []
    for name in names:
        stream = name
        if name.lower() not in known and read_lineage(state_key(name)) is None:
            stream = hook.get_named_capture_instances([name], with_columns=False)[0].name
        switches.append(resolve_switch(hook, stream, state_key(stream), instances))
    if require_keys:
        require_key_columns([i for s in switches for i in (s.old, s.new) if i is not None])
    return switches, instances


def resolve_streams(
    hook: SqlServerCdcHook, names: Sequence[str], state_key: Callable[[str], str]
) -> list[tuple[str, CaptureInstance]]:
    """
    Return each name's stream and the capture instance that answers for it now (columns not loaded).

    A capture instance name is its own stream; ``schema.table`` is the stream of the table's newest
    instance; a stream whose instance was disabled after a switch is answered by the oldest instance
    its lineage Variable's table has left.

    :param hook: the source hook.
    :param names: capture instance names (the streams), or ``schema.table``.
    :param state_key: a stream's name -> its watermark Variable.
    """
    instances = hook.get_capture_instances()
    resolved = []
    for name in names:
        own = next((i for i in instances if i.name.lower() == name.lower()), None)
        table = read_lineage(state_key(name)) if own is None else None
        found = _table_instances(instances, *table) if table else []
        if own is not None:
            resolved.append((own.name, own))
        elif found:
            resolved.append((name, found[0]))
        else:
            instance = hook.get_named_capture_instances([name], with_columns=False)[0]
            resolved.append((instance.name, instance))
    return resolved
