"""LSN values as SQL Server stores them: ``binary(10)`` = VLF sequence (4) : block (4) : slot (2)."""

from __future__ import annotations

import struct

LSN_LENGTH = 10
ZERO_LSN = bytes(LSN_LENGTH)
MAX_LSN = b"\xff" * LSN_LENGTH

_LSN_STRUCT = struct.Struct(">IIH")
_MAX_INT = (1 << 80) - 1


def make_lsn(vlf: int, block: int, slot: int) -> bytes:
    """Build the 10-byte LSN ``vlf:block:slot``."""
    return _LSN_STRUCT.pack(vlf, block, slot)


def lsn_parts(lsn: bytes) -> tuple[int, int, int]:
    """Split a 10-byte LSN into (VLF sequence, block, slot)."""
    return _LSN_STRUCT.unpack(check_lsn(lsn))


def check_lsn(value: bytes | bytearray | memoryview) -> bytes:
    """Return ``value`` as bytes, raising ``ValueError`` unless it is exactly 10 bytes long."""
    raw = bytes(value)
    if len(raw) != LSN_LENGTH:
        raise ValueError(f"an LSN is {LSN_LENGTH} bytes, got {len(raw)}: 0x{raw.hex().upper()}")
    return raw


def coerce_lsn(value: bytes | bytearray | memoryview) -> bytes:
    """
    Convert a ``binary``/``varbinary`` argument to the 10-byte LSN SQL Server would see.

    Converting a shorter value to ``binary(10)`` pads it on the right with zero bytes and a longer
    one is truncated, as ``CAST(x AS binary(10))`` does.
    """
    raw = bytes(value)
    if len(raw) < LSN_LENGTH:
        return raw + bytes(LSN_LENGTH - len(raw))
    return raw[:LSN_LENGTH]


def increment_lsn(lsn: bytes) -> bytes:
    """Return the next LSN: the 80-bit big-endian value plus one (the largest LSN stays the largest)."""
    value = int.from_bytes(check_lsn(lsn), "big")
    return min(value + 1, _MAX_INT).to_bytes(LSN_LENGTH, "big")


def decrement_lsn(lsn: bytes) -> bytes:
    """Return the previous LSN: the 80-bit big-endian value minus one (zero stays zero)."""
    value = int.from_bytes(check_lsn(lsn), "big")
    return max(value - 1, 0).to_bytes(LSN_LENGTH, "big")


def lsn_to_dmv_text(lsn: bytes | None) -> str | None:
    """The ``nvarchar(23)`` form of DMVs such as ``sys.dm_cdc_log_scan_sessions``: ``0000002d:00000580:001d``."""
    if lsn is None:
        return None
    vlf, block, slot = lsn_parts(lsn)
    return f"{vlf:08x}:{block:08x}:{slot:04x}"


def lsn_to_hex(lsn: bytes | None) -> str | None:
    """``0x`` + 20 upper-case hex digits, as SQL Server prints a ``binary(10)``."""
    if lsn is None:
        return None
    return "0x" + check_lsn(lsn).hex().upper()
