"""The ``_manifest.json`` of a window directory (format_version 1): build, write, read, validate."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import arrow_type

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance

MANIFEST_NAME = "_manifest.json"
FORMAT_VERSION = 1
KINDS = ("changes", "snapshot")
MODES = ("interval", "watermark", "snapshot")
OPERATION_NAMES = {1: "delete", 2: "insert", 3: "update_before", 4: "update_after"}


class ManifestError(ValueError):
    """A manifest that does not follow format_version 1."""


def zero_operation_counts() -> dict[str, int]:
    """The manifest's ``operation_counts`` with every operation at 0."""
    return {name: 0 for name in OPERATION_NAMES.values()}


def source_description(server: str, database: str, instance: CaptureInstance) -> dict[str, str]:
    """
    The manifest's ``source``: where the capture instance's table lives.

    :param server: ``host:port`` of the server (no credentials).
    :param database: the source database.
    :param instance: the capture instance.
    """
    return {
        "server": server,
        "database": database,
        "schema": instance.source_schema,
        "table": instance.source_table,
    }


def column_descriptions(instance: CaptureInstance) -> list[dict[str, Any]]:
    """The manifest's ``columns`` list of a capture instance loaded with its columns."""
    return [
        {
            "name": c.name,
            "ordinal": c.ordinal,
            "sql_type": c.sql_type,
            "max_length": c.max_length,
            "precision": c.precision,
            "scale": c.scale,
            "nullable": c.nullable,
            "arrow_type": str(arrow_type(c)),
        }
        for c in instance.columns
    ]


@dataclass
class ManifestFile:
    """One Parquet file of the window; ``path`` is relative to the window directory."""

    path: str
    rows: int
    bytes: int


@dataclass
class WindowManifest:
    """
    Everything a reader needs about one window (see docs/architecture.md, "Window format").

    ``from_lsn``/``to_lsn`` are the inclusive bounds actually queried, in ``0x`` hex form.
    """

    kind: str
    capture_instance: str
    source: dict[str, str]
    from_lsn: str
    to_lsn: str
    from_time: str | None
    to_time: str | None
    mode: str
    row_filter_option: str
    key_columns: list[str]
    columns: list[dict[str, Any]]
    files: list[ManifestFile] = field(default_factory=list)
    row_count: int = 0
    operation_counts: dict[str, int] = field(default_factory=zero_operation_counts)
    created_at: str | None = None
    dag_id: str | None = None
    run_id: str | None = None
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON object, keys in the documented order."""
        data = asdict(self)
        ordered = {"format_version": data.pop("format_version")}
        ordered.update(data)
        return ordered

    def to_json(self) -> str:
        """Return the manifest as JSON text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WindowManifest:
        """Build and validate a manifest from its JSON object."""
        validate_manifest(data)
        values = dict(data)
        values["files"] = [ManifestFile(**f) for f in data["files"]]
        return cls(**values)

    @classmethod
    def from_json(cls, text: str | bytes) -> WindowManifest:
        """Parse and validate manifest JSON text."""
        return cls.from_dict(json.loads(text))


def validate_manifest(data: dict[str, Any]) -> None:
    """
    Raise ManifestError unless ``data`` is a valid format_version 1 manifest.

    :param data: the parsed JSON object.
    """
    if data.get("format_version") != FORMAT_VERSION:
        raise ManifestError(f"Unsupported manifest format_version {data.get('format_version')!r}; expected 1")
    required = [
        "kind",
        "capture_instance",
        "source",
        "from_lsn",
        "to_lsn",
        "from_time",
        "to_time",
        "mode",
        "row_filter_option",
        "key_columns",
        "columns",
        "files",
        "row_count",
        "operation_counts",
    ]
    missing = [k for k in required if k not in data]
    if missing:
        raise ManifestError(
            f"Manifest of {data.get('capture_instance')!r} lacks fields: {', '.join(missing)}"
        )
    if data["kind"] not in KINDS:
        raise ManifestError(f"Manifest kind must be one of {KINDS}, got {data['kind']!r}")
    if data["mode"] not in MODES:
        raise ManifestError(f"Manifest mode must be one of {MODES}, got {data['mode']!r}")
    for key in ("from_lsn", "to_lsn"):
        try:
            Lsn.from_hex(data[key])
        except ValueError as err:
            raise ManifestError(f"Manifest {key}: {err}") from err
    if Lsn.from_hex(data["from_lsn"]) > Lsn.from_hex(data["to_lsn"]):
        raise ManifestError(f"Manifest from_lsn {data['from_lsn']} is above to_lsn {data['to_lsn']}")
    total = 0
    for f in data["files"]:
        if set(f) != {"path", "rows", "bytes"} or "/" in f["path"] or f["path"].startswith("."):
            raise ManifestError(f"Bad file entry in manifest: {f!r}")
        total += f["rows"]
    if total != data["row_count"]:
        raise ManifestError(f"Manifest row_count {data['row_count']} != sum of file rows {total}")
    if sum(data["operation_counts"].values()) != data["row_count"]:
        raise ManifestError("Manifest operation_counts do not add up to row_count")


def write_manifest(filesystem: pafs.FileSystem, window_dir: str, manifest: WindowManifest) -> str:
    """Write ``_manifest.json`` atomically (:func:`write_atomically`); return its path on ``filesystem``."""
    validate_manifest(manifest.to_dict())
    return write_atomically(filesystem, window_dir, MANIFEST_NAME, manifest.to_json().encode())


def write_atomically(filesystem: pafs.FileSystem, directory: str, name: str, payload: bytes) -> str:
    """
    Write ``payload`` to ``{directory}/{name}`` so that readers see the old file or the whole new one.

    On a local filesystem the bytes go to a hidden temporary name and are renamed into place;
    object stores make a single upload visible atomically when the stream closes.

    :param filesystem: the target filesystem.
    :param directory: an existing directory on it.
    :param name: the file name.
    :param payload: the whole content.
    :return: the path written.
    """
    final = f"{directory}/{name}"
    if isinstance(filesystem, pafs.LocalFileSystem):
        tmp = f"{directory}/.{name}.tmp"
        with filesystem.open_output_stream(tmp) as out:
            out.write(payload)
        filesystem.move(tmp, final)
    else:
        with filesystem.open_output_stream(final) as out:
            out.write(payload)
    return final


def read_manifest(filesystem: pafs.FileSystem, window_dir: str) -> WindowManifest:
    """Read and validate the manifest of a window directory."""
    with filesystem.open_input_stream(f"{window_dir}/{MANIFEST_NAME}") as src:
        return WindowManifest.from_json(src.read())
