"""``__$update_mask``: one bit per captured column, laid out as SQL Server lays it out.

The mask is ``ceil(n / 8)`` bytes for ``n`` captured columns. Column ordinal 1 is the least
significant bit of the LAST byte, ordinal 8 its most significant bit, ordinal 9 the least
significant bit of the byte before it, and so on; e.g. five columns, all set: ``0x1F``; ten
columns, only ordinal 1 set: ``0x0001``.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_MASK_BYTES = 128


def mask_length(column_count: int) -> int:
    """Number of bytes in the mask of an instance that captures ``column_count`` columns."""
    return max(1, (column_count + 7) // 8)


def full_mask(column_count: int) -> bytes:
    """The mask with every captured column's bit set (inserts and deletes)."""
    return mask_from_ordinals(range(1, column_count + 1), column_count)


def mask_from_ordinals(ordinals: Iterable[int], column_count: int) -> bytes:
    """Build a mask with the bits of the given 1-based column ordinals set."""
    length = mask_length(column_count)
    value = 0
    for ordinal in ordinals:
        if not 1 <= ordinal <= column_count:
            raise ValueError(f"column ordinal {ordinal} is outside 1..{column_count}")
        value |= 1 << (ordinal - 1)
    return value.to_bytes(length, "big")


def ordinals_in_mask(mask: bytes) -> list[int]:
    """The 1-based ordinals whose bit is set, in ascending order."""
    value = int.from_bytes(mask, "big")
    return [bit + 1 for bit in range(len(mask) * 8) if value >> bit & 1]


def is_bit_set(position: int | None, mask: bytes | None) -> bool | None:
    """``sys.fn_cdc_is_bit_set``: whether ordinal ``position`` is set; NULL in, NULL out."""
    if position is None or mask is None:
        return None
    if position < 1 or position > len(mask) * 8:
        return False
    byte = mask[len(mask) - 1 - (position - 1) // 8]
    return bool(byte >> ((position - 1) % 8) & 1)


def or_masks(left: bytes | None, right: bytes | None) -> bytes | None:
    """Bitwise OR of two masks of the same instance (NULL is the identity)."""
    if left is None:
        return right
    if right is None:
        return left
    length = max(len(left), len(right))
    value = int.from_bytes(left, "big") | int.from_bytes(right, "big")
    return value.to_bytes(length, "big")
