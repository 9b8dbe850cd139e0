"""
Watermarks: the last LSN merged per capture instance, kept in an Airflow Variable.

Key: ``sqlserver_cdc__<conn_id>__<database>__<capture_instance>``, derived by
``window.change_window.watermark_key``. Value (JSON):
``{"lsn": "0x…", "commit_time": "…+00:00", "dag_run_id": "…", "updated_at": "…"}``.
A watermark only moves forward; it is written after the merge has committed
(WatermarkCommitOperator), never by the extraction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_sqlserver_cdc.lsn import Lsn


@dataclass(frozen=True)
class Watermark:
    """The last merged LSN of a capture instance, with its commit time and the DAG run that merged it."""

    lsn: str
    commit_time: str | None = None
    dag_run_id: str | None = None
    updated_at: str | None = None

    @property
    def position(self) -> Lsn:
        """The LSN as a value."""
        return Lsn.from_hex(self.lsn)

    def to_json(self) -> str:
        """The Variable value."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str, *, key: str = "") -> Watermark:
        """Parse a Variable value; a malformed value is an error naming the key."""
        try:
            data = json.loads(text)
            mark = cls(**{k: data.get(k) for k in ("lsn", "commit_time", "dag_run_id", "updated_at")})
            mark.position  # noqa: B018 - validates the LSN
            return mark
        except (ValueError, TypeError) as err:
            raise ValueError(
                f"Airflow Variable {key!r} does not hold a watermark ({err}); expected JSON like "
                '{"lsn": "0x0000002A000001F00003", "commit_time": null, "dag_run_id": null}'
            ) from err


def _variable() -> Any:
    from airflow.sdk import Variable

    return Variable


def read_watermark(key: str) -> Watermark | None:
    """Return the stored watermark, or None when the Variable does not exist."""
    raw = _variable().get(key, default=None)
    if raw is None:
        return None
    return Watermark.from_json(raw if isinstance(raw, str) else json.dumps(raw), key=key)


def read_watermarks(keys: Mapping[str, str]) -> dict[str, Watermark | None]:
    """
    Return the stored watermark of each capture instance (None where none is stored).

    :param keys: capture instance -> its watermark key (``window.change_window.watermark_key``).
    """
    return {name: read_watermark(key) for name, key in keys.items()}


def advance_watermark(
    key: str, lsn: Lsn, *, commit_time: str | None = None, dag_run_id: str | None = None
) -> tuple[bool, Watermark | None]:
    """
    Store ``lsn`` as the watermark if it is above the stored one.

    Returns ``(moved, previous)``. A backfill of an old interval leaves the watermark unchanged.
    """
    previous = read_watermark(key)
    if previous is not None and lsn <= previous.position:
        return False, previous
    mark = Watermark(
        lsn=lsn.hex,
        commit_time=commit_time,
        dag_run_id=dag_run_id,
        updated_at=datetime.now(UTC).isoformat(),
    )
    _variable().set(key, mark.to_json())
    return True, previous
