"""RPC requests the installed drivers do not send (sp_prepare / sp_execute / sp_unprepare, procedures by name),
decoded from hand-built TDS payloads and answered by a real connection handler over a socket pair."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest

from sqlserver_cdc_simulator import Engine
from sqlserver_cdc_simulator.server import Connection
from sqlserver_cdc_simulator.tds import requests as R


def _nvarchar_param(value: str) -> bytes:
    data = value.encode("utf-16-le")
    return (
        b"\x00\x00"
        + b"\xe7\xff\xff"
        + b"\x09\x04\xd0\x00\x34"
        + struct.pack("<Q", len(data))
        + struct.pack("<I", len(data))
        + data
        + b"\x00\x00\x00\x00"
    )


def _int_param(value: int | None, output: bool = False, name: str = "") -> bytes:
    encoded_name = bytes([len(name)]) + name.encode("utf-16-le")
    head = encoded_name + (b"\x01" if output else b"\x00") + b"\x26\x04"
    return head + (b"\x00" if value is None else b"\x04" + struct.pack("<i", value))


def _rpc(proc_id: int, params: bytes) -> bytes:
    headers = struct.pack("<IIHQI", 22, 18, 2, 0, 1)
    return headers + struct.pack("<HHH", 0xFFFF, proc_id, 0) + params


class _Handler:
    def __init__(self) -> None:
        self.engine = Engine("Pw-1!")
        self.server = type("S", (), {"engine": self.engine})()
        self.a, self.b = socket.socketpair()
        self.conn = Connection(self.server, self.a)  # type: ignore[arg-type]
        self.conn.session = self.engine.open_session()

    def call(self, payload: bytes) -> bytes:
        self.conn._rpc(payload)
        self.b.settimeout(5)
        out = b""
        while True:
            header = self.b.recv(8)
            length = struct.unpack(">H", header[2:4])[0]
            body = b""
            while len(body) < length - 8:
                body += self.b.recv(length - 8 - len(body))
            out += body
            if header[1] & 1:
                return out


@pytest.fixture
def handler() -> Any:
    h = _Handler()
    yield h
    h.a.close()
    h.b.close()


def test_rpc_payload_decoding_reads_typed_parameters() -> None:
    payload = _rpc(12, _int_param(7) + _int_param(None, output=True, name="@o"))
    _headers, calls = R.parse_rpc(payload)
    assert calls[0].proc == "sp_execute"
    assert [(p.name, p.type.name, p.value, p.output) for p in calls[0].params] == [
        ("", "int", 7, False),
        ("@o", "int", None, True),
    ]


def test_sp_prepare_then_sp_execute_then_sp_unprepare(handler: Any) -> None:
    prepared = handler.call(
        _rpc(
            11,
            _int_param(None, output=True, name="@h")
            + _nvarchar_param("@a int")
            + _nvarchar_param("SELECT @a + 1 AS n"),
        )
    )
    assert b"\xac" in prepared  # RETURNVALUE with the handle
    handle = 1
    executed = handler.call(_rpc(12, _int_param(handle) + _int_param(41)))
    assert b"\x81\x01\x00" in executed  # COLMETADATA, one column
    assert b"\xd1\x04" + struct.pack("<i", 42) in executed  # ROW: INTN(4) 42
    assert executed[-13] == 0xFE  # the response ends with DONEPROC (token + status, command, 8-byte count)
    handler.call(_rpc(15, _int_param(handle)))
    missing = handler.call(_rpc(12, _int_param(handle) + _int_param(1)))
    assert b"\xaa" in missing and struct.pack("<i", 8179) in missing  # ERROR 8179: unknown handle
