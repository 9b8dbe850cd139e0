"""
Schema changes on the source inside a window: which captured data a DDL event makes the capture instance miss.

A capture instance keeps the column list and types it was created with. ``cdc.ddl_history``
records the DDL (``ALTER TABLE … ADD / DROP COLUMN / ALTER COLUMN``) run on its source table, at
an LSN. For each DDL event inside a window, the columns it names are compared with the captured
columns and the source table's columns now:

- a column the source has and the instance does not capture was **added**: its values are never
  captured (lost for the target);
- a captured column the source no longer has was **dropped**: the instance returns NULL for it
  from then on;
- a captured column whose source type changed was **altered**: the instance keeps the old type
  (values may be converted or cut).

Each of these loses or changes data in the target without the source saying so, so by default
the extract fails before writing anything, naming the DDL, its LSN and time, and the remedy (a
second capture instance and a snapshot of it into the same target table). ``on_schema_change``
``ignore`` records the events in the manifest and goes on. Events that change nothing captured
(a column added and dropped, an uncaptured column dropped) are recorded and logged only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.errors import SchemaChangeError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
    from airflow_provider_sqlserver_cdc.lsn import Lsn

ON_SCHEMA_CHANGE = ("fail", "ignore")
#: What an extract does about a DDL that makes its capture instance miss or change data, unless told otherwise.
DEFAULT_ON_SCHEMA_CHANGE = "fail"
_IDENTIFIER = re.compile(r"\[((?:[^\]]|\]\])+)\]|\"((?:[^\"]|\"\")+)\"|([A-Za-z_@#][\w@#$]*)")


@dataclass(frozen=True)
class DdlEvent:
    """One row of ``cdc.ddl_history`` for a capture instance."""

    command: str
    lsn: Lsn
    time: datetime | None = None
    required_column_update: bool = False

    def to_manifest(self) -> dict[str, Any]:
        """Return the JSON-ready entry of the window manifest's ``ddl_events``."""
        return {
            "command": self.command,
            "lsn": self.lsn.hex,
            "time": self.time.isoformat(sep=" ") if self.time else None,
            "required_column_update": self.required_column_update,
        }


@dataclass(frozen=True)
class SchemaDrift:
    """What the DDL events of a window did to the captured data."""

    events: tuple[DdlEvent, ...] = ()
    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    altered: tuple[tuple[str, str, str], ...] = field(default=())  # column, captured type, source type

    @property
    def loses_data(self) -> bool:
        """Whether the capture instance no longer follows the source table."""
        return bool(self.added or self.dropped or self.altered)

    def describe(self) -> str:
        """Return what changed, for messages."""
        parts = []
        if self.added:
            parts.append(f"added column(s) {', '.join(self.added)} are not captured")
        if self.dropped:
            parts.append(
                f"captured column(s) {', '.join(self.dropped)} were dropped (captured as NULL from then)"
            )
        for name, old, new in self.altered:
            parts.append(f"column {name} changed type from {old} (as captured) to {new}")
        return "; ".join(parts) or "no captured column changed"


def named_identifiers(command: str) -> set[str]:
    """Return the identifiers a DDL command names, unquoted and lower-cased.

    :param command: the ``ddl_command`` text.
    """
    names = set()
    for bracketed, quoted, bare in _IDENTIFIER.findall(command):
        name = bracketed.replace("]]", "]") if bracketed else quoted.replace('""', '"') if quoted else bare
        names.add(name.lower())
    return names


def schema_drift(
    captured: Sequence[CapturedColumn], source: Sequence[CapturedColumn], events: Sequence[DdlEvent]
) -> SchemaDrift:
    """Return what the window's DDL events did to the captured data.

    :param captured: the capture instance's columns (the change table's types).
    :param source: the source table's columns now.
    :param events: the DDL events of the window, in LSN order.
    """
    if not events:
        return SchemaDrift()
    named = set().union(*(named_identifiers(e.command) for e in events))
    captured_by_name = {c.name.lower(): c for c in captured}
    source_by_name = {c.name.lower(): c for c in source}
    added = tuple(
        c.name for c in source if c.name.lower() in named and c.name.lower() not in captured_by_name
    )
    dropped = tuple(
        c.name for c in captured if c.name.lower() in named and c.name.lower() not in source_by_name
    )
    altered = tuple(
        (c.name, c.describe(), source_by_name[c.name.lower()].describe())
        for c in captured
        if c.name.lower() in named
        and c.name.lower() in source_by_name
        and source_by_name[c.name.lower()].describe() != c.describe()
    )
    return SchemaDrift(tuple(events), added, dropped, altered)


def check_schema_drift(instance: CaptureInstance, drift: SchemaDrift, *, on_schema_change: str) -> None:
    """Raise SchemaChangeError when the drift loses data and ``on_schema_change`` is ``fail``.

    :param instance: the capture instance.
    :param drift: what the window's DDL events did.
    :param on_schema_change: ``fail`` or ``ignore``.
    """
    if on_schema_change not in ON_SCHEMA_CHANGE:
        raise ValueError(f"on_schema_change must be one of {ON_SCHEMA_CHANGE}, got {on_schema_change!r}")
    if not drift.loses_data or on_schema_change == "ignore":
        return
    events = "; ".join(f"{e.command!r} at LSN {e.lsn.hex} ({e.time or 'unknown time'})" for e in drift.events)
    schema, table = instance.source_schema, instance.source_table
    new_instance = f"{instance.name}_v2"[: tsql.CAPTURE_INSTANCE_MAX_CHARS]
    raise SchemaChangeError(
        f"capture instance {instance.name!r} (source {instance.source}) no longer follows its table: "
        f"{drift.describe()}. DDL: {events}. Nothing was written. A capture instance keeps the columns it "
        "was created with, so replicating on would lose or change these columns' data in the target. To "
        "follow the new schema: create a second capture instance, EXEC sys.sp_cdc_enable_table "
        f"@source_schema = N'{schema}', @source_name = N'{table}', @role_name = NULL, "
        f"@capture_instance = N'{new_instance}'; replace {instance.name} by {new_instance} in the DAG's "
        "tables (its first run snapshots it into the same target table, which gains the new columns); "
        f"then disable the old instance (sys.sp_cdc_disable_table ... @capture_instance = N'{instance.name}'). "
        "Or set extract.on_schema_change: ignore to replicate the captured columns as they are "
        "(docs/schema-changes.md)"
    )
