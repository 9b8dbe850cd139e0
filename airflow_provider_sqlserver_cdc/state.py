"""
Watermarks: what the target holds of each capture instance, mirrored in an Airflow Variable.

Key: ``sqlserver_cdc__<conn_id>__<database>__<capture_instance>``, derived by
``window.change_window.watermark_key``. Value (JSON): ``{"lsn": "0x…", "applied_ranges":
"0x…-0x…", "empty_ranges": "0x…-0x…", "commit_time": "…+00:00", "dag_run_id": "…", "updated_at": "…"}``.

The target table is the source of truth: its merge commits record the applied LSN ranges. The
Variable mirrors them, written after the merge has committed (WatermarkCommitOperator), never by
the extraction: ``applied_ranges`` are the ranges the merge reported, joined with those already
mirrored, and ``lsn`` is the *applied-through* LSN, the end of the first range (every change up
to it is applied). Joining only adds ranges, so two commit tasks finishing in either order leave
the same value, and the watermark never moves back. Without ranges from the merge for an instance
(a WatermarkCommitOperator given no ``applied``, or a table the merge committed nothing to),
``lsn`` is the highest window end merged (``advance_watermark``).

``empty_ranges`` are the LSN ranges of windows without a row of the instance that continued what
the target holds (``operators.watermark.proven_empty``): the source had no change of the instance
there when the window was extracted, so the target holds them too without a commit (the merge
commits nothing for a window without rows). They count toward the
applied-through LSN, so a quiet table's watermark follows the runs instead of staying at its
snapshot LSN until CDC's cleanup passes it (issue 36). Ranges the table records are dropped from
them, which keeps them to at most the stretch since the table's last commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, add_range, format_ranges, parse_ranges


@dataclass(frozen=True)
class Watermark:
    """The last merged LSN of a capture instance, with its commit time and the DAG run that merged it."""

    lsn: str
    commit_time: str | None = None
    dag_run_id: str | None = None
    updated_at: str | None = None
    applied_ranges: str | None = None
    empty_ranges: str | None = None

    @property
    def position(self) -> Lsn:
        """The LSN as a value: every change up to it is in the target."""
        return Lsn.from_hex(self.lsn)

    @property
    def ranges(self) -> list[LsnRange]:
        """The mirrored applied LSN ranges (empty for a watermark written without them)."""
        return parse_ranges(self.applied_ranges)

    @property
    def known_empty(self) -> list[LsnRange]:
        """The LSN ranges empty windows proved free of changes of the instance, beyond what the table records."""
        return parse_ranges(self.empty_ranges)

    @property
    def held_ranges(self) -> list[LsnRange]:
        """What the target holds: the table's applied ranges joined with the proven-empty ones."""
        return join_ranges(self.ranges, self.known_empty)

    @property
    def recorded_through(self) -> Lsn:
        """The applied-through LSN the table itself records (the position when no ranges are mirrored).

        A window that continues the target says so with this LSN: the merge checks it against the
        table (``spark.merge.job``); the proven-empty ranges after it are part of the window's range.
        """
        ranges = self.ranges
        if not ranges or ranges[0][1] >= int(self.position):
            return self.position
        return Lsn.from_int(ranges[0][1])

    def to_json(self) -> str:
        """The Variable value."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str, *, key: str = "") -> Watermark:
        """Parse a Variable value; a malformed value is an error naming the key."""
        try:
            data = json.loads(text)
            mark = cls(**{k: data.get(k) for k in FIELDS})
            mark.position  # noqa: B018 - validates the LSN
            mark.ranges  # noqa: B018 - validates the ranges
            return mark
        except (ValueError, TypeError) as err:
            raise ValueError(
                f"Airflow Variable {key!r} does not hold a watermark ({err}); expected JSON like "
                '{"lsn": "0x0000002A000001F00003", "commit_time": null, "dag_run_id": null}'
            ) from err


FIELDS = ("lsn", "commit_time", "dag_run_id", "updated_at", "applied_ranges", "empty_ranges")


def join_ranges(*groups: list[LsnRange]) -> list[LsnRange]:
    """Return the ranges of every group joined (overlapping or adjacent ranges become one)."""
    joined: list[LsnRange] = []
    for group in groups:
        for first, last in group:
            joined = add_range(joined, first, last)
    return joined


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


def mirror_applied_ranges(
    key: str,
    ranges: list[LsnRange],
    *,
    known_commit_time: tuple[Lsn, str | None] | None = None,
    dag_run_id: str | None = None,
    empty: Sequence[LsnRange] = (),
) -> tuple[bool, Watermark | None, Watermark]:
    """
    Mirror the applied LSN ranges a merge reported for a capture instance; the watermark is their applied-through LSN.

    The reported ranges are joined with those already stored, so the stored value only grows.
    Returns ``(changed, previous, current)``.

    :param key: the watermark Variable.
    :param ranges: the applied ranges the target table holds after the merge.
    :param known_commit_time: an LSN and its UTC commit time (e.g. a window's end), stored when the
        applied-through LSN is that one.
    :param dag_run_id: the DAG run that merged.
    :param empty: LSN ranges of windows without rows that continued what the target holds (no change
        of the instance in them); joined with those already stored, less what the table records.
    """
    previous = read_watermark(key)
    joined = join_ranges(previous.ranges if previous is not None else [], list(ranges))
    if not joined:
        raise ValueError(f"no applied LSN ranges to mirror in {key!r}")
    known_empty = join_ranges(previous.known_empty if previous is not None else [], list(empty))
    # Only the part above the table's applied-through matters; the table records the rest.
    known_empty = [(max(lo, joined[0][1] + 1), hi) for lo, hi in known_empty if hi > joined[0][1]]
    held = join_ranges(joined, known_empty)
    # What follows the first held range is kept only while it may still join it (bounded bookkeeping).
    known_empty = [(lo, hi) for lo, hi in known_empty if hi <= held[0][1]]
    through = Lsn.from_int(held[0][1])
    text = format_ranges(joined)
    empty_text = format_ranges(known_empty) or None
    if (
        previous is not None
        and previous.applied_ranges == text
        and previous.lsn == through.hex
        and previous.empty_ranges == empty_text
    ):
        return False, previous, previous
    commit_time = None
    if previous is not None and previous.lsn == through.hex:
        commit_time = previous.commit_time
    elif known_commit_time is not None and known_commit_time[0] == through:
        commit_time = known_commit_time[1]
    mark = Watermark(
        lsn=through.hex,
        commit_time=commit_time,
        dag_run_id=dag_run_id,
        updated_at=datetime.now(UTC).isoformat(),
        applied_ranges=text,
        empty_ranges=empty_text,
    )
    _variable().set(key, mark.to_json())
    return True, previous, mark
