"""The ``_manifest.json`` of a window directory (format_version 1): its fields and its one validation.

Standard library only: the extraction writes manifests with it (``parquet.manifest_store``) and the
merge job reads them with it on the cluster. The format is described in docs/architecture.md
("Window format").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.net_effect import OPERATION_NAMES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance

MANIFEST_NAME = "_manifest.json"
FORMAT_VERSION = 1
#: A window's kind: the changes of a range, or a consistent copy of the table (all inserts).
CHANGES, SNAPSHOT = "changes", "snapshot"
#: A reconcile repair (docs/reconcile.md): rows read at one consistent LSN, merged under the LSN guard like
#: changes, never skipped as applied and never recorded as an applied range.
REPAIR = "repair"
KINDS = (CHANGES, SNAPSHOT, REPAIR)
#: How a run chooses its window: the run's data interval, or the range after the stored watermark.
INTERVAL, WATERMARK = "interval", "watermark"
WINDOW_MODES = (INTERVAL, WATERMARK)
#: Windows follow the Airflow data interval unless a task is told otherwise.
DEFAULT_WINDOW_MODE = INTERVAL
#: The mode a window records: a planned window's, or ``snapshot`` for a consistent copy.
MODES = (*WINDOW_MODES, SNAPSHOT)
#: The row filter option a snapshot window records: every row once, as an insert.
SNAPSHOT_ROW_FILTER_OPTION = "all"
#: The prefix of the columns the merge adds to a target table; no captured column may use it.
RESERVED_COLUMN_PREFIX = "_cdc_"
REQUIRED_FIELDS = (
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
)


class ManifestError(ValueError):
    """A window's manifest (or its files) does not follow the window format; the message says what to do."""


def zero_operation_counts() -> dict[str, int]:
    """Return the manifest's ``operation_counts`` with every operation at 0."""
    return {name: 0 for name in OPERATION_NAMES.values()}


def source_description(server: str, database: str, instance: CaptureInstance) -> dict[str, str]:
    """
    Return the manifest's ``source``: where the capture instance's table lives.

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


@dataclass
class ManifestFile:
    """One Parquet file of the window; ``path`` is relative to the window directory, ``bytes`` -1 if unknown."""

    path: str
    rows: int
    bytes: int = -1


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
    applied_through: str | None = None
    healed_gap: dict[str, Any] | None = None
    ddl_events: list[dict[str, Any]] | None = None
    # Schema changes (extraction.instance_switch, extraction.blind_spot): the capture instance the rows
    # were read from when it is not ``capture_instance`` (the stream's name), and a back-fill's
    # consistent read.
    read_instance: str | None = None
    backfill: dict[str, Any] | None = None
    # Column masking (column_masking): column -> rule (hash, mask, truncate(n), drop); never the salt.
    masking: dict[str, str] | None = None
    format_version: int = FORMAT_VERSION

    @property
    def label(self) -> str:
        """Short name for messages: capture instance and LSN bounds."""
        return f"{self.capture_instance} {self.from_lsn}_{self.to_lsn}"

    @property
    def lsn_range(self) -> tuple[int, int]:
        """The inclusive LSN range the window brings up to date.

        A snapshot covers every LSN up to its own. A change window that continues an applied-through
        LSN (``applied_through``, set by the contiguity guard) covers everything after it: the source
        had no other change of the instance between it and ``from_lsn``.
        """
        if self.kind == "snapshot":
            first = 0
        elif self.applied_through is not None:
            first = int(Lsn.from_hex(self.applied_through)) + 1
        else:
            first = int(Lsn.from_hex(self.from_lsn))
        return first, int(Lsn.from_hex(self.to_lsn))

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
    def from_dict(cls, data: Any, uri: str = MANIFEST_NAME, *, key_required: bool = False) -> WindowManifest:
        """Build a manifest from its JSON object, validated by :func:`validate_manifest`.

        :param data: the parsed JSON object; fields this version does not know are ignored.
        :param uri: where it was read from, for messages.
        :param key_required: refuse a window without key columns (the merge needs them).
        """
        validate_manifest(data, uri, key_required=key_required)
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["files"] = [ManifestFile(f["path"], f["rows"], int(f.get("bytes", -1))) for f in data["files"]]
        return cls(**values)

    @classmethod
    def from_json(
        cls, text: str | bytes, uri: str = MANIFEST_NAME, *, key_required: bool = False
    ) -> WindowManifest:
        """Parse and validate manifest JSON text.

        :param text: the JSON text.
        :param uri: where it was read from, for messages.
        :param key_required: refuse a window without key columns (the merge needs them).
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ManifestError(
                f"window manifest {uri} is not valid JSON ({err}); re-run the extract task"
            ) from None
        return cls.from_dict(data, uri, key_required=key_required)


