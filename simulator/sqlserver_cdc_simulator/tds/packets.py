"""TDS packet framing: read request messages, write response messages in packets.

A message is one or more packets with an 8-byte header (type, status, length big-endian,
SPID, packet id, window); the last packet has status bit 0x01 (end of message).
"""

from __future__ import annotations

import select
import socket
import struct

# packet types
SQL_BATCH = 1
RPC = 3
TABULAR_RESULT = 4
ATTENTION = 6
BULK_LOAD = 7
TRANSACTION_MANAGER = 14
LOGIN7 = 16
SSPI = 17
PRELOGIN = 18

_HEADER = struct.Struct(">BBHHBB")


class ConnectionClosed(Exception):
    """The client closed the connection."""


class PacketReader:
    """Read whole TDS messages from a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()

    def _fill(self, n: int) -> None:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise ConnectionClosed()
            self._buf += chunk

    def read_message(self) -> tuple[int, bytes]:
        """The next message: (packet type, payload)."""
        payload = bytearray()
        while True:
            self._fill(8)
            ptype, status, length, _spid, _pid, _win = _HEADER.unpack_from(self._buf, 0)
            self._fill(length)
            payload += self._buf[8:length]
            del self._buf[:length]
            if status & 0x01:
                return ptype, bytes(payload)

    def attention_pending(self) -> bool:
        """True if the client has sent an ATTENTION packet (checked without blocking)."""
        if len(self._buf) >= 1:
            return self._buf[0] == ATTENTION
        pending = getattr(self.sock, "pending", None)  # TLS: decrypted bytes select() cannot see
        readable = bool(pending and pending())
        if not readable:
            readable = bool(select.select([self.sock], [], [], 0)[0])
        if not readable:
            return False
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionClosed()
        self._buf += chunk
        return self._buf[0] == ATTENTION


class PacketWriter:
    """Buffer a response message and send it as packets of the negotiated size."""

    def __init__(self, sock: socket.socket, packet_size: int = 4096) -> None:
        self.sock = sock
        self.packet_size = packet_size
        self.buf = bytearray()
        self._packet_id = 1
        self.flush_threshold = 256 * 1024

    def write(self, data: bytes) -> None:
        self.buf += data

    def maybe_flush(self) -> None:
        """Send whole packets once enough data is buffered."""
        if len(self.buf) >= self.flush_threshold:
            self._send(final=False)

    def _send(self, final: bool, packet_type: int = TABULAR_RESULT) -> None:
        body = self.packet_size - 8
        buf = self.buf
        n = len(buf)
        full = n // body if not final else (n + body - 1) // body
        if final and n == 0:
            full = 1
        if not final and n % body == 0:
            full -= 1  # keep the last packet for the end-of-message flag
        out = bytearray()
        pos = 0
        for i in range(full):
            chunk = buf[pos : pos + body]
            pos += len(chunk)
            last = final and i == full - 1
            out += _HEADER.pack(packet_type, 1 if last else 0, len(chunk) + 8, 0, self._packet_id, 0)
            out += chunk
            self._packet_id = (self._packet_id + 1) & 0xFF
        del buf[:pos]
        self.sock.sendall(out)

    def end_message(self, packet_type: int = TABULAR_RESULT) -> None:
        """Send everything buffered, the last packet flagged end-of-message."""
        self._send(final=True, packet_type=packet_type)
        self._packet_id = 1
