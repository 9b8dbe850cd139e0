"""
A small pure-Python apply of window manifests, for fast checks of snapshots and change windows.

It follows the merge job's rules (docs/merge-job.md): per key, the change with the highest LSN
position (``__$start_lsn``, ``__$seqval``, ``__$operation``) wins if it is newer than what the
target holds; operations 1 and 3 delete; a snapshot also retires target rows it does not hold
that are older than its LSN. Not the merge job itself: the Spark test uses that.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

DELETING = (1, 3)
META = ("__$start_lsn", "__$seqval", "__$operation", "__$update_mask", "__$commit_time")

Position = tuple[bytes, bytes, int]


def read_window(window_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest and every row of a window directory, in file order."""
    window_dir = Path(window_dir)
    manifest = json.loads((window_dir / "_manifest.json").read_text())
    rows: list[dict[str, Any]] = []
    for entry in manifest["files"]:
        rows.extend(pq.read_table(window_dir / entry["path"]).to_pylist())
    assert len(rows) == manifest["row_count"]
    return manifest, rows


class ReplayTarget:
    """The target table of one capture instance: key -> (position, row or None when deleted)."""

    def __init__(self) -> None:
        self.state: dict[tuple[Any, ...], tuple[Position, dict[str, Any] | None]] = {}

    def apply(self, window_dir: str | Path) -> dict[str, Any]:
        """Apply one window (changes or snapshot); return its manifest."""
        manifest, rows = read_window(window_dir)
        keys = manifest["key_columns"]
        net: dict[tuple[Any, ...], tuple[Position, dict[str, Any]]] = {}
        for row in rows:
            key = tuple(row[k] for k in keys)
            position = (row["__$start_lsn"], row["__$seqval"], row["__$operation"])
            if key not in net or net[key][0] < position:
                net[key] = (position, row)
        for key, (position, row) in net.items():
            held = self.state.get(key)
            if held is None or held[0] < position:
                value = (
                    None
                    if row["__$operation"] in DELETING
                    else {k: v for k, v in row.items() if k not in META}
                )
                self.state[key] = (position, value)
        if manifest["kind"] == "snapshot":
            lsn = bytes.fromhex(manifest["to_lsn"][2:])
            for key, (position, _) in list(self.state.items()):
                if key not in net and position < (lsn, lsn, 2):
                    self.state[key] = ((lsn, lsn, 1), None)
        return manifest

    def rows(self) -> dict[tuple[Any, ...], dict[str, Any]]:
        """The live rows by key."""
        return {key: row for key, (_, row) in self.state.items() if row is not None}
