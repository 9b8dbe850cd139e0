"""Seeded random values for the sample tables' column types, in the Python types pyodbc sends."""

from __future__ import annotations

import datetime as dt
import decimal
import random
import uuid
from collections.abc import Callable
from typing import Any

#: Draws one value of a column from the workload's random generator.
ValueGenerator = Callable[[random.Random], Any]

# Characters outside ASCII, including some beyond the Basic Multilingual Plane.
UNICODE_ALPHABET = "aé漢字ßΩж😀🚀𝔘"


def money(rng: random.Random, whole: int = 100_000) -> decimal.Decimal:
    """
    Draw a money value with four decimal places.

    :param rng: the random generator.
    :param whole: the largest absolute whole part.
    """
    return decimal.Decimal(rng.randint(-whole * 10_000, whole * 10_000)).scaleb(-4)


def decimal_number(rng: random.Random, precision: int, scale: int) -> decimal.Decimal:
    """
    Draw a ``decimal(precision, scale)`` value (at most 15 significant digits).

    :param rng: the random generator.
    :param precision: the declared precision.
    :param scale: the declared scale.
    """
    digits = min(precision, 15)
    return decimal.Decimal(rng.randint(-(10**digits) + 1, 10**digits - 1)).scaleb(-scale)


def text(rng: random.Random, max_len: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz ") -> str:
    """
    Draw a string of 1 to ``max_len`` characters.

    :param rng: the random generator.
    :param max_len: the longest string drawn.
    :param alphabet: the characters to draw from.
    """
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len)))


def unicode_text(rng: random.Random, max_len: int) -> str:
    """
    Draw a string of 1 to ``max_len`` characters outside ASCII (some beyond the BMP).

    :param rng: the random generator.
    :param max_len: the longest string drawn.
    """
    return text(rng, max_len, UNICODE_ALPHABET)


def datetime2(rng: random.Random, digits: int = 6) -> dt.datetime:
    """
    Draw a naive datetime between 2020 and 2025 with ``digits`` fractional digits of a second.

    :param rng: the random generator.
    :param digits: fractional digits kept (0 to 6).
    """
    base = dt.datetime(2020, 1, 1) + dt.timedelta(seconds=rng.randint(0, 5 * 365 * 86400))
    micro = rng.randint(0, 999_999)
    if digits < 6:
        micro -= micro % 10 ** (6 - digits)
    return base.replace(microsecond=micro)


def legacy_datetime(rng: random.Random) -> dt.datetime:
    """
    Draw a ``datetime`` value exact in SQL Server's 1/300 s precision (a multiple of 10 ms).

    :param rng: the random generator.
    """
    return datetime2(rng, 0).replace(microsecond=rng.randint(0, 99) * 10_000)


def smalldatetime(rng: random.Random) -> dt.datetime:
    """
    Draw a ``smalldatetime`` value (whole minutes).

    :param rng: the random generator.
    """
    return datetime2(rng, 0).replace(second=0)


def time_of_day(rng: random.Random, digits: int = 6) -> dt.time:
    """
    Draw a time of day with ``digits`` fractional digits of a second.

    :param rng: the random generator.
    :param digits: fractional digits kept (0 to 6).
    """
    return datetime2(rng, digits).time()


def date(rng: random.Random) -> dt.date:
    """
    Draw a date between 1990 and 2044.

    :param rng: the random generator.
    """
    return dt.date(1990, 1, 1) + dt.timedelta(days=rng.randint(0, 20_000))


def datetimeoffset(rng: random.Random) -> dt.datetime:
    """
    Draw an aware datetime with one of a few UTC offsets.

    :param rng: the random generator.
    """
    offset = dt.timedelta(minutes=rng.choice([-480, -300, 0, 60, 330, 600]))
    return datetime2(rng, 6).replace(tzinfo=dt.timezone(offset))


def guid(rng: random.Random) -> str:
    """
    Draw a version-4 UUID in SQL Server's upper-case text form.

    :param rng: the random generator.
    """
    return str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper()


def nullable(generate: ValueGenerator, null_ratio: float = 0.15) -> ValueGenerator:
    """
    Wrap a generator so that it draws NULL (``None``) a share of the time.

    :param generate: the generator of non-NULL values.
    :param null_ratio: the share of NULLs.
    """
    return lambda rng: None if rng.random() < null_ratio else generate(rng)