def build_manifest(
    kind: str,
    *,
    capture_instance: str,
    source: Mapping[str, str],
    to_lsn: Lsn,
    key_columns: Sequence[str],
    columns: Sequence[Mapping[str, Any]],
    files: Sequence[ManifestFile],
    from_lsn: Lsn | None = None,
    mode: str | None = None,
    row_filter_option: str | None = None,
    operation_counts: Mapping[str, int] | None = None,
    from_time: datetime | str | None = None,
    to_time: datetime | str | None = None,
    dag_id: str | None = None,
    run_id: str | None = None,
    **details: Any,
) -> WindowManifest:
    """
    Return the manifest of a window whose files are written: the one place every producer builds it.

    A ``snapshot`` window covers ``0x0…0`` .. ``to_lsn`` in mode ``snapshot`` with row filter ``all``,
    every row an insert; a ``changes`` window names its range, mode, row filter and counts. The row
    count is the sum of the operation counts; ``created_at`` is now.

    :param kind: ``changes`` or ``snapshot``.
    :param capture_instance: the stream the window is filed and merged under.
    :param source: where the table lives (:func:`source_description`).
    :param to_lsn: the last LSN the window covers.
    :param key_columns: the key column names.
    :param columns: the column descriptions (``parquet.type_mapping.column_descriptions``).
    :param files: the window's Parquet files, closed.
    :param from_lsn: the first LSN (``changes`` only).
    :param mode: ``interval`` or ``watermark`` (``changes`` only).
    :param row_filter_option: the row filter the rows were read with (``changes`` only).
    :param operation_counts: rows per operation name (``changes``; a snapshot counts its files' rows).
    :param from_time: UTC start of the range, when known.
    :param to_time: UTC end of the range (a snapshot: its commit time), when known.
    :param dag_id: recorded for readers.
    :param run_id: recorded for readers.
    :param details: the optional fields of the format: ``applied_through``, ``healed_gap``,
        ``ddl_events``, ``read_instance``, ``backfill``, ``masking`` (None leaves one out).
    """
    unknown = sorted(set(details) - _DETAIL_FIELDS)
    if unknown:
        raise TypeError(f"build_manifest() got unknown manifest fields: {', '.join(unknown)}")
    if kind == SNAPSHOT:
        if from_lsn is not None or mode is not None or row_filter_option is not None:
            raise ValueError(
                "a snapshot window covers 0x0..to_lsn in mode 'snapshot': give no range, mode or filter"
            )
        from_lsn, mode, row_filter_option = Lsn.zero(), SNAPSHOT, SNAPSHOT_ROW_FILTER_OPTION
        if operation_counts is None:
            operation_counts = {**zero_operation_counts(), "insert": sum(f.rows for f in files)}
    elif kind != CHANGES:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if from_lsn is None or mode is None or row_filter_option is None or operation_counts is None:
        raise ValueError("a changes window needs from_lsn, mode, row_filter_option and operation_counts")
    return WindowManifest(
        kind=kind,
        capture_instance=capture_instance,
        source=dict(source),
        from_lsn=from_lsn.hex,
        to_lsn=to_lsn.hex,
        from_time=_iso(from_time),
        to_time=_iso(to_time),
        mode=mode,
        row_filter_option=row_filter_option,
        key_columns=list(key_columns),
        columns=[dict(c) for c in columns],
        files=list(files),
        row_count=sum(operation_counts.values()),
        operation_counts=dict(operation_counts),
        created_at=datetime.now(UTC).isoformat(),
        dag_id=dag_id,
        run_id=run_id,
        **details,
    )


_DETAIL_FIELDS = frozenset(
    {"applied_through", "healed_gap", "ddl_events", "read_instance", "backfill", "masking"}
)


def _iso(time: datetime | str | None) -> str | None:
    return time.isoformat() if isinstance(time, datetime) else time


def _require(condition: bool, uri: str, problem: str) -> None:
    if not condition:
        raise ManifestError(
            f"invalid window manifest {uri}: {problem}. The window was not applied; re-run the extract "
            "task for this window (it rewrites the window and its manifest)."
        )


def _is_lsn(value: Any) -> bool:
    try:
        Lsn.from_hex(value)
    except ValueError:
        return False
    return True


