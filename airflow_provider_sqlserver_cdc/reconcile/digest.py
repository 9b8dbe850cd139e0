"""
Row digests and key ranges of the reconcile comparison, computed the same way on both sides (docs/reconcile.md).

Standard library only: the source side (the Airflow worker, rows read from SQL Server and typed as
in a window) and the target side (Spark executors, rows of the Iceberg table) both import it.
A row's digest is a 64-bit BLAKE2b of a canonical text of its values in the target's
representation; a range's summary is its row count and the sum of its rows' digests modulo 2^64,
so summaries combine in any order and a range's summary is the combination of its leaves'.
"""

from __future__ import annotations

import base64
import bisect
import datetime as dt
import hashlib
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

MASK64 = (1 << 64) - 1
#: A range's summary: [row count, sum of row digests mod 2^64].
Summary = list[int]
Key = tuple[Any, ...]


def canonical(value: Any) -> str:
    """The canonical text of one value in the target's representation (the same on both sides)."""
    if value is None:
        return "n"
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, int):
        return f"i{value}"
    if isinstance(value, float):
        return f"f{value!r}"
    if isinstance(value, Decimal):
        return "d0" if value == 0 else "d" + format(value.normalize(), "f")
    if isinstance(value, str):
        return "s" + value
    if isinstance(value, bytes | bytearray | memoryview):
        return "x" + bytes(value).hex()
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return "t" + value.isoformat(timespec="microseconds")
    if isinstance(value, dt.date):
        return "D" + value.isoformat()
    raise TypeError(f"no canonical form for a value of type {type(value).__name__}")


def row_digest(values: Sequence[Any]) -> int:
    """The 64-bit digest of a row's values (captured columns in their order)."""
    text = "\x1f".join(canonical(v) for v in values)
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big"
    )


def combine(summaries: Iterable[Sequence[int]]) -> Summary:
    """The summary of the union of ranges."""
    count = total = 0
    for c, d in summaries:
        count += c
        total = (total + d) & MASK64
    return [count, total]


def leaf_of(bounds: Sequence[Key], key: Key) -> int:
    """The leaf a key falls in: leaf 0 below ``bounds[0]``, leaf i from ``bounds[i-1]`` (inclusive) on."""
    return bisect.bisect_right(bounds, key)


def differing_leaves(
    source: Sequence[Sequence[int]], target: Sequence[Sequence[int]]
) -> tuple[list[int], int]:
    """
    Bisect the leaf range: compare the summary of a range, split the ranges that differ in halves.

    Returns the leaves that differ and how many ranges were compared.
    """
    if len(source) != len(target):
        raise ValueError(f"{len(source)} source leaves against {len(target)} target leaves")
    found: list[int] = []
    compared = 0
    pending = [(0, len(source))] if source else []
    while pending:
        low, high = pending.pop()
        compared += 1
        if combine(source[low:high]) == combine(target[low:high]):
            continue
        if high - low == 1:
            found.append(low)
            continue
        middle = (low + high) // 2
        pending += [(middle, high), (low, middle)]
    return sorted(found), compared


def leaf_runs(leaves: Iterable[int]) -> list[tuple[int, int]]:
    """Adjacent leaves joined into inclusive runs ``(first, last)``: the key ranges a repair reads."""
    runs: list[tuple[int, int]] = []
    for leaf in sorted(set(leaves)):
        if runs and runs[-1][1] == leaf - 1:
            runs[-1] = (runs[-1][0], leaf)
        else:
            runs.append((leaf, leaf))
    return runs


def encode_value(value: Any) -> list[Any]:
    """A key value as JSON: ``[type, text]``; :func:`decode_value` gives the value back."""
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]
    if isinstance(value, Decimal):
        return ["decimal", str(value)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, bytes | bytearray | memoryview):
        return ["bytes", base64.b64encode(bytes(value)).decode()]
    if isinstance(value, dt.datetime):
        return ["datetime", value.isoformat()]
    if isinstance(value, dt.date):
        return ["date", value.isoformat()]
    raise TypeError(f"cannot encode a key value of type {type(value).__name__}")


_DECODERS = {
    "bool": bool,
    "int": int,
    "decimal": Decimal,
    "str": str,
    "bytes": base64.b64decode,
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
}


def decode_value(item: Sequence[Any]) -> Any:
    """The value of :func:`encode_value`'s output."""
    kind, text = item
    return _DECODERS[kind](text)


def encode_key(key: Sequence[Any]) -> list[list[Any]]:
    """A key (tuple of values) as JSON."""
    return [encode_value(v) for v in key]


def decode_key(items: Sequence[Sequence[Any]]) -> Key:
    """The key of :func:`encode_key`'s output."""
    return tuple(decode_value(i) for i in items)
