"""ServerClock: the simulator's controllable clock and time zone.

SYSDATETIMEOFFSET(), GETDATE(), SYSDATETIME(), SYSUTCDATETIME(), commit times in the
transaction log and every other server time come from one :class:`ServerClock`. Tests move
it with :meth:`ServerClock.set` / :meth:`ServerClock.advance`, or stop it with
:meth:`ServerClock.freeze`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from zoneinfo import ZoneInfo

from .values import DAYS_TO_UNIX, TICKS_PER_DAY, DateTimeOffset, ticks_from_datetime

_UNIX_TICKS = DAYS_TO_UNIX * TICKS_PER_DAY


class ServerClock:
    """Server time = real time + an adjustable offset (or a frozen instant), in an IANA time zone.

    :param timezone: IANA name such as ``Europe/Berlin``; ``UTC`` by default
    """

    def __init__(self, timezone: str = "UTC") -> None:
        self._lock = threading.Lock()
        self.zone = ZoneInfo(timezone)
        self.timezone_name = timezone
        self._offset_ns = 0
        self._frozen_ns: int | None = None
        self._last_ticks = 0

    # -- control (tests)
    def set(self, when: dt.datetime, *, frozen: bool = False) -> None:
        """Make the clock read *when* now (naive = server local time); it keeps running unless *frozen*."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=self.zone)
        target_ns = int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000
        with self._lock:
            if frozen:
                self._frozen_ns = target_ns
            else:
                self._frozen_ns = None
                self._offset_ns = target_ns - time.time_ns()
            self._last_ticks = 0

    def advance(self, delta: dt.timedelta | float) -> None:
        """Move the clock forward by *delta* (a timedelta or seconds)."""
        ns = int((delta.total_seconds() if isinstance(delta, dt.timedelta) else delta) * 1e9)
        with self._lock:
            if self._frozen_ns is not None:
                self._frozen_ns += ns
            else:
                self._offset_ns += ns

    def freeze(self) -> None:
        """Stop the clock at the current instant."""
        with self._lock:
            self._frozen_ns = self._now_ns()

    def unfreeze(self) -> None:
        """Let a frozen clock run again from the instant it shows."""
        with self._lock:
            if self._frozen_ns is not None:
                self._offset_ns = self._frozen_ns - time.time_ns()
                self._frozen_ns = None

    def reset(self) -> None:
        """Back to real time."""
        with self._lock:
            self._offset_ns = 0
            self._frozen_ns = None
            self._last_ticks = 0

    def set_timezone(self, timezone: str) -> None:
        self.zone = ZoneInfo(timezone)
        self.timezone_name = timezone

    # -- reading
    def _now_ns(self) -> int:
        return self._frozen_ns if self._frozen_ns is not None else time.time_ns() + self._offset_ns

    def utc_ticks(self) -> int:
        """Now in UTC, 100 ns ticks since 0001-01-01 (never goes backwards between calls unless set)."""
        with self._lock:
            ticks = _UNIX_TICKS + self._now_ns() // 100
            if ticks < self._last_ticks and self._frozen_ns is None:
                ticks = self._last_ticks
            self._last_ticks = ticks
            return ticks

    def offset_minutes(self, utc_ticks: int | None = None) -> int:
        """The zone's UTC offset in minutes at *utc_ticks* (now by default)."""
        if utc_ticks is None:
            utc_ticks = self.utc_ticks()
        seconds = (utc_ticks - _UNIX_TICKS) // 10_000_000
        instant = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
        off = instant.astimezone(self.zone).utcoffset()
        return int(off.total_seconds() // 60) if off else 0

    def now_dto(self) -> DateTimeOffset:
        """SYSDATETIMEOFFSET()."""
        utc = self.utc_ticks()
        return DateTimeOffset(utc, self.offset_minutes(utc))

    def local_ticks(self) -> int:
        """SYSDATETIME(): server local time in ticks."""
        return self.now_dto().local_ticks

    def now(self) -> dt.datetime:
        """Server local time as an aware ``datetime``."""
        return dt.datetime.fromtimestamp(self._now_ns() / 1e9, tz=self.zone)

    def local_ticks_of(self, when: dt.datetime) -> int:
        return ticks_from_datetime(when.astimezone(self.zone))