def validate_manifest(data: Any, uri: str = MANIFEST_NAME, *, key_required: bool = False) -> None:
    """
    Raise ManifestError unless ``data`` is a valid format_version 1 manifest; the message names the problem.

    :param data: the parsed JSON object.
    :param uri: where the manifest was read from (or is written to), for messages.
    :param key_required: refuse a window without key columns: the merge needs them, while the
        extraction may write keyless windows for other readers (``require_key_columns=False``).
    """
    _require(isinstance(data, dict), uri, "the document is not a JSON object")
    _require(
        data.get("format_version") == FORMAT_VERSION,
        uri,
        f"format_version is {data.get('format_version')!r}, this version reads {FORMAT_VERSION}",
    )
    missing = [name for name in REQUIRED_FIELDS if name not in data]
    _require(not missing, uri, f"it lacks fields: {', '.join(missing)}")
    _require(data["kind"] in KINDS, uri, f"kind is {data['kind']!r}, expected one of {KINDS}")
    _require(data["mode"] in MODES, uri, f"mode is {data['mode']!r}, expected one of {MODES}")
    ci = data["capture_instance"]
    _require(isinstance(ci, str) and bool(ci), uri, "capture_instance is missing")
    for bound in ("from_lsn", "to_lsn"):
        _require(_is_lsn(data[bound]), uri, f"{bound} {data[bound]!r} is not an LSN")
    _require(Lsn.from_hex(data["from_lsn"]) <= Lsn.from_hex(data["to_lsn"]), uri, "from_lsn is above to_lsn")
    through = data.get("applied_through")
    if through is not None:
        _require(_is_lsn(through), uri, f"applied_through {through!r} is not an LSN")
        _require(
            Lsn.from_hex(through) < Lsn.from_hex(data["from_lsn"]),
            uri,
            f"applied_through {through} is not below from_lsn {data['from_lsn']}",
        )
    _validate_columns(data, uri, key_required)
    _validate_files(data, uri)


def _validate_columns(data: dict[str, Any], uri: str, key_required: bool) -> None:
    columns = data["columns"]
    _require(isinstance(columns, list) and bool(columns), uri, "columns is missing or empty")
    names = []
    for column in columns:
        _require(
            isinstance(column, dict)
            and isinstance(column.get("name"), str)
            and isinstance(column.get("sql_type"), str),
            uri,
            f"column entry {column!r} needs 'name' and 'sql_type'",
        )
        _require(
            not column["name"].startswith(RESERVED_COLUMN_PREFIX),
            uri,
            f"column {column['name']} uses the reserved {RESERVED_COLUMN_PREFIX} prefix",
        )
        names.append(column["name"])
    _require(len({n.lower() for n in names}) == len(names), uri, f"duplicate column names in {names}")
    keys = data["key_columns"]
    _require(
        isinstance(keys, list) and (bool(keys) or not key_required),
        uri,
        f"capture instance {data['capture_instance']} has no key columns; give the table a primary key or "
        "create the capture instance with @index_name",
    )
    lower_names = {n.lower() for n in names}
    for key in keys:
        _require(
            isinstance(key, str) and key.lower() in lower_names,
            uri,
            f"key column {key!r} is not among the columns",
        )


def _validate_files(data: dict[str, Any], uri: str) -> None:
    files = data["files"]
    _require(isinstance(files, list), uri, "files is not a list")
    for entry in files:
        _require(
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("rows"), int)
            and entry["rows"] >= 0
            and isinstance(entry.get("bytes", -1), int),
            uri,
            f"bad file entry {entry!r}: it needs 'path', a non-negative 'rows' and (optional) 'bytes'",
        )
        path = entry["path"]
        _require(
            not path.startswith(("/", ".")) and ":" not in path and ".." not in path.split("/"),
            uri,
            f"bad file entry {entry!r}: file path {path!r} must be relative to the window directory",
        )
    row_count = data["row_count"]
    _require(isinstance(row_count, int) and row_count >= 0, uri, f"row_count {row_count!r} is not a count")
    listed = sum(entry["rows"] for entry in files)
    _require(listed == row_count, uri, f"row_count is {row_count} but the files list {listed} rows")
    counts = data["operation_counts"]
    _require(
        isinstance(counts, dict) and all(isinstance(n, int) for n in counts.values()),
        uri,
        f"operation_counts {counts!r} is not an object of counts",
    )
    _require(
        sum(counts.values()) == row_count,
        uri,
        f"operation_counts add up to {sum(counts.values())}, row_count is {row_count}",
    )


def window_directory(manifest_uri: str) -> str:
    """Return the window directory of a manifest URI (where its files' relative paths start).

    :param manifest_uri: the URI of a ``_manifest.json``.
    """
    if manifest_uri.endswith(MANIFEST_NAME):
        return manifest_uri[: -len(MANIFEST_NAME)].rstrip("/")
    return manifest_uri.rstrip("/")


def manifest_uri(reference: str) -> str:
    """Return the manifest URI of a window: the reference itself, or its window directory's manifest.

    :param reference: a manifest URI or a window directory (local path or any Hadoop/pyarrow URI).
    """
    text = reference.strip()
    if text.endswith("/" + MANIFEST_NAME) or text == MANIFEST_NAME:
        return text
    return text.rstrip("/") + "/" + MANIFEST_NAME
