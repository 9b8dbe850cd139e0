"""SimulatorServer: the TDS listener; one thread per client connection.

Each connection does PRELOGIN (with TLS negotiation, :mod:`.tds.tls`), LOGIN7 (SQL authentication against
the engine's logins), then serves SQL_BATCH, RPC (sp_executesql, sp_prepexec, sp_prepare,
sp_execute, sp_unprepare and stored procedures by name), Transaction Manager requests and
ATTENTION, encoding the session's events as TDS tokens.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import socketserver
import ssl
import struct
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from . import types as T
from .engine import Engine
from .errors import SqlError, login_failed
from .events import EnvChange, ErrorEvent, Message, ResultSet, StatementDone
from .extensions import ProcedureArgs, TypedValue
from .session import Session
from .tds import packets as P
from .tds import requests as R
from .tds import tls as TLS
from .tds import tokens as K
from .version import loginack_version, prelogin_version

log = logging.getLogger(__name__)

_ROWS_PER_CHUNK = 512


class _Cancelled(Exception):
    pass


class Connection:
    """One client connection."""

    def __init__(self, server: SimulatorServer, sock: socket.socket) -> None:
        self.server = server
        self.engine = server.engine
        self.sock = sock
        self.reader = P.PacketReader(sock)
        self.writer = P.PacketWriter(sock)
        self.session: Session | None = None
        self.tds_version = 0x74000004

    # ---------------------------------------------------------------- lifecycle
    def serve(self) -> None:
        try:
            if not self._login():
                return
            while True:
                ptype, payload = self.reader.read_message()
                try:
                    self._request(ptype, payload)
                except (P.ConnectionClosed, ConnectionResetError, BrokenPipeError):
                    raise
                except Exception as exc:  # a simulator bug: answer with an error, keep the connection
                    log.exception("simulator request of packet type %s failed", ptype)
                    self.writer.buf.clear()
                    self._error_response(
                        SqlError(
                            8630,
                            16,
                            1,
                            f"Internal error in the SQL Server simulator ({type(exc).__name__}: {exc}) "
                            f"while serving a request of TDS packet type {ptype}. Please report it.",
                        )
                    )
        except (P.ConnectionClosed, ConnectionResetError, BrokenPipeError, OSError):
            pass
        except Exception:  # pragma: no cover - keep the server alive, log the bug
            log.exception("simulator connection failed")
        finally:
            if self.session is not None:
                try:
                    self.engine.close_session(self.session)
                except Exception:  # pragma: no cover
                    log.exception("closing session failed")
            with contextlib.suppress(OSError):
                self.sock.close()

    def _request(self, ptype: int, payload: bytes) -> None:
        """Serve one request message."""
        if ptype == P.SQL_BATCH:
            self._sql_batch(payload)
        elif ptype == P.RPC:
            self._rpc(payload)
        elif ptype == P.TRANSACTION_MANAGER:
            self._tm(payload)
        elif ptype == P.ATTENTION:
            self.writer.write(K.done(K.DONE_ATTN))
            self.writer.end_message()
        else:
            self._error_response(
                SqlError(
                    4002,
                    16,
                    1,
                    f"The incoming tabular data stream (TDS) protocol stream is incorrect. Packet type {ptype} is not supported.",
                )
            )

    def _use_transport(self, transport: Any) -> None:
        """Read and write TDS packets through *transport* (the socket, or TLS over it)."""
        self.reader.sock = transport
        self.writer.sock = transport

    def _start_strict_tls(self) -> bool:
        """TDS 8.0: the client opened with a TLS ClientHello; finish the handshake before any TDS."""
        if self.server.tls_mode == TLS.TLS_OFF:
            log.warning("closing a TDS 8.0 (strict encryption) connection: the simulator runs with TLS off")
            return False
        self.sock.settimeout(10)
        try:
            tls_sock = self.server.strict_context.wrap_socket(self.sock, server_side=True)
        except (ssl.SSLError, OSError) as e:
            log.warning("TDS 8.0 TLS handshake failed: %s", e)
            return False
        tls_sock.settimeout(None)
        self._use_transport(tls_sock)
        return True

    def _negotiate_prelogin(self, payload: bytes, strict: bool) -> str | None:
        """Answer PRELOGIN; run the TLS handshake it agrees on. Returns the encryption scope or None."""
        options = R.parse_prelogin(payload)
        client = options.get(1, bytes([TLS.ENCRYPT_NOT_SUP]))[:1] or bytes([TLS.ENCRYPT_NOT_SUP])
        if strict:  # already inside TLS: the ENCRYPTION option plays no part
            self.writer.write(R.prelogin_response(prelogin_version(), TLS.ENCRYPT_NOT_SUP))
            self.writer.end_message()
            return "strict"
        try:
            answer, scope = TLS.negotiate(self.server.tls_mode, client[0])
        except TLS.TlsRefused as e:
            log.warning("refusing a connection: %s", e)
            self.writer.write(R.prelogin_response(prelogin_version(), TLS.ENCRYPT_NOT_SUP))
            self.writer.end_message()
            return None
        self.writer.write(R.prelogin_response(prelogin_version(), answer))
        self.writer.end_message()
        if scope != "none":

            def send_prelogin(data: bytes) -> None:
                self.writer.write(data)
                self.writer.end_message(P.PRELOGIN)

            channel = TLS.prelogin_handshake(
                self.sock, self.server.context, self.reader.read_message, send_prelogin
            )
            self._use_transport(channel)
        return scope

    def _login(self) -> bool:
        first = self.sock.recv(1, socket.MSG_PEEK)
        if not first:
            return False
        strict = first[0] == TLS.TLS_RECORD_HANDSHAKE
        if strict and not self._start_strict_tls():
            return False
        ptype, payload = self.reader.read_message()
        scope = "none"
        if ptype == P.PRELOGIN:
            negotiated = self._negotiate_prelogin(payload, strict)
            if negotiated is None:
                return False
            scope = negotiated
            ptype, payload = self.reader.read_message()
        if ptype != P.LOGIN7:
            return False
        if scope == "login":  # login-only encryption: the LOGIN7 packet only; its answer is plain TDS
            self._use_transport(self.sock)
        return self._answer_login(payload)

    def _answer_login(self, payload: bytes) -> bool:
        login = R.parse_login7(payload)
        self.tds_version = (
            min(login.tds_version, 0x74000004) if login.tds_version >= 0x72000000 else login.tds_version
        )
        packet_size = min(max(login.packet_size or 4096, 512), 32767)
        w = self.writer
        try:
            user = self.engine.authenticate(login.user, login.password)
            database = login.database or user.default_database
            if database.lower() not in self.engine.databases:
                w.write(
                    K.message(
                        K.ERROR,
                        4060,
                        1,
                        11,
                        f'Cannot open database "{database}" requested by the login. The login failed.',
                        self.engine.server_name,
                    )
                )
                raise login_failed(login.user)
            self.session = self.engine.open_session(
                user, database, app_name=login.app_name, host_name=login.host_name
            )
        except SqlError as e:
            w.write(K.message(K.ERROR, e.number, e.state, e.severity, e.message, self.engine.server_name))
            w.write(K.done(K.DONE_ERROR))
            w.end_message()
            return False
        s = self.session
        srv = self.engine.server_name
        w.write(K.envchange_str(K.ENV_DATABASE, s.database, "master"))
        w.write(K.message(K.INFO, 5701, 2, 0, f"Changed database context to '{s.database}'.", srv))
        w.write(K.envchange_bytes(K.ENV_COLLATION, K.COLLATION, b""))
        w.write(K.envchange_str(K.ENV_LANGUAGE, "us_english", ""))
        w.write(K.message(K.INFO, 5703, 1, 0, "Changed language setting to us_english.", srv))
        w.write(K.loginack(struct.pack(">I", self.tds_version), loginack_version()))
        w.write(K.envchange_str(K.ENV_PACKETSIZE, str(packet_size), str(4096)))
        if login.has_feature_ext:
            w.write(bytes([K.FEATUREEXTACK, 0xFF]))
        w.write(K.done(K.DONE_FINAL))
        w.end_message()
        w.packet_size = packet_size
        return True

    # ---------------------------------------------------------------- requests
    def _sql_batch(self, payload: bytes) -> None:
        _headers, sql = R.parse_sql_batch(payload)
        s = self.session
        s.clear_variables()
        s.in_rpc = False
        _ok, cancelled = self._send_events(s.execute_batch(sql), rpc=False)
        if not cancelled:  # a cancelled response was already ended with DONE(ATTN)
            self.writer.end_message()

    def _tm(self, payload: bytes) -> None:
        _headers, req = R.parse_tm(payload)
        s = self.session
        w = self.writer
        try:
            events: list[Any] = []
            if req.kind == "begin":
                if req.isolation == 5:
                    s.isolation = "SNAPSHOT"
                elif req.isolation in (1, 2, 3, 4):
                    s.isolation = "READ COMMITTED"
                events += s.begin_transaction(req.name)
            elif req.kind in ("commit", "rollback"):
                if s.xact is not None and s.xact.explicit:
                    # a TM request ends the whole transaction, whatever the nesting
                    s.xact.trancount = 1
                    events += s.commit_transaction() if req.kind == "commit" else s.rollback_transaction()
                if req.begin_new:
                    if req.isolation == 5:
                        s.isolation = "SNAPSHOT"
                    events += s.begin_transaction(req.name)
            elif req.kind == "save":
                s.save_transaction(req.name)
            else:
                raise SqlError(
                    40517,
                    16,
                    1,
                    "The SQL Server simulator does not support this transaction manager request.",
                )
            for ev in events:
                self._write_envchange(ev)
            w.write(K.done(K.DONE_FINAL))
        except SqlError as e:
            self._write_error(e)
            w.write(K.done(K.DONE_ERROR))
        w.end_message()

    def _rpc(self, payload: bytes) -> None:
        s = self.session
        w = self.writer
        try:
            _headers, calls = R.parse_rpc(payload)
        except SqlError as e:
            self._error_response(e)
            return
        s.in_rpc = True
        try:
            for i, call in enumerate(calls):
                last = i == len(calls) - 1
                ok, cancelled = self._rpc_call(call)
                if cancelled:
                    return  # the response was already ended with DONE(ATTN)
                status = 0 if ok else K.DONE_ERROR
                if not last:
                    status |= K.DONE_MORE
                w.write(K.done(status, 0, K.DONEPROC))
        finally:
            s.in_rpc = False
        w.end_message()

    def _rpc_call(self, call: R.RpcCall) -> tuple[bool, bool]:
        """Run one RPC call; returns (succeeded, cancelled)."""
        s = self.session
        proc = call.proc.lower()
        params = call.params
        outputs: list[tuple[int, R.RpcParam, T.SqlType, Any]] = []
        try:
            if proc == "sp_executesql":
                if not params:
                    raise SqlError(
                        201,
                        16,
                        4,
                        "Procedure or function 'sp_executesql' expects parameter '@statement', which was not supplied.",
                    )
                sql = params[0].value or ""
                decl = params[1].value if len(params) > 1 else ""
                values = [(p.name or None, TypedValue(p.type, p.value)) for p in params[2:]]
                events: Iterable[Any] = s.execute_parameterized(sql, decl or "", values)
            elif proc in ("sp_prepexec", "sp_prepare"):
                decl = params[1].value or ""
                sql = params[2].value or ""
                outputs.append((0, params[0], T.INT, s.prepare(decl, sql)))
                if proc == "sp_prepexec":
                    values = [(None, TypedValue(p.type, p.value)) for p in params[3:]]
                    events = s.execute_parameterized(sql, decl, values)
                else:
                    events = iter(())
            elif proc == "sp_execute":
                handle = params[0].value
                if handle not in s.prepared:
                    raise SqlError(8179, 16, 2, f"Could not find prepared statement with handle {handle}.")
                decl, sql = s.prepared[handle]
                values = [(None, TypedValue(p.type, p.value)) for p in params[1:]]
                events = s.execute_parameterized(sql, decl, values)
            elif proc == "sp_unprepare":
                s.prepared.pop(params[0].value if params else None, None)
                events = iter(())
            elif proc.startswith("sp_cursor"):
                raise SqlError(
                    40517, 16, 1, f"The SQL Server simulator does not support server cursors ({call.proc})."
                )
            else:
                args = ProcedureArgs()
                for p in params:
                    tv = TypedValue(p.type, p.value)
                    if p.name:
                        args.named[p.name.lstrip("@").lower()] = tv
                        if p.output:
                            args.output_names.add(p.name.lstrip("@").lower())
                    else:
                        args.positional.append(tv)
                s.variables = {}
                events = s.run_procedure(call.proc, args)
        except SqlError as e:
            self._write_error(e)
            return False, False
        ok, cancelled = self._send_events(events, rpc=True)
        if cancelled:
            return ok, True
        if ok:
            self.writer.write(
                K.returnstatus(
                    getattr(s, "last_return_status", 0)
                    if not proc.startswith("sp_")
                    or proc
                    not in ("sp_executesql", "sp_prepexec", "sp_execute", "sp_prepare", "sp_unprepare")
                    else 0
                )
            )
            s.last_return_status = 0
            for ordinal, p, t, value in outputs:
                self.writer.write(K.returnvalue(ordinal, p.name, t, value))
            named_out = getattr(s, "last_outputs", None) or {}
            for i, p in enumerate(params):
                if p.output and p.name and p.name.lstrip("@").lower() in named_out:
                    self.writer.write(K.returnvalue(i, p.name, p.type, named_out[p.name.lstrip("@").lower()]))
            s.last_outputs = {}
        return ok, False

    # ---------------------------------------------------------------- encoding
    def _write_error(self, e: SqlError) -> None:
        self.writer.write(
            K.message(K.ERROR, e.number, e.state, e.severity, e.message, self.engine.server_name)
        )

    def _error_response(self, e: SqlError) -> None:
        self._write_error(e)
        self.writer.write(K.done(K.DONE_ERROR))
        self.writer.end_message()

    def _write_envchange(self, ev: EnvChange) -> None:
        if ev.kind == "database":
            self.writer.write(K.envchange_str(K.ENV_DATABASE, ev.new, ev.old))
        else:
            kind = {
                "begin_tran": K.ENV_BEGIN_TRAN,
                "commit_tran": K.ENV_COMMIT_TRAN,
                "rollback_tran": K.ENV_ROLLBACK_TRAN,
            }[ev.kind]
            self.writer.write(K.envchange_bytes(kind, ev.new, ev.old))

    def _send_events(self, events: Iterator[Any], rpc: bool) -> tuple[bool, bool]:
        """Encode events; returns (no error, cancelled by ATTENTION)."""
        w = self.writer
        s = self.session
        done_token = K.DONEINPROC if rpc else K.DONE
        pending: tuple[int, int] | None = None
        ok = True
        gen = iter(events)
        try:
            for ev in gen:
                # an error's trailing INFO (3621 "The statement has been terminated.") precedes its DONE
                if pending is not None and not (isinstance(ev, Message) and pending[0] & K.DONE_ERROR):
                    w.write(K.done(pending[0] | K.DONE_MORE, pending[1], done_token))
                    pending = None
                if isinstance(ev, ResultSet):
                    cols = [(c.name, c.type, c.nullable) for c in ev.columns]
                    w.write(K.colmetadata(cols))
                    encode = K.compile_row_encoder([c.type for c in ev.columns])
                    rows = iter(ev.rows)
                    while True:
                        chunk = list(itertools.islice(rows, _ROWS_PER_CHUNK))
                        if not chunk:
                            break
                        w.write(b"".join(map(encode, chunk)))
                        if len(w.buf) >= w.flush_threshold:
                            if self.reader.attention_pending():
                                raise _Cancelled()
                            w.maybe_flush()
                elif isinstance(ev, StatementDone):
                    status = 0
                    count = 0
                    if ev.rowcount is not None and not s.options.nocount:
                        status |= K.DONE_COUNT
                        count = ev.rowcount
                    if s.xact is not None and s.xact.explicit:
                        status |= K.DONE_INXACT
                    pending = (status, count)
                elif isinstance(ev, Message):
                    w.write(
                        K.message(K.INFO, ev.number, ev.state, ev.severity, ev.text, self.engine.server_name)
                    )
                elif isinstance(ev, EnvChange):
                    self._write_envchange(ev)
                elif isinstance(ev, ErrorEvent):
                    self._write_error(ev.error)
                    pending = (K.DONE_ERROR, 0)
                    ok = False
        except _Cancelled:
            gen_close = getattr(gen, "close", None)
            if gen_close:
                gen_close()
            self.reader.read_message()  # the ATTENTION message itself
            w.write(K.done(K.DONE_ATTN))
            w.end_message()
            return ok, True
        if pending is not None:
            # inside an RPC, RETURNSTATUS / RETURNVALUE / DONEPROC follow: more is coming
            w.write(K.done(pending[0] | (K.DONE_MORE if rpc else 0), pending[1], done_token))
        elif not rpc:
            w.write(K.done(K.DONE_FINAL))
        return ok, False


class _Handler(socketserver.BaseRequestHandler):
    server: _TcpServer

    def handle(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(self.server.owner, self.request)
        self.server.owner._connections.add(conn)
        try:
            conn.serve()
        finally:
            self.server.owner._connections.discard(conn)


class _TcpServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: SimulatorServer


class SimulatorServer:
    """Listen for TDS clients and serve them from an :class:`~.engine.Engine`.

    :param engine: the engine (state) to serve
    :param host: address to listen on
    :param port: TCP port, 0 for a free one
    :param tls: ``on`` (SQL Server's default: the login always encrypted, everything when the client
        asks), ``force`` (everything always) or ``off`` (no TLS, for clients that cannot do it)
    :param tls_certificate: (certificate file, key file) in PEM; a self-signed certificate when None
    """

    def __init__(
        self,
        engine: Engine,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: str = TLS.TLS_ON,
        tls_certificate: tuple[str, str] | None = None,
    ) -> None:
        if tls not in TLS.TLS_MODES:
            raise ValueError(f"tls must be one of {', '.join(TLS.TLS_MODES)}, not {tls!r}")
        self.engine = engine
        self.tls_mode = tls
        if tls != TLS.TLS_OFF:
            self.context, self.strict_context = TLS.server_contexts(tls_certificate)
        self._tcp = _TcpServer((host, port), _Handler)
        self._tcp.owner = self
        self._connections: set[Connection] = set()
        self._thread: threading.Thread | None = None
        self.host, self.port = self._tcp.server_address[:2]

    def start(self) -> SimulatorServer:
        """Accept connections in a background thread."""
        self._thread = threading.Thread(
            target=self._tcp.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="sqlserver-simulator",
            daemon=True,
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._tcp.serve_forever(poll_interval=0.1)

    def close_connections(self) -> None:
        """Disconnect every client."""
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        """Stop listening and disconnect clients."""
        self._tcp.shutdown()
        self._tcp.server_close()
        self.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
