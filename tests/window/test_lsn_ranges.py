"""Applied LSN ranges: joined when adjacent or overlapping, covered, and their text form."""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.lsn_ranges import add_range, covers, format_ranges, parse_ranges


def lsn_hex(value: int) -> str:
    return Lsn.from_int(value).hex


def test_lsn_ranges_join_adjacent_and_overlapping_windows_only() -> None:
    ranges = add_range([], 0x10, 0x1F)
    ranges = add_range(ranges, 0x30, 0x3F)  # gap 0x20..0x2F stays open
    assert format_ranges(ranges) == f"{lsn_hex(0x10)}-{lsn_hex(0x1F)},{lsn_hex(0x30)}-{lsn_hex(0x3F)}"
    assert not covers(ranges, 0x18, 0x32)
    ranges = add_range(ranges, 0x20, 0x2F)
    assert ranges == [(0x10, 0x3F)]
    assert covers(ranges, 0x18, 0x32)
    assert parse_ranges(format_ranges(ranges)) == ranges


def test_no_ranges_parse_from_an_empty_summary() -> None:
    assert parse_ranges(None) == [] and parse_ranges("") == []
