"""Table modes: what a target table holds of its source table (docs/history-targets.md).

- ``current`` (default): the current row of every key, merged under the LSN guard.
- ``history``: every version of every key (SCD type 2) with ``_valid_from``, ``_valid_to`` and
  ``_is_current``; a delete closes the key's version and leaves a tombstone version.
- ``changelog``: every change row as it came, with its LSN position and operation, appended once.
  A capture instance without key columns (no primary key, no ``@index_name``) is always one.

Standard library only: the job imports this module on the cluster, the settings in Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import (
    DELETED,
    HISTORY_COLUMNS,
    POSITION_COLUMNS,
    TARGET_META_COLUMNS,
)
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.spark.merge.window_reader import Window

CURRENT = "current"
HISTORY = "history"
CHANGELOG = "changelog"
TABLE_MODES = (CURRENT, HISTORY, CHANGELOG)
#: The mode of a capture instance no setting names.
DEFAULT_TABLE_MODE = CURRENT
#: What the pipeline does with a capture instance without key columns: replicate it as a change log
#: (``changelog``, the default) or refuse it in the extract (``refuse``, NoKeyColumnsError).
KEYLESS_CHOICES = (CHANGELOG, "refuse")
DEFAULT_KEYLESS = CHANGELOG
#: The table property that records a table's mode when the job creates it.
TABLE_MODE_PROPERTY = "sqlserver-cdc.table-mode"


def meta_columns(mode: str) -> tuple[tuple[str, str, bool], ...]:
    """Return the columns the job adds to a table of this mode: name, Spark SQL type, nullable.

    A change log has no ``_cdc_deleted``: its operation says what each row is.
    """
    if mode == HISTORY:
        return (*TARGET_META_COLUMNS, *HISTORY_COLUMNS)
    if mode == CHANGELOG:
        return tuple(c for c in TARGET_META_COLUMNS if c[0] != DELETED)
    return TARGET_META_COLUMNS


def identifier_columns(mode: str, key_columns: Sequence[str]) -> tuple[str, ...]:
    """Return the Iceberg identifier fields of a new table of this mode.

    A current-state table has one row per key; a history table one per key and LSN position (a
    version); a change log none (a keyless table may hold the same row twice).
    """
    if mode == HISTORY:
        return (*key_columns, *POSITION_COLUMNS)
    if mode == CHANGELOG:
        return ()
    return tuple(key_columns)


def source_key_columns(mode: str, identifier_fields: Sequence[str]) -> list[str]:
    """Return the source's key columns among a table's identifier fields (what ``plan_schema`` compares)."""
    if mode == HISTORY:
        return [f for f in identifier_fields if f.lower() not in POSITION_COLUMNS]
    return list(identifier_fields)


def parse_table_modes(items: Sequence[str]) -> dict[str, str]:
    """Parse ``CAPTURE_INSTANCE=MODE`` items (``--table-mode``) into capture instance -> mode.

    :raises MergeJobError: an item is not ``CI=MODE`` or names an unknown mode.
    """
    modes: dict[str, str] = {}
    for item in items:
        instance, sep, mode = item.partition("=")
        if not sep or not instance.strip() or mode.strip() not in TABLE_MODES:
            raise MergeJobError(
                f"--table-mode {item!r}: expected CAPTURE_INSTANCE=MODE, MODE one of {TABLE_MODES}"
            )
        modes[instance.strip()] = mode.strip()
    return modes


def check_table_modes(modes: Mapping[str, str], key: str = "table modes") -> None:
    """Refuse unknown modes in a capture instance -> mode mapping.

    :param key: what to call the mapping in the error.
    """
    for instance, mode in modes.items():
        if mode not in TABLE_MODES:
            raise MergeJobError(f"{key}: {instance} has mode {mode!r}, expected one of {TABLE_MODES}")


def window_mode(window: Window, modes: Mapping[str, str]) -> str:
    """Return the mode a window is merged in: its capture instance's setting, else by its key columns.

    A window without key columns is a change log unless a setting says otherwise (``check_plan_modes``
    then refuses it).
    """
    manifest = window.manifest
    named = modes.get(manifest.capture_instance)
    if named is not None:
        return named
    return CHANGELOG if not manifest.key_columns else DEFAULT_TABLE_MODE


def plan_mode(table: str, windows: Sequence[Window], modes: Mapping[str, str]) -> str:
    """Return the one mode of a target table's windows; refuse what cannot be merged that way.

    :param table: the target table, for messages.
    :param windows: the windows going into it.
    :param modes: capture instance -> mode (``--table-mode``).
    :raises MergeJobError: the windows ask for different modes, or a keyless window for a keyed mode.
    """
    found = {window_mode(w, modes) for w in windows}
    if len(found) > 1:
        raise MergeJobError(
            f"target table {table}: its windows are merged as {' and '.join(sorted(found))} "
            f"({', '.join(w.label for w in windows)}); give the capture instances one table mode or "
            "their own target tables (--target)"
        )
    mode = found.pop() if found else DEFAULT_TABLE_MODE
    if mode != CHANGELOG:
        for window in windows:
            if not window.manifest.key_columns:
                raise MergeJobError(
                    f"target table {table}: window {window.label} has no key columns (the table has no primary "
                    f"key and the capture instance no @index_name), so it cannot be merged as {mode}. Merge it "
                    f"as a change log (table mode changelog), or re-enable CDC with @index_name"
                )
    return mode


def mode_conflict(table: str, recorded: str | None, mode: str) -> str | None:
    """Return the error when an existing table was created in another mode than the one asked now.

    :param recorded: the table's ``sqlserver-cdc.table-mode`` property (None: a table of an older
        release or created by hand, taken as ``current``).
    """
    held = recorded or CURRENT
    if held == mode:
        return None
    return (
        f"target table {table} holds a {held} table (table property {TABLE_MODE_PROPERTY}), but its windows "
        f"are merged as {mode}; nothing was written. Merge into a new table (--target), or change the table "
        "mode back"
    )
