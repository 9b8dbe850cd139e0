"""TLS as SQL Server negotiates it: in PRELOGIN (login only or everything), TDS 8.0 strict, or off."""

from __future__ import annotations

import os
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymssql
import pyodbc
import pytest

from sqlserver_cdc_simulator import Engine, SimulatorServer
from sqlserver_cdc_simulator.tds import requests as R
from sqlserver_cdc_simulator.tds import tls as TLS

PASSWORD = "Tls-Test-1!"
needs_freetds = pytest.mark.skipif("FreeTDS" not in pyodbc.drivers(), reason="needs the FreeTDS ODBC driver")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, SimulatorServer]]:
    """One simulator per TLS setting, sharing one engine."""
    engine = Engine(PASSWORD)
    running = {mode: SimulatorServer(engine, "127.0.0.1", 0, tls=mode).start() for mode in TLS.TLS_MODES}
    yield running
    for server in running.values():
        server.stop()
    engine.close()


def _odbc(server: SimulatorServer, encryption: str) -> pyodbc.Connection:
    return pyodbc.connect(
        f"DRIVER={{FreeTDS}};SERVER={server.host};PORT={server.port};TDS_Version=7.4;UID=sa;PWD={PASSWORD};"
        f"Encryption={encryption};",
        autocommit=True,
        timeout=10,
    )


def _prelogin(encryption: int) -> bytes:
    options = struct.pack(">BHHBHHB", 0, 11, 6, 1, 17, 1, 0xFF) + b"\x00" * 6 + bytes([encryption])
    return struct.pack(">BBHHBB", 0x12, 1, 8 + len(options), 0, 1, 0) + options


def _read_message(sock: Any) -> tuple[int, bytes]:
    header = b""
    while len(header) < 8:
        chunk = sock.recv(8 - len(header))
        if not chunk:
            raise ConnectionError("closed")
        header += chunk
    length = struct.unpack(">H", header[2:4])[0] - 8
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return header[0], body


def _encryption_answer(body: bytes) -> int:
    pos = 0
    while body[pos] != 0xFF:
        token, offset, length = struct.unpack_from(">BHH", body, pos)
        if token == 1:
            return body[offset]
        pos += 5
    raise AssertionError("no ENCRYPTION option")


@pytest.mark.parametrize(
    ("mode", "client", "answer", "scope"),
    [
        ("on", TLS.ENCRYPT_OFF, TLS.ENCRYPT_OFF, "login"),  # SQL Server encrypts the login anyway
        ("on", TLS.ENCRYPT_ON, TLS.ENCRYPT_ON, "all"),
        ("on", TLS.ENCRYPT_REQ, TLS.ENCRYPT_REQ, "all"),
        ("on", TLS.ENCRYPT_NOT_SUP, TLS.ENCRYPT_NOT_SUP, "none"),
        ("force", TLS.ENCRYPT_OFF, TLS.ENCRYPT_ON, "all"),
        ("off", TLS.ENCRYPT_OFF, TLS.ENCRYPT_NOT_SUP, "none"),
    ],
)
def test_prelogin_encryption_negotiation(mode: str, client: int, answer: int, scope: str) -> None:
    """MS-TDS 2.2.6.5: the ENCRYPTION answer for each client request and server setting."""
    assert TLS.negotiate(mode, client) == (answer, scope)


def test_a_client_requiring_encryption_is_refused_when_tls_is_off(
    servers: dict[str, SimulatorServer],
) -> None:
    server = servers["off"]
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(_prelogin(TLS.ENCRYPT_REQ))
        _ptype, body = _read_message(sock)
        assert _encryption_answer(body) == TLS.ENCRYPT_NOT_SUP
        assert sock.recv(1) == b""  # closed at once: the client cannot go on


@needs_freetds
@pytest.mark.parametrize("encryption", ["off", "request", "require"])
def test_freetds_logs_in_with_each_encryption_setting(
    servers: dict[str, SimulatorServer], encryption: str
) -> None:
    """FreeTDS off = login-only TLS, request/require = the whole session over TLS (a large result too)."""
    conn = _odbc(servers["on"], encryption)
    cur = conn.cursor()
    assert (
        cur.execute("SELECT DATALENGTH(REPLICATE(CAST('x' AS varchar(max)), 300000))").fetchone()[0] == 300000
    )
    with pytest.raises(pyodbc.Error, match="208"):
        cur.execute("SELECT * FROM dbo.no_such_table")
    assert cur.execute("SELECT 1").fetchone()[0] == 1  # the connection survives the error
    conn.close()


@needs_freetds
def test_force_encryption_encrypts_a_client_that_asked_for_login_only(
    servers: dict[str, SimulatorServer],
) -> None:
    """FreeTDS's default sends ENCRYPT_OFF; a forcing server answers ENCRYPT_ON and encrypts everything."""
    conn = _odbc(servers["force"], "request")
    assert conn.cursor().execute("SELECT 42").fetchone()[0] == 42
    conn.close()
    server = servers["force"]
    conn = pyodbc.connect(
        f"DRIVER={{FreeTDS}};SERVER={server.host};PORT={server.port};TDS_Version=7.4;UID=sa;PWD={PASSWORD};",
        autocommit=True,
        timeout=10,
    )
    assert conn.cursor().execute("SELECT 43").fetchone()[0] == 43
    conn.close()


