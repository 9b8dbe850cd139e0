"""The server's collation (case-insensitive, trailing-space-insensitive) as a comparison key."""

from __future__ import annotations

from typing import Any


def ci_key(value: Any) -> Any:
    """Comparison key of a string under a case-insensitive, trailing-space-insensitive collation.

    :param value: any value; strings are folded, everything else is returned as is.
    """
    return value.rstrip(" ").casefold() if isinstance(value, str) else value
