"""
Schema changes of a Change Tracking table, found by hashing its column list at every window.

Change Tracking records no DDL. Every version window reads the table's columns afresh, so the
window and the merge already carry an added or widened column (the merge adds it to the target,
or widens it) and the changed keys are read with the new column list. What CHANGETABLE cannot
give is the new column's value in rows that did not change since the DDL (``ADD c ... DEFAULT x
WITH VALUES``, ``ADD c ... NOT NULL DEFAULT x``): :func:`previous_columns` finds the column list
of the table's previous window (its manifest in the staging area), :func:`added_columns` the
columns added since, and the extract re-reads the rows that hold a value in one of them
(``window.version_windows``). :func:`describe_column_changes` says what changed, for the log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.manifest_store import read_manifest

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn

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
    import pyarrow.fs as pafs

    candidates: list[tuple[Lsn, str]] = []
    for info in filesystem.get_file_info(pafs.FileSelector(table_dir, allow_not_found=True)):
        if info.type != pafs.FileType.Directory or "_" not in info.base_name:
            continue
        try:
            start, end = (Lsn.from_hex(part) for part in info.base_name.rsplit("_", 1))
        except ValueError:
            continue
        if start <= end <= before:  # start > end: an empty window
            candidates.append((end, info.path))
    for _, path in sorted(candidates, reverse=True):
        try:
            return read_manifest(filesystem, path).columns
        except (OSError, ValueError):
            continue  # an unfinished window (no manifest): the one before it
    return None
