"""
ChangeWindow: one extracted window as it flows extract -> merge -> watermark, and its XCom form.

A change window is a contiguous range of source positions of one capture instance, written as
Parquet files plus ``_manifest.json`` under ``window_uri`` (a snapshot is a window of kind
``snapshot``). Between tasks it travels as a small JSON object, never row data:
:meth:`ChangeWindow.to_xcom` writes it, :meth:`ChangeWindow.from_xcom` reads back whatever
Airflow hands a downstream task. The watermark Variable key is derived by :func:`watermark_key`,
here and nowhere else.

Positions are kept as text with their kind. Every window the provider writes is an LSN range
(``position_kind="lsn"``, ``0x`` + 20 hex digits): Change Tracking windows too, their versions
encoded as LSNs (``hooks.change_tracking.version_lsn``, docs/change-tracking.md). The kind
``version`` (decimal digits) is reserved for version ranges kept as such, which the watermark
store does not read yet. Only LSN windows parse positions into
:class:`~airflow_provider_sqlserver_cdc.lsn.Lsn`. XCom keys that hold a position are named after
its kind: ``from_lsn``, ``to_lsn``, ``to_lsn_time`` (``from_version``, ... for versions).

Standard library only (plus ``lsn``, itself standard library only).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.manifest import KINDS, MODES

KEY_PREFIX = "sqlserver_cdc"
LSN = "lsn"
VERSION = "version"
POSITION_KINDS = (LSN, VERSION)
_REQUIRED = ("capture_instance", "source", "kind", "mode", "window_uri", "manifest_uri", "state_key")


class ChangeWindowError(ValueError):
    """A value that is not a change window, or a list of them, as the extract and snapshot tasks push it."""


def watermark_key(conn_id: str, database: str, capture_instance: str) -> str:
    """
    Return the Airflow Variable key of a capture instance's watermark.

    :param conn_id: the Airflow connection id of the source server.
    :param database: the source database.
    :param capture_instance: the capture instance.
    """
    return f"{KEY_PREFIX}__{conn_id}__{database}__{capture_instance}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "…"


def _position(kind: str, text: Any, key: str) -> Lsn | int:
    """Parse a position of ``kind`` for ordering; the error names the XCom key."""
    try:
        if kind == LSN:
            return Lsn.from_hex(text)
        if isinstance(text, str) and text.isascii() and text.isdigit():
            return int(text)
        raise ValueError(f"Not a version: {text!r}; expected decimal digits, e.g. '1234'")
    except ValueError as err:
        raise ChangeWindowError(f"{key}: {err}") from None


@dataclass(frozen=True)
class SnapshotDetails:
    """
    How the copy of a snapshot window was made consistent.

    :param method: ``snapshot_isolation`` or ``table_lock``.
    :param read_positions: the position each copy transaction read at (the first is the snapshot's;
        a resumed copy adds one per attempt).
    :param consistent_after: the highest of ``read_positions``: the table is consistent once the
        change windows up to it are merged.
    :param resumed_chunks: chunks taken over from an earlier, failed attempt.
    :param lock_held_ms: how long the shared table lock was held (None: for the whole copy).
    """

    method: str
    read_positions: tuple[str, ...]
    consistent_after: str
    resumed_chunks: int = 0
    lock_held_ms: float | None = None

    def to_xcom(self, position_kind: str, snapshot_position: str) -> dict[str, Any]:
        """The snapshot's keys of the window XCom."""
        return {
            f"snapshot_{position_kind}": snapshot_position,
            "snapshot_method": self.method,
            "resumed_chunks": self.resumed_chunks,
            f"read_{position_kind}s": list(self.read_positions),
            f"consistent_after_{position_kind}": self.consistent_after,
            "lock_held_ms": self.lock_held_ms,
        }

    @classmethod
    def from_xcom(cls, data: Mapping[str, Any], position_kind: str) -> SnapshotDetails:
        """Read the snapshot's keys of a window XCom."""
        reads = data.get(f"read_{position_kind}s") or []
        return cls(
            method=data["snapshot_method"],
            read_positions=tuple(reads),
            consistent_after=data.get(f"consistent_after_{position_kind}") or data[f"to_{position_kind}"],
            resumed_chunks=int(data.get("resumed_chunks") or 0),
            lock_held_ms=data.get("lock_held_ms"),
        )


