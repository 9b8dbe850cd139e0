"""
TLS with a certificate the client trusts: a test CA signs the simulator's certificate (``tls_certificate``,
the ``--tls-cert`` / ``--tls-key`` options), and the clients verify it instead of trusting any certificate.

- TDS 8.0 (``Encrypt=strict``; MS-TDS 2.2.6.5, docs/connect/odbc/dsn-connection-string-attribute.md, Encrypt):
  Microsoft's ODBC Driver 18 verifies the certificate against the CA (OpenSSL's ``SSL_CERT_FILE``) and
  connects; without the CA it refuses the certificate, as it does a real server's untrusted one.
- Login-only encryption (PRELOGIN ENCRYPTION = ENCRYPT_OFF, MS-TDS 2.2.6.5: the server answers ENCRYPT_OFF,
  the login packet travels in TLS, the rest in clear): tiberius (through connectorx) with ``encrypt=false``
  and the CA logs in at once. Its reported 30 s "hang" with ``encrypt=false`` alone is tiberius refusing the
  simulator's self-signed certificate and its connection pool retrying until its timeout, which a real
  server's self-signed certificate causes too: not a simulator fault.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyodbc
import pytest

from sqlserver_cdc_simulator import Engine, SimulatorServer
from sqlserver_cdc_simulator.connections import MS_ODBC_DRIVER
from sqlserver_cdc_simulator.tds.tls import localhost_names, make_certificate, private_key_pem

PASSWORD = "Tls-Trusted-1!"
needs_driver18 = pytest.mark.skipif(
    MS_ODBC_DRIVER not in pyodbc.drivers(),
    reason="Microsoft's ODBC Driver 18 is not registered (make client-deps unpacks it from mssql-python-odbc)",
)


def _write_test_ca(directory: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate it signed for localhost / 127.0.0.1: (ca.pem, cert.pem, key.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = make_certificate(
        "sqlserver-cdc test CA",
        ca_key,
        days=30,
        extensions=[(x509.BasicConstraints(ca=True, path_length=None), True)],
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = make_certificate(
        "localhost",
        key,
        days=30,
        issuer=(ca.subject, ca_key),
        extensions=[
            (localhost_names(), False),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        ],
    )
    paths = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(private_key_pem(key))
    return paths


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimulatorServer, Path]]:
    """A simulator serving a certificate of the test CA; (server, the CA's PEM file)."""
    ca, cert, key = _write_test_ca(tmp_path_factory.mktemp("test-ca"))
    engine = Engine(PASSWORD)
    server = SimulatorServer(engine, "127.0.0.1", 0, tls_certificate=(str(cert), str(key))).start()
    yield server, ca
    server.stop()
    engine.close()


def _driver18(server: SimulatorServer, options: str, ca: Path | None) -> str:
    """Connect with Driver 18 in a fresh process (OpenSSL reads SSL_CERT_FILE there); its answer or error."""
    code = (
        "import pyodbc, sys\n"
        "try:\n"
        "    c = pyodbc.connect(sys.argv[1], timeout=10)\n"
        "    print('OK', c.cursor().execute('SELECT 1').fetchone()[0])\n"
        "except pyodbc.Error as e:\n"
        "    print('ERR', e)\n"
    )
    connection = (
        f"DRIVER={{{MS_ODBC_DRIVER}}};SERVER=tcp:{server.host},{server.port};UID=sa;PWD={{{PASSWORD}}};"
        f"HostNameInCertificate=localhost;{options}"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    if ca is not None:
        env["SSL_CERT_FILE"] = str(ca)
    done = subprocess.run(
        [sys.executable, "-c", code, connection], env=env, capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip() or done.stderr.strip()[-500:]


@needs_driver18
@pytest.mark.parametrize("options", ["Encrypt=strict;", "Encrypt=yes;", "Encrypt=no;"])
def test_driver18_verifies_the_certificate_of_a_trusted_ca(trusted: Any, options: str) -> None:
    server, ca = trusted
    assert _driver18(server, options, ca) == "OK 1"


@needs_driver18
@pytest.mark.parametrize("options", ["Encrypt=strict;", "Encrypt=yes;"])
def test_driver18_refuses_the_certificate_without_the_ca(trusted: Any, options: str) -> None:
    server, _ca = trusted
    outcome = _driver18(server, options, None)
    assert outcome.startswith("ERR") and "certificate verify failed" in outcome, outcome


@pytest.mark.parametrize("encrypt", ["false", "true"])
def test_tiberius_login_only_and_full_tls_with_the_ca(trusted: Any, encrypt: str) -> None:
    """encrypt=false is login-only TLS (PRELOGIN ENCRYPT_OFF); it answers at once, not after a 30 s timeout."""
    cx = pytest.importorskip("connectorx", reason="connectorx is in the dev extra")
    server, ca = trusted
    url = (
        f"mssql://sa:{quote(PASSWORD)}@{server.host}:{server.port}/master"
        f"?encrypt={encrypt}&trust_server_certificate_ca={quote(str(ca))}"
    )
    started = time.monotonic()
    table = cx.read_sql(url, "SELECT 7 AS n", return_type="arrow")
    assert table.to_pylist() == [{"n": 7}]
    assert time.monotonic() - started < 10
