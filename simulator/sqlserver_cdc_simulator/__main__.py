"""Command line: ``python -m sqlserver_cdc_simulator --port 0 --data DIR``.

The ``sa`` password comes from the environment variable ``SQLSERVER_SIMULATOR_PASSWORD``, or from
the variable named by ``--password-env VAR``; ``--password PW`` still works but puts the password
in the process list (``ps``, ``/proc/<pid>/cmdline``), so the environment forms are preferred.

Prints exactly one line ``READY <host>:<port>`` on stdout once it accepts connections, and
exits cleanly (writing its durable snapshot) on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import ssl
import sys
import threading

from sqlserver_cdc_simulator.engine import Engine
from sqlserver_cdc_simulator.server import SimulatorServer

PASSWORD_ENV = "SQLSERVER_SIMULATOR_PASSWORD"
"""The environment variable the ``sa`` password is read from when no option names one."""


def sa_password(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """
    Return the ``sa`` password from ``--password``, ``--password-env VAR`` or ``SQLSERVER_SIMULATOR_PASSWORD``.

    ``--password`` wins; otherwise the variable ``--password-env`` names, else the default variable.

    Exits through ``parser.error`` (status 2, naming the variable, never showing a value) when
    the variable is unset or empty.

    :param parser: the command line's parser (for its error exit).
    :param args: the parsed command line.
    """
    if args.password is not None:
        return args.password
    if args.password_env == "":
        parser.error("--password-env needs the name of an environment variable")
    variable = args.password_env if args.password_env is not None else PASSWORD_ENV
    password = os.environ.get(variable, "")
    if password:
        return password
    state = "is empty" if variable in os.environ else "is not set"
    if args.password_env is not None:
        parser.error(f"--password-env {variable}: the environment variable {variable} {state}")
    parser.error(
        f"no sa password: the environment variable {PASSWORD_ENV} {state}; set it, or name another "
        "variable with --password-env VAR"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the simulator until SIGTERM / SIGINT."""
    parser = argparse.ArgumentParser(
        prog="python -m sqlserver_cdc_simulator",
        description="SQL Server CDC simulator",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=1433, help="TCP port; 0 picks a free one")
    parser.add_argument("--data", default=None, help="directory for durable state (in memory when omitted)")
    password = parser.add_mutually_exclusive_group()
    password.add_argument(
        "--password-env",
        metavar="VAR",
        help=f"read the sa password from the environment variable VAR (default: {PASSWORD_ENV})",
    )
    password.add_argument(
        "--password",
        metavar="PW",
        help="the sa password itself (visible in the process list; prefer the environment)",
    )
    parser.add_argument(
        "--timezone", default="UTC", help="IANA time zone of the server clock, e.g. Europe/Berlin"
    )
    parser.add_argument(
        "--tls",
        choices=("on", "force", "off"),
        default="on",
        help="TLS: on (SQL Server's default: the login always, everything when the client asks), "
        "force (everything), off (no TLS, for clients that cannot do it)",
    )
    parser.add_argument("--tls-cert", metavar="PEM", help="certificate file (default: a self-signed one)")
    parser.add_argument("--tls-key", metavar="PEM", help="private key file of --tls-cert")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    sa = sa_password(parser, args)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    try:
        engine = Engine(sa, timezone=args.timezone, data_dir=args.data)
    except Exception as e:  # a bad --timezone or unreadable --data
        print(f"simulator: cannot start: {e}", file=sys.stderr)
        return 2
    try:
        certificate = (args.tls_cert, args.tls_key or args.tls_cert) if args.tls_cert else None
        server = SimulatorServer(engine, args.host, args.port, tls=args.tls, tls_certificate=certificate)
    except (OSError, ssl.SSLError) as e:
        print(f"simulator: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    print(f"READY {server.host}:{server.port}", flush=True)
    while not stop.wait(0.2):
        pass
    server.stop()
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