@dataclass(frozen=True)
class ChangeWindow:
    """
    One extracted window of one capture instance: where its files are and which range it covers.

    :param capture_instance: the capture instance the window belongs to.
    :param source: where its table lives: ``server``, ``database``, ``schema``, ``table``.
    :param kind: ``changes`` (the changes of a range) or ``snapshot`` (a consistent copy, all inserts).
    :param mode: how the range was chosen: ``interval``, ``watermark`` or ``snapshot``.
    :param from_position: first position of the range (inclusive), as text.
    :param to_position: last position (inclusive), as text; the watermark advances to it after the merge.
    :param window_uri: the window directory.
    :param manifest_uri: the window's ``_manifest.json``.
    :param state_key: the watermark Variable of the capture instance (:func:`watermark_key`).
    :param position_kind: ``lsn`` (CDC, and Change Tracking's versions encoded as LSNs) or the reserved
        ``version``.
    :param from_time: UTC start of the range (ISO 8601), when known.
    :param to_time: UTC end of the range (ISO 8601), when known.
    :param to_position_time: UTC commit time of ``to_position`` (ISO 8601), stored with the watermark.
    :param row_count: change rows in the window.
    :param operation_counts: rows per operation name (``delete``, ``insert``, ``update_before``, ...).
    :param file_count: Parquet files of the window.
    :param byte_count: bytes of those files.
    :param empty: whether the range holds no transaction (it was not queried).
    :param snapshot: how a snapshot window was taken (kind ``snapshot``).
    :param applied_through: the applied-through position the window continues (contiguity guard):
        the source had no unapplied change between it and ``from_position``.
    :param healed_gap: the unapplied changes before the run's interval that the window took in
        (contiguity guard, ``on_gap="heal"``): first/last position, rows, times.
    """

    # Alike only in shape to the fields of the simulator's CapturedColumn and of CaptureInstance.
    capture_instance: str
    source: Mapping[str, str]
    kind: str
    mode: str
    from_position: str
    to_position: str
    window_uri: str
    manifest_uri: str
    state_key: str
    position_kind: str = LSN
    from_time: str | None = None
    to_time: str | None = None
    to_position_time: str | None = None
    row_count: int = 0
    operation_counts: Mapping[str, int] = field(default_factory=dict)
    file_count: int = 0
    byte_count: int = 0
    empty: bool = False
    snapshot: SnapshotDetails | None = None
    applied_through: str | None = None
    healed_gap: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        label = f"window of {self.capture_instance!r}"
        if self.kind not in KINDS:
            raise ChangeWindowError(f"{label}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.mode not in MODES:
            raise ChangeWindowError(f"{label}: mode must be one of {MODES}, got {self.mode!r}")
        if self.position_kind not in POSITION_KINDS:
            raise ChangeWindowError(
                f"{label}: position_kind must be one of {POSITION_KINDS}, got {self.position_kind!r}"
            )
        first = _position(self.position_kind, self.from_position, f"{label}: from_{self.position_kind}")
        last = _position(self.position_kind, self.to_position, f"{label}: to_{self.position_kind}")
        if first > last:  # type: ignore[operator]  # both of the same kind
            raise ChangeWindowError(
                f"{label}: from_{self.position_kind} {self.from_position} is above "
                f"to_{self.position_kind} {self.to_position}"
            )

    @property
    def from_lsn(self) -> Lsn:
        """The first LSN of a CDC window."""
        return Lsn.from_hex(self._lsn_position(self.from_position))

    @property
    def to_lsn(self) -> Lsn:
        """The last LSN of a CDC window (where its watermark advances to)."""
        return Lsn.from_hex(self._lsn_position(self.to_position))

    def _lsn_position(self, text: str) -> str:
        if self.position_kind != LSN:
            raise ChangeWindowError(
                f"The window of {self.capture_instance!r} is a range of {self.position_kind}s, not of LSNs"
            )
        return text

    def to_xcom(self) -> dict[str, Any]:
        """Return the window's XCom value: a small JSON-safe dict (see docs/extraction.md)."""
        p = self.position_kind
        value = {
            "empty": self.empty,
            "capture_instance": self.capture_instance,
            "source": dict(self.source),
            "kind": self.kind,
            "mode": self.mode,
            "position_kind": p,
            f"from_{p}": self.from_position,
            f"to_{p}": self.to_position,
            "from_time": self.from_time,
            "to_time": self.to_time,
            f"to_{p}_time": self.to_position_time,
            "window_uri": self.window_uri,
            "manifest_uri": self.manifest_uri,
            "row_count": self.row_count,
            "operation_counts": dict(self.operation_counts),
            "file_count": self.file_count,
            "bytes": self.byte_count,
            "state_key": self.state_key,
        }
        if self.snapshot is not None:
            value.update(self.snapshot.to_xcom(p, self.to_position))
        if self.applied_through is not None:
            value[f"applied_through_{p}"] = self.applied_through
        if self.healed_gap is not None:
            value["healed_gap"] = dict(self.healed_gap)
        return value

    @classmethod
    def from_dict(cls, data: Any) -> ChangeWindow:
        """
        Read one window from its XCom dict (as :meth:`to_xcom` wrote it).

        :param data: the dict.
        """
        if not isinstance(data, Mapping):
            raise ChangeWindowError(f"Expected a window object, got a {type(data).__name__}: {_short(data)}")
        p = data.get("position_kind")
        if "position_kind" in data and p not in POSITION_KINDS:
            raise ChangeWindowError(f"position_kind must be one of {POSITION_KINDS}, got {p!r}")
        bounds = (f"from_{p}", f"to_{p}") if p in POSITION_KINDS else ("position_kind",)
        missing = [k for k in (*_REQUIRED, *bounds) if k not in data]
        if missing:
            raise ChangeWindowError(
                f"Not a change window (lacks {', '.join(missing)}): {_short(data)}. Pass the XCom of "
                "CdcExtractOperator or CdcSnapshotOperator (e.g. extract.output)."
            )
        return cls(
            capture_instance=data["capture_instance"],
            source=dict(data["source"]),
            kind=data["kind"],
            mode=data["mode"],
            from_position=data[f"from_{p}"],
            to_position=data[f"to_{p}"],
            window_uri=data["window_uri"],
            manifest_uri=data["manifest_uri"],
            state_key=data["state_key"],
            position_kind=p,
            from_time=data.get("from_time"),
            to_time=data.get("to_time"),
            to_position_time=data.get(f"to_{p}_time"),
            row_count=int(data.get("row_count") or 0),
            operation_counts=dict(data.get("operation_counts") or {}),
            file_count=int(data.get("file_count") or 0),
            byte_count=int(data.get("bytes") or 0),
            empty=bool(data.get("empty", False)),
            snapshot=SnapshotDetails.from_xcom(data, p) if "snapshot_method" in data else None,
            applied_through=data.get(f"applied_through_{p}"),
            healed_gap=dict(data["healed_gap"]) if data.get("healed_gap") else None,
        )

    @classmethod
    def from_xcom(cls, value: Any) -> list[ChangeWindow]:
        """
        Read the windows of an XCom value as Airflow hands it to a downstream task.

        :param value: a window dict, a list of them, the lazy sequence of a mapped task's results, JSON
            text of any of these, or a nesting of these (e.g. ``[snapshot.output, extract.output]``);
            None (a skipped upstream) gives no window.
        """
        windows = []
        for item in xcom_items(value):
            if isinstance(item, str):
                raise ChangeWindowError(
                    f"{_short(item)} is not a change window: expected the XCom of CdcExtractOperator or "
                    "CdcSnapshotOperator (a dict, a list of dicts, or their JSON text)"
                )
            windows.append(cls.from_dict(item))
        return windows


def xcom_items(value: Any) -> list[dict[str, Any] | str]:
    """
    Flatten an XCom value as Airflow hands it to a task into its objects and plain strings.

    :param value: a dict, JSON text, a list, the lazy sequence of a mapped task's results, or any
        nesting of these; None contributes nothing. Text that is not JSON is returned as it is
        (e.g. a manifest URI).
    """
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [dict(value)]
    if isinstance(value, str):
        return _text_items(value)
    if isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
        return [item for element in value for item in xcom_items(element)]
    raise ChangeWindowError(f"Cannot read windows from a {type(value).__name__}: {_short(value)}")


def _text_items(text: str) -> list[dict[str, Any] | str]:
    stripped = text.strip()
    if not stripped:
        return []
    if stripped[0] not in '[{"':
        return [stripped]
    try:
        parsed = json.loads(stripped)
    except json.JSONDecodeError as err:
        raise ChangeWindowError(
            f"Window text looks like JSON but does not parse ({err}): {_short(stripped)}. A template renders "
            "an XCom with Python's str(), which is not JSON: render it with '| tojson', or pass the task's "
            ".output instead of a template."
        ) from None
    return xcom_items(parsed)
