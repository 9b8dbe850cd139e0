"""
Schema changes of a Change Tracking table, found by hashing its column list at every window.

Change Tracking records no DDL. Every version window reads the table's columns afresh, so the
window and the merge already carry an added or widened column (the merge adds it to the target,
or widens it) and the changed keys are read with the new column list. What CHANGETABLE cannot
give is the new column's value in rows that did not change since the DDL (``ADD c ... DEFAULT x
WITH VALUES``, ``ADD c ... NOT NULL DEFAULT x``): :func:`columns_before` finds the column list
the table had up to the window's last synchronized version, :func:`added_columns` the columns
added since, and the extract re-reads the rows that hold a value in one of them
(``extraction.version_windows``). :func:`describe_column_changes` says what changed, for the log.

The column lists live in ``{base}/{table}/_column_history.json`` next to the table's windows: one
entry per column list, with the version of the first window that had it, appended by
:func:`record_columns` after a window with a different list (a few entries over a table's life,
so a run reads one small file however many windows the staging area holds). Without the file
(staging written before it existed) the newest window manifest is read instead, once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.manifest_store import read_manifest, write_atomically

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn

#: the column history of a tracked table, in its directory of windows
HISTORY_NAME = "_column_history.json"
#: the fields of a manifest column that make up a table's shape
SHAPE_FIELDS = ("name", "sql_type", "max_length", "precision", "scale", "nullable")


def column_hash(columns: Sequence[Mapping[str, Any]]) -> str:
    """A digest of a column list (manifest ``columns``): names, types, lengths, nullability, in order."""
    shape = [[column.get(field) for field in SHAPE_FIELDS] for column in columns]
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:16]


def describe_column_changes(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The differences between two column lists, in words (empty when their hashes agree)."""
    if column_hash(before) == column_hash(after):
        return []
    old = {c["name"].lower(): c for c in before}
    new = {c["name"].lower(): c for c in after}
    changes = [f"added {new[n]['name']} {new[n]['sql_type']}" for n in new if n not in old]
    changes += [f"dropped {old[n]['name']}" for n in old if n not in new]
    for name in new.keys() & old.keys():
        was = [old[name].get(f) for f in SHAPE_FIELDS[1:]]
        now = [new[name].get(f) for f in SHAPE_FIELDS[1:]]
        if was != now:
            changes.append(
                f"changed {new[name]['name']} from {was} to {now} (type, length, precision, scale, nullable)"
            )
    return changes or ["column order changed"]


def added_columns(before: Sequence[Mapping[str, Any]], after: Sequence[CapturedColumn]) -> list[str]:
    """
    The columns of ``after`` whose name is not in ``before`` (case-insensitive), in column order.

    :param before: the previous window's manifest ``columns``.
    :param after: the table's columns now.
    """
    old = {c["name"].lower() for c in before}
    return [c.name for c in after if c.name.lower() not in old]


def previous_columns(filesystem: pafs.FileSystem, table_dir: str, before: Lsn) -> list[dict[str, Any]] | None:
    """
    The columns of the table's newest window that ends at or below ``before``, or None when there is none.

    Empty windows (no version in their range: the directory ``{last + 1}_{last}``) and unfinished
    ones (no manifest) are passed over: the merge skips an empty window, so a column list it
    carries never reached the target; the next window that holds a version compares with the
    window before it and re-reads what a column added meanwhile holds.

    :param filesystem: the filesystem of the windows.
    :param table_dir: ``{base}/{name}`` on it.
    :param before: the new window's last synchronized position.
    """
    return newest_window_columns(filesystem, table_dir, lambda start, end: start <= end <= before)


def newest_window_columns(
    filesystem: pafs.FileSystem, table_dir: str, keep: Callable[[Lsn, Lsn], bool]
) -> list[dict[str, Any]] | None:
    """
    The columns of the newest (by last LSN) finished window whose bounds ``keep`` accepts, or None.

    :param filesystem: the filesystem of the windows.
    :param table_dir: ``{base}/{name}`` on it.
    :param keep: (first LSN, last LSN) of a window directory -> whether it is a candidate.
    """
    import pyarrow.fs as pafs

    candidates: list[tuple[Lsn, str]] = []
    for info in filesystem.get_file_info(pafs.FileSelector(table_dir, allow_not_found=True)):
        if info.type != pafs.FileType.Directory or "_" not in info.base_name:
            continue
        try:
            start, end = (Lsn.from_hex(part) for part in info.base_name.rsplit("_", 1))
        except ValueError:
            continue
        if keep(start, end):
            candidates.append((end, info.path))
    for _, path in sorted(candidates, reverse=True):
        try:
            return read_manifest(filesystem, path).columns
        except (OSError, ValueError):
            continue  # an unfinished window (no manifest): the one before it
    return None


def _read_history(filesystem: pafs.FileSystem, table_dir: str) -> list[dict[str, Any]] | None:
    """The entries of the table's column history, oldest first; None when it has none."""
    try:
        with filesystem.open_input_stream(f"{table_dir}/{HISTORY_NAME}") as stream:
            entries = json.loads(stream.read())["entries"]
    except FileNotFoundError:
        return None
    return sorted(entries, key=lambda e: Lsn.from_hex(e["through"]))


def columns_before(filesystem: pafs.FileSystem, table_dir: str, before: Lsn) -> list[dict[str, Any]] | None:
    """
    The table's column list as of ``before`` (a window's last synchronized position), or None when unknown.

    :param filesystem: the filesystem of the windows.
    :param table_dir: ``{base}/{name}`` on it.
    :param before: the new window's last synchronized position.
    """
    history = _read_history(filesystem, table_dir)
    if history is None:
        return previous_columns(filesystem, table_dir, before)
    known = [e for e in history if Lsn.from_hex(e["through"]) <= before]
    return known[-1]["columns"] if known else None


def record_columns(
    filesystem: pafs.FileSystem,
    table_dir: str,
    through: Lsn,
    columns: Sequence[Mapping[str, Any]],
    before: Sequence[Mapping[str, Any]] | None,
) -> None:
    """
    Add the column list of a finished window that holds a version to the history, when it differs from ``before``.

    An empty window must not be recorded: the merge skips it, so its column list never reached the
    target, and the next window must still compare with the list before it.

    :param through: the window's last position (its stop version).
    :param columns: the window's columns (manifest ``columns``).
    :param before: what :func:`columns_before` gave for the window.
    """
    history = _read_history(filesystem, table_dir)
    if history is not None and before is not None and column_hash(before) == column_hash(columns):
        return
    entries = [e for e in history or [] if e["through"] != through.hex]
    entries.append({"through": through.hex, "hash": column_hash(columns), "columns": list(columns)})
    entries.sort(key=lambda e: Lsn.from_hex(e["through"]))
    write_atomically(filesystem, table_dir, HISTORY_NAME, json.dumps({"entries": entries}, indent=1).encode())