@needs_freetds
def test_force_encryption_refuses_a_client_without_tls(servers: dict[str, SimulatorServer]) -> None:
    """FreeTDS Encryption=off sends ENCRYPT_NOT_SUP: a server forcing encryption refuses it, at once."""
    started = time.monotonic()
    with pytest.raises(pyodbc.OperationalError):
        _odbc(servers["force"], "off")
    assert time.monotonic() - started < 5


@needs_freetds
def test_tls_off_serves_clients_without_encryption(servers: dict[str, SimulatorServer]) -> None:
    conn = _odbc(servers["off"], "off")
    assert conn.cursor().execute("SELECT 7").fetchone()[0] == 7
    conn.close()


def test_pymssql_with_its_defaults(servers: dict[str, SimulatorServer]) -> None:
    server = servers["on"]
    conn = pymssql.connect(
        server=server.host, port=str(server.port), user="sa", password=PASSWORD, login_timeout=10
    )
    cur = conn.cursor()
    cur.execute("SELECT @@SPID")
    assert cur.fetchone()[0] > 0
    conn.close()


def _client_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the simulator's certificate is self-signed
    ctx.set_alpn_protocols(["tds/8.0"])
    return ctx


def test_tds8_strict_tls_comes_first(servers: dict[str, SimulatorServer]) -> None:
    """TDS 8.0 (Encrypt=strict): TLS before any TDS, ALPN tds/8.0, then PRELOGIN inside it."""
    server = servers["on"]
    raw = socket.create_connection((server.host, server.port), timeout=5)
    with _client_context().wrap_socket(raw, server_hostname="localhost") as sock:
        assert sock.selected_alpn_protocol() == "tds/8.0"
        assert sock.version() in ("TLSv1.2", "TLSv1.3")
        sock.sendall(_prelogin(TLS.ENCRYPT_NOT_SUP))
        ptype, body = _read_message(sock)
        assert ptype == 4
        assert _encryption_answer(body) in (TLS.ENCRYPT_NOT_SUP, TLS.ENCRYPT_ON, TLS.ENCRYPT_REQ)


def test_tds8_strict_is_refused_at_once_when_tls_is_off(servers: dict[str, SimulatorServer]) -> None:
    """Never a hang: with TLS off a TLS ClientHello gets the connection closed immediately."""
    server = servers["off"]
    raw = socket.create_connection((server.host, server.port), timeout=5)
    started = time.monotonic()
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _client_context().wrap_socket(raw, server_hostname="localhost")
    assert time.monotonic() - started < 2
    raw.close()


def test_certificate_is_self_signed_and_made_once() -> None:
    cert_pem, key_pem = TLS.self_signed_certificate()
    assert b"BEGIN CERTIFICATE" in cert_pem and b"PRIVATE KEY" in key_pem
    assert TLS.self_signed_certificate() == (cert_pem, key_pem)


def test_command_line_tls_settings(tmp_path: Path) -> None:
    """``--tls off`` serves FreeTDS without TLS; ``--tls-cert/--tls-key`` serve the user's certificate."""
    cert_pem, key_pem = TLS.self_signed_certificate()
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    for extra in (
        ["--tls", "off"],
        ["--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem")],
    ):
        command = [
            sys.executable,
            "-m",
            "sqlserver_cdc_simulator",
            "--port",
            "0",
            *extra,
        ]
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "SQLSERVER_SIMULATOR_PASSWORD": PASSWORD},
        )
        try:
            host, port = proc.stdout.readline().split()[1].rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.sendall(_prelogin(TLS.ENCRYPT_ON))
            _ptype, body = _read_message(sock)
            sock.close()
            expected = TLS.ENCRYPT_NOT_SUP if extra[:2] == ["--tls", "off"] else TLS.ENCRYPT_ON
            assert _encryption_answer(body) == expected
        finally:
            proc.terminate()
            proc.wait(10)
    refused = subprocess.run(
        [sys.executable, "-m", "sqlserver_cdc_simulator", "--tls", "maybe"],
        capture_output=True,
        text=True,
        env={**os.environ, "SQLSERVER_SIMULATOR_PASSWORD": PASSWORD},
    )
    assert refused.returncode == 2 and "--tls" in refused.stderr


def test_a_named_transaction_manager_request_counts_the_name_in_bytes() -> None:
    """tedious sends ``beginTransaction(cb, name)`` with the name's length in bytes (MS-TDS 2.2.6.9)."""
    name = "tx\u00e9name".encode("utf-16-le")
    headers = struct.pack("<IIHQI", 22, 18, 2, 0, 1)
    begin = headers + struct.pack("<HB", 5, 2) + bytes([len(name)]) + name
    _headers, request = R.parse_tm(begin)
    assert (request.kind, request.name, request.isolation) == ("begin", "tx\u00e9name", 2)
    commit_and_begin = (
        headers + struct.pack("<H", 7) + bytes([len(name)]) + name + b"\x01\x05\x04" + b"n\x00e\x00w\x00"[:4]
    )
    _headers, request = R.parse_tm(commit_and_begin)
    assert (request.kind, request.begin_new, request.isolation, request.name) == ("commit", True, 5, "ne")
