"""The TDS 7.4 wire protocol: packet framing, request decoding and response tokens."""

from __future__ import annotations
