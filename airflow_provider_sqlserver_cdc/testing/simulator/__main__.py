"""Command line: ``python -m airflow_provider_sqlserver_cdc.testing.simulator --port 0 --data DIR --password PW``.

Prints exactly one line ``READY <host>:<port>`` on stdout once it accepts connections, and
exits cleanly (writing its durable snapshot) on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from airflow_provider_sqlserver_cdc.testing.simulator.engine import Engine
from airflow_provider_sqlserver_cdc.testing.simulator.server import SimulatorServer


def main(argv: list[str] | None = None) -> int:
    """Run the simulator until SIGTERM / SIGINT."""
    parser = argparse.ArgumentParser(
        prog="python -m airflow_provider_sqlserver_cdc.testing.simulator",
        description="SQL Server CDC simulator",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=1433, help="TCP port; 0 picks a free one")
    parser.add_argument("--data", default=None, help="directory for durable state (in memory when omitted)")
    parser.add_argument("--password", required=True, help="password of the sa login")
    parser.add_argument(
        "--timezone", default="UTC", help="IANA time zone of the server clock, e.g. Europe/Berlin"
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    try:
        engine = Engine(args.password, timezone=args.timezone, data_dir=args.data)
    except Exception as e:  # a bad --timezone or unreadable --data
        print(f"simulator: cannot start: {e}", file=sys.stderr)
        return 2
    try:
        server = SimulatorServer(engine, args.host, args.port)
    except OSError as e:
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
