"""
The server clock of the simulator tests: a server zone that is not UTC, one server-local day, and conversions.

The server runs at UTC+05:30 (Asia/Kolkata, no DST), so every test that turns a data interval
(UTC) into an LSN window shows the conversion. Importable from any test module by its name
(``tests/`` is on ``sys.path`` through its ``conftest.py``).
"""

from __future__ import annotations

import datetime as dt

ZONE = "Asia/Kolkata"  # UTC+05:30, no DST
OFFSET = dt.timedelta(hours=5, minutes=30)
DAY = dt.datetime(2026, 3, 2)  # the server-local date of the test transactions


def local(hh: int, mm: int, ss: int = 0) -> dt.datetime:
    """A server-local time of ``DAY`` (naive, as the simulator's clock and ``cdc.lsn_time_mapping`` take it)."""
    return DAY.replace(hour=hh, minute=mm, second=ss)


def utc(hh: int, mm: int) -> dt.datetime:
    """The UTC instant of server-local ``hh:mm`` on ``DAY``: a data-interval bound."""
    return (local(hh, mm) - OFFSET).replace(tzinfo=dt.UTC)
