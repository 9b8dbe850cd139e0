"""TLS as SQL Server does it: negotiated in PRELOGIN (TDS 7.x) or before any TDS (TDS 8.0 strict).

TDS 7.x: the PRELOGIN ENCRYPTION options of client and server decide between no encryption,
encryption of the login only, and encryption of the whole connection (MS-TDS 2.2.6.5). The TLS
handshake then travels inside PRELOGIN packets; afterwards TLS records go straight over TCP.
TDS 8.0 (``Encrypt=strict``): the client starts TLS at once, and PRELOGIN follows inside it.

Without a certificate of the user's, one self-signed certificate is made per process (as SQL Server
makes ``SSL_Self_Signed_Fallback``); clients must trust it (``TrustServerCertificate=yes``,
``trustServerCertificate=true``, tedious ``trustServerCertificate: true``).
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import os
import socket
import ssl
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

# PRELOGIN ENCRYPTION values (MS-TDS 2.2.6.5)
ENCRYPT_OFF = 0x00
ENCRYPT_ON = 0x01
ENCRYPT_NOT_SUP = 0x02
ENCRYPT_REQ = 0x03

# server settings
TLS_OFF = "off"  # no TLS: PRELOGIN answers "not supported", TDS 8.0 connections are closed
TLS_ON = "on"  # SQL Server's default: the login always, everything when the client asks
TLS_FORCE = "force"  # "Force Encryption": everything, whatever the client asks
TLS_MODES = (TLS_OFF, TLS_ON, TLS_FORCE)

TLS_RECORD_HANDSHAKE = 0x16  # first byte of a TLS ClientHello (a TDS 8.0 client)


class TlsRefused(Exception):
    """The client's encryption request cannot be met (it requires TLS and the server has none)."""


def negotiate(mode: str, client: int) -> tuple[int, str]:
    """The server's PRELOGIN ENCRYPTION answer and what gets encrypted: ``none``, ``login`` or ``all``.

    :param mode: the server setting (:data:`TLS_OFF`, :data:`TLS_ON`, :data:`TLS_FORCE`)
    :param client: the client's PRELOGIN ENCRYPTION value
    """
    client &= 0x0F  # the high bits carry ENCRYPT_CLIENT_CERT
    if mode == TLS_OFF:
        if client in (ENCRYPT_ON, ENCRYPT_REQ):
            raise TlsRefused("the client requires encryption and the simulator runs with TLS off")
        return ENCRYPT_NOT_SUP, "none"
    if client == ENCRYPT_NOT_SUP:
        if mode == TLS_FORCE:
            raise TlsRefused("the server forces encryption and the client does not support it")
        return ENCRYPT_NOT_SUP, "none"
    if client == ENCRYPT_OFF and mode == TLS_ON:
        return ENCRYPT_OFF, "login"
    return ENCRYPT_ON if client != ENCRYPT_REQ else ENCRYPT_REQ, "all"


def localhost_names() -> Any:
    """The subjectAltName extension of a certificate for this machine: ``localhost`` and ``127.0.0.1``."""
    from cryptography import x509

    return x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )


def make_certificate(
    common_name: str,
    key: Any,
    *,
    days: int,
    issuer: tuple[Any, Any] | None = None,
    extensions: Sequence[tuple[Any, bool]] = (),
) -> Any:
    """
    Return an X.509 certificate of ``key``'s public key, valid from a day ago for ``days`` days.

    :param common_name: the subject's CN.
    :param key: the subject's private key.
    :param days: how long it stays valid.
    :param issuer: (the issuer's name, its private key) that sign it; self-signed when None.
    :param extensions: (extension, critical) pairs to add.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    issuer_name, issuer_key = issuer if issuer is not None else (name, key)
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=days))
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def private_key_pem(key: Any) -> bytes:
    """``key`` in PEM (PKCS #8, unencrypted)."""
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@functools.lru_cache(maxsize=1)
def self_signed_certificate() -> tuple[bytes, bytes]:
    """A self-signed certificate and its key (PEM), made once per process."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    cert = make_certificate(
        "SSL_Self_Signed_Fallback", key, days=3650, extensions=[(localhost_names(), False)]
    )
    return cert.public_bytes(serialization.Encoding.PEM), private_key_pem(key)


def server_contexts(certificate: tuple[str, str] | None = None) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """TLS contexts for TDS 7.x (TLS 1.2, as drivers expect inside PRELOGIN) and TDS 8.0 (ALPN tds/8.0).

    :param certificate: (certificate file, key file) in PEM; a self-signed one when None
    """
    contexts = []
    for strict in (False, True):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if not strict:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        else:
            ctx.set_alpn_protocols(["tds/8.0"])
        ctx.num_tickets = 0  # no post-handshake messages: the client switches framing right after
        _load_certificate(ctx, certificate)
        contexts.append(ctx)
    return contexts[0], contexts[1]


def _load_certificate(ctx: ssl.SSLContext, certificate: tuple[str, str] | None) -> None:
    if certificate is not None:
        ctx.load_cert_chain(certificate[0], certificate[1])
        return
    cert_pem, key_pem = self_signed_certificate()
    with tempfile.TemporaryDirectory(prefix="sqlserver-sim-tls-") as tmp:
        cert_file, key_file = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        with open(cert_file, "wb") as f:
            f.write(cert_pem)
        with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(key_pem)
        ctx.load_cert_chain(cert_file, key_file)


class TlsChannel:
    """TLS records over a TCP socket after a handshake carried in PRELOGIN packets.

    Offers what the packet reader and writer use of a socket: ``recv``, ``sendall``, ``fileno``
    and ``pending`` (decrypted bytes not yet read, which ``select`` cannot see).
    """

    def __init__(
        self, sock: socket.socket, tls: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO
    ):
        self.sock = sock
        self.tls = tls
        self.incoming = incoming
        self.outgoing = outgoing

    def recv(self, n: int) -> bytes:
        while True:
            try:
                return self.tls.read(n)
            except ssl.SSLWantReadError:
                data = self.sock.recv(65536)
                if not data:
                    return b""
                self.incoming.write(data)
            except ssl.SSLZeroReturnError:
                return b""

    def sendall(self, data: bytes) -> None:
        self.tls.write(data)
        self._flush()

    def _flush(self) -> None:
        out = self.outgoing.read()
        if out:
            self.sock.sendall(out)

    def pending(self) -> int:
        return self.tls.pending()

    def fileno(self) -> int:
        return self.sock.fileno()


def prelogin_handshake(
    sock: socket.socket,
    context: ssl.SSLContext,
    read_message: Callable[[], tuple[int, bytes]],
    send_prelogin: Callable[[bytes], None],
) -> TlsChannel:
    """Run the server side of a TLS handshake whose records travel in PRELOGIN packets.

    :param sock: the client's TCP socket
    :param context: the server TLS context
    :param read_message: reads the client's next TDS message: (packet type, payload)
    :param send_prelogin: sends bytes to the client as one PRELOGIN message
    """
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_side=True)
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            out = outgoing.read()
            if out:
                send_prelogin(out)
            _ptype, payload = read_message()
            incoming.write(payload)
    out = outgoing.read()
    if out:
        send_prelogin(out)
    return TlsChannel(sock, tls, incoming, outgoing)
