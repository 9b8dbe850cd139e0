"""
Chunk progress of a running snapshot: ``{base}/{capture_instance}/_snapshot_progress.json``.

Written after every completed key-range chunk (atomically, like the manifest) and removed once
the snapshot's manifest is written. A failed snapshot resumes from it (see docs/snapshot.md).
Key values are stored with their Python type, so the next chunk's keyset parameters are the
same values the driver returned.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import pyarrow.fs as pafs

from airflow_provider_sqlserver_cdc.parquet.manifest_store import write_atomically
from airflow_provider_sqlserver_cdc.window.manifest import ManifestFile

PROGRESS_NAME = "_snapshot_progress.json"
PROGRESS_VERSION = 1


def encode_key_value(value: Any) -> dict[str, Any]:
    """A JSON object that :func:`decode_key_value` turns back into the same Python value."""
    if value is None:
        return {"type": "null", "value": None}
    if isinstance(value, bool):
        return {"type": "bool", "value": value}
    if isinstance(value, int):
        return {"type": "int", "value": str(value)}
    if isinstance(value, float):
        return {"type": "float", "value": value.hex()}
    if isinstance(value, Decimal):
        return {"type": "decimal", "value": str(value)}
    if isinstance(value, str):
        return {"type": "str", "value": value}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"type": "bytes", "value": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, datetime):
        return {"type": "datetime", "value": value.isoformat()}
    if isinstance(value, date):
        return {"type": "date", "value": value.isoformat()}
    if isinstance(value, time):
        return {"type": "time", "value": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {"type": "uuid", "value": str(value)}
    raise TypeError(f"Cannot record a key value of type {type(value).__name__} in the snapshot progress")


_DECODERS = {
    "null": lambda v: None,
    "bool": bool,
    "int": int,
    "float": float.fromhex,
    "decimal": Decimal,
    "str": str,
    "bytes": base64.b64decode,
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "time": time.fromisoformat,
    "uuid": uuid.UUID,
}


def decode_key_value(data: dict[str, Any]) -> Any:
    """The Python value of :func:`encode_key_value`'s output."""
    try:
        return _DECODERS[data["type"]](data["value"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"Bad key value in the snapshot progress: {data!r}") from err


@dataclass
class ChunkRecord:
    """One completed key-range chunk: its part files, rows, and the last key it read (None: end of table)."""

    files: list[ManifestFile]
    rows: int
    last_key: list[dict[str, Any]] | None

    def last_key_values(self) -> list[Any] | None:
        """The last key as Python values."""
        return None if self.last_key is None else [decode_key_value(v) for v in self.last_key]


@dataclass
class SnapshotProgress:
    """
    What a snapshot of one capture instance has completed so far.

    :param capture_instance: the capture instance.
    :param source: server, database, schema, table (as in the manifest).
    :param instance_start_lsn: ``start_lsn`` of the capture instance when the snapshot began.
    :param snapshot_lsn: the LSN the snapshot is consistent at (every row is tagged with it).
    :param snapshot_time: the server time of that LSN, UTC ISO 8601.
    :param method: ``snapshot_isolation`` or ``table_lock``.
    :param window_dir: the snapshot's window directory name (``{from_lsn}_{to_lsn}``).
    :param columns: the manifest's column descriptions (a changed table restarts the snapshot).
    :param key_columns: the key columns used for the chunks.
    :param read_lsns: the LSN of every transaction that read chunks (more than one after a resume).
    :param chunks: the completed chunks in key order.
    """

    capture_instance: str
    source: dict[str, str]
    instance_start_lsn: str
    snapshot_lsn: str
    snapshot_time: str
    method: str
    window_dir: str
    columns: list[dict[str, Any]]
    key_columns: list[str]
    read_lsns: list[str] = field(default_factory=list)
    chunks: list[ChunkRecord] = field(default_factory=list)
    started_at: str | None = None
    version: int = PROGRESS_VERSION

    @property
    def files(self) -> list[ManifestFile]:
        """Every part file of the completed chunks, in order."""
        return [f for chunk in self.chunks for f in chunk.files]

    @property
    def rows(self) -> int:
        """Rows in the completed chunks."""
        return sum(chunk.rows for chunk in self.chunks)

    @property
    def finished(self) -> bool:
        """Whether the last completed chunk reached the end of the table."""
        return bool(self.chunks) and self.chunks[-1].last_key is None

    def to_json(self) -> str:
        """The file's JSON text."""
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> SnapshotProgress:
        """Parse the file's JSON text."""
        data = json.loads(text)
        if data.get("version") != PROGRESS_VERSION:
            raise ValueError(f"Unsupported snapshot progress version {data.get('version')!r}")
        data["chunks"] = [
            ChunkRecord(
                files=[ManifestFile(**f) for f in chunk["files"]],
                rows=int(chunk["rows"]),
                last_key=chunk["last_key"],
            )
            for chunk in data["chunks"]
        ]
        return cls(**data)


def progress_path(instance_dir: str) -> str:
    """Path of the progress file of the capture instance directory ``{base}/{capture_instance}``."""
    return f"{instance_dir}/{PROGRESS_NAME}"


def write_progress(filesystem: pafs.FileSystem, instance_dir: str, progress: SnapshotProgress) -> None:
    """Write the progress file atomically, as the manifest is written (:func:`write_atomically`)."""
    filesystem.create_dir(instance_dir, recursive=True)
    write_atomically(filesystem, instance_dir, PROGRESS_NAME, progress.to_json().encode())


def read_progress(filesystem: pafs.FileSystem, instance_dir: str) -> SnapshotProgress | None:
    """Return the progress of an unfinished snapshot, or None when there is none (or it is unreadable)."""
    path = progress_path(instance_dir)
    if filesystem.get_file_info(path).type != pafs.FileType.File:
        return None
    with filesystem.open_input_stream(path) as src:
        text = src.read()
    try:
        return SnapshotProgress.from_json(text)
    except (ValueError, TypeError, KeyError):
        return None


def remove_progress(filesystem: pafs.FileSystem, instance_dir: str) -> None:
    """Delete the progress file (the snapshot is complete or abandoned)."""
    path = progress_path(instance_dir)
    if filesystem.get_file_info(path).type == pafs.FileType.File:
        filesystem.delete_file(path)
