"""Lsn: SQL Server's 10-byte log sequence number as an immutable, ordered value."""

from __future__ import annotations

import re
from functools import total_ordering
from typing import Any

LSN_BYTES = 10
_HEX_RE = re.compile(r"^0[xX][0-9A-Fa-f]{20}$")


@total_ordering
class Lsn:
    """
    A log sequence number: ``binary(10)`` as SQL Server stores it (VLF sequence : block : slot).

    LSNs compare as unsigned big-endian numbers, which is how SQL Server orders them. The text
    form used in XCom, Variables, file names and logs is ``0x`` followed by 20 upper-case hex
    digits; the integer form (``int(lsn)``, :meth:`from_int`) is what LSN ranges compute with.
    Arithmetic is deliberately absent: the next LSN comes from the server
    (``sys.fn_cdc_increment_lsn``).

    :param value: exactly 10 bytes.
    """

    __slots__ = ("_value",)

    def __init__(self, value: bytes | bytearray | memoryview) -> None:
        raw = bytes(value)
        if len(raw) != LSN_BYTES:
            raise ValueError(f"An LSN is {LSN_BYTES} bytes, got {len(raw)} bytes: 0x{raw.hex().upper()}")
        object.__setattr__(self, "_value", raw)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Lsn is immutable")

    @classmethod
    def from_hex(cls, text: str) -> Lsn:
        """Parse the ``0x`` + 20 hex digit form (either case)."""
        if not isinstance(text, str) or not _HEX_RE.match(text.strip()):
            raise ValueError(
                f"Not an LSN: {text!r}; expected '0x' followed by 20 hex digits, e.g. 0x0000002A000001F00003"
            )
        return cls(bytes.fromhex(text.strip()[2:]))

    @classmethod
    def parse(cls, value: Lsn | bytes | bytearray | memoryview | str) -> Lsn:
        """Return an Lsn from an Lsn, 10 raw bytes or the hex text form."""
        if isinstance(value, Lsn):
            return value
        if isinstance(value, str):
            return cls.from_hex(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return cls(value)
        raise TypeError(f"Cannot make an LSN from {type(value).__name__}")

    @classmethod
    def from_int(cls, value: int) -> Lsn:
        """Return the LSN whose unsigned big-endian value is ``value`` (the form LSN ranges compute with)."""
        if not isinstance(value, int) or not 0 <= value < 1 << (8 * LSN_BYTES):
            raise ValueError(f"Not an LSN value: {value!r}; expected an integer from 0 to 2**80 - 1")
        return cls(value.to_bytes(LSN_BYTES, "big"))

    @classmethod
    def zero(cls) -> Lsn:
        """Return the all-zero LSN (what SQL Server returns for an unknown capture instance)."""
        return cls(bytes(LSN_BYTES))

    @property
    def value(self) -> bytes:
        """The 10 raw bytes."""
        return self._value

    @property
    def hex(self) -> str:
        """The ``0x`` + 20 upper-case hex digit form."""
        return "0x" + self._value.hex().upper()

    @property
    def is_zero(self) -> bool:
        """Whether every byte is zero."""
        return not any(self._value)

    def __int__(self) -> int:
        return int.from_bytes(self._value, "big")

    def __bytes__(self) -> bytes:
        return self._value

    def __str__(self) -> str:
        return self.hex

    def __repr__(self) -> str:
        return f"Lsn({self.hex})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Lsn):
            return self._value == other._value
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        if isinstance(other, Lsn):
            return self._value < other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash((Lsn, self._value))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Lsn, (self._value,))
