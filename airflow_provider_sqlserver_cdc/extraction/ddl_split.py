"""
A window part cut at the LSN of a ``DROP COLUMN`` of a captured column, so each side carries the columns of its time.

After ``ALTER TABLE … DROP COLUMN c`` the capture instance still has ``c`` and returns NULL for it
in every later change row ("About change data capture": a dropped tracked column is NULL from
then on). That NULL is no value: the target keeps the column, and its value there is the one ``c``
had when it was dropped. So the part is cut at the DDL's LSN: the rows before it are read with
``c``, the rows from it on without ``c``, and the merge changes only the columns a window carries
(``spark.merge.column_groups``).

A type change needs no cut: SQL Server changes the change table's column with the source's
(the same page), so every row of the window is read with the type after the DDL, and a widening
represents each earlier value exactly (a narrowing is refused before anything is written,
``spark.merge.source_type_changes``). An added column needs none either: the instance never
carries it, and its values come from the next instance, the blind-spot back-fill and the re-read
of added columns (``extraction.added_column_values``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.schema_drift import schema_drift

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
    from airflow_provider_sqlserver_cdc.extraction.instance_switch import InstanceSwitch
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow
    from airflow_provider_sqlserver_cdc.window.schema_drift import DdlEvent


def split_at_drops(
    instance: CaptureInstance,
    part: LsnWindow,
    events: Sequence[DdlEvent],
    source_columns: Sequence[CapturedColumn],
) -> list[tuple[CaptureInstance, LsnWindow]]:
    """
    Return the part's pieces, each with the instance columns to read it with, in LSN order.

    :param instance: the capture instance the part is read from (columns loaded).
    :param part: the window part.
    :param events: the DDL events inside the part, in LSN order.
    :param source_columns: the source table's columns now.
    """
    pieces: list[tuple[CaptureInstance, LsnWindow]] = []
    reader, rest = instance, part
    for event in events:
        if part.is_empty or not rest.from_lsn <= event.lsn <= rest.to_lsn:
            continue
        dropped = {name.lower() for name in schema_drift(reader.columns, source_columns, [event]).dropped}
        if not dropped:
            continue
        if event.lsn > rest.from_lsn:
            before = Lsn.from_int(int(event.lsn) - 1)
            pieces.append((reader, replace(rest, to_lsn=before, to_time=None)))
            rest = replace(rest, from_lsn=event.lsn, from_time=None, planned_from_lsn=None)
        reader = replace(reader, columns=tuple(c for c in reader.columns if c.name.lower() not in dropped))
    pieces.append((reader, rest))
    return pieces


def window_pieces(
    hook: SqlServerCdcHook, switch: InstanceSwitch, window: LsnWindow, events: Sequence[DdlEvent]
) -> list[tuple[CaptureInstance, LsnWindow]]:
    """
    Return the stream's window cut at the switch (``InstanceSwitch.parts``) and at each captured column's DROP.

    :param hook: the source hook (the source table's columns are read only when a part holds DDL).
    :param switch: the stream's instances.
    :param window: the stream's window of this run.
    :param events: the window's DDL events, in LSN order.
    """
    pieces: list[tuple[CaptureInstance, LsnWindow]] = []
    for instance, part in switch.parts(window):
        inside = [e for e in events if part.from_lsn <= e.lsn <= part.to_lsn]
        if inside and not part.is_empty:
            pieces.extend(split_at_drops(instance, part, inside, hook.get_source_columns(instance.name)))
        else:
            pieces.append((instance, part))
    return pieces
