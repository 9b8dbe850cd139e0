"""Applied LSN ranges: inclusive ``[first, last]`` integer ranges, joined, and their text form.

A target records, per capture instance, the LSN ranges it holds; a window is applied when its range
is not covered yet. The text form is ``0xA-0xB,0xC-0xD`` (LSNs in their ``0x`` + 20 hex digit form).
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_provider_sqlserver_cdc.lsn import Lsn

#: An inclusive range of LSNs in their integer form.
LsnRange = tuple[int, int]


def parse_ranges(text: str | None) -> list[LsnRange]:
    """Parse ``0xA-0xB,0xC-0xD`` (inclusive LSN ranges), e.g. from a snapshot summary value.

    :param text: the text form; None or empty for no ranges.
    """
    ranges = []
    for part in (text or "").split(","):
        if part.strip():
            first, _, last = part.strip().partition("-")
            ranges.append((int(Lsn.from_hex(first)), int(Lsn.from_hex(last))))
    return sorted(ranges)


def format_ranges(ranges: Iterable[LsnRange]) -> str:
    """Return the text form of inclusive LSN ranges.

    :param ranges: the ranges, in any order.
    """
    return ",".join(f"{Lsn.from_int(first)}-{Lsn.from_int(last)}" for first, last in sorted(ranges))


def add_range(ranges: Iterable[LsnRange], first: int, last: int) -> list[LsnRange]:
    """Return the ranges with ``[first, last]`` added; overlapping or adjacent ranges are joined.

    :param ranges: the ranges so far.
    :param first: the lowest LSN of the range to add.
    :param last: the highest LSN of the range to add.
    """
    merged: list[LsnRange] = []
    for lo, hi in sorted([*ranges, (first, last)]):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def covers(ranges: Iterable[LsnRange], first: int, last: int) -> bool:
    """Say whether ``[first, last]`` lies inside one of the (joined) ranges.

    :param ranges: joined ranges, as :func:`add_range` returns them.
    :param first: the lowest LSN of the range asked about.
    :param last: the highest LSN of the range asked about.
    """
    return any(lo <= first and last <= hi for lo, hi in ranges)
