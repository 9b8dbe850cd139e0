"""
Schema changes of a Change Tracking table, found by hashing its column list at every window.

Change Tracking records no DDL. Every version window reads the table's columns afresh, so the
window and the merge already carry an added or widened column (the merge adds it to the target)
and the changed keys are read with the new column list. What the window cannot carry is the new
column's value in rows that did not change since: :func:`describe_column_changes` compares the
window's columns with those of the table's previous window (its manifest in the staging area)
and the extract logs the difference at WARNING with the remedy (re-snapshot the table).
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


def previous_columns(filesystem: pafs.FileSystem, table_dir: str, before: Lsn) -> list[dict[str, Any]] | None:
    """
    The columns of the table's newest window that ends at or below ``before``, or None when there is none.

    :param filesystem: the filesystem of the windows.
    :param table_dir: ``{base}/{name}`` on it.
    :param before: the new window's last synchronized position.
    """
    import pyarrow.fs as pafs

    newest: tuple[Lsn, str] | None = None
    for info in filesystem.get_file_info(pafs.FileSelector(table_dir, allow_not_found=True)):
        if info.type != pafs.FileType.Directory or "_" not in info.base_name:
            continue
        try:
            end = Lsn.from_hex(info.base_name.rsplit("_", 1)[1])
        except ValueError:
            continue
        if end <= before and (newest is None or end > newest[0]):
            newest = (end, info.path)
    if newest is None:
        return None
    try:
        return read_manifest(filesystem, newest[1]).columns
    except (OSError, ValueError):
        return None  # an unfinished window (no manifest): nothing to compare with
