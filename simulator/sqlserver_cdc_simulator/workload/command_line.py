"""The command line: ``python -m sqlserver_cdc_simulator.workload create|run``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from typing import Any

from sqlserver_cdc_simulator.workload.change_generator import STATEMENT_KINDS, Workload
from sqlserver_cdc_simulator.workload.sample_database import SampleDatabase
from sqlserver_cdc_simulator.workload.sample_tables import SAMPLE_TABLES


def _connect(args: argparse.Namespace) -> Any:
    import pyodbc

    from sqlserver_cdc_simulator.connections import odbc_connection_string

    connection_string = args.odbc or os.environ.get("SQLSERVER_CDC_ODBC")
    if not connection_string:
        if not args.server:
            raise SystemExit("give --odbc, --server or set SQLSERVER_CDC_ODBC to an ODBC connection string")
        host, _, port = args.server.partition(":")
        password = os.environ.get("SQLSERVER_CDC_PASSWORD", "")
        connection_string = odbc_connection_string(
            host=host, port=int(port or 1433), user=args.user, password=password
        )
    return pyodbc.connect(connection_string, autocommit=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sqlserver_cdc_simulator.workload",
        description="Create the CDC sample database and apply a seeded random workload to it.",
    )
    parser.add_argument("--odbc", help="ODBC connection string (default: $SQLSERVER_CDC_ODBC)")
    parser.add_argument(
        "--server", help="host:port, with the FreeTDS driver (password from $SQLSERVER_CDC_PASSWORD)"
    )
    parser.add_argument("--user", default="sa")
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="(re)create the sample database with CDC enabled")
    create.add_argument("--database", default="cdc_sample")
    create.add_argument("--initial-rows", type=int, default=0, help="rows to insert into each table")
    create.add_argument("--role-name", default=None, help="@role_name gating the change data")
    create.add_argument("--seed", type=int, default=0)
    run = commands.add_parser("run", help="apply a seeded random workload")
    run.add_argument("--database", default="cdc_sample")
    run.add_argument("--transactions", type=int, default=None)
    run.add_argument("--duration", type=float, default=None, help="seconds to run")
    run.add_argument(
        "--rate", type=float, default=None, help="transactions per second (default: as fast as possible)"
    )
    run.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    """
    Run ``python -m sqlserver_cdc_simulator.workload``; return the exit status.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    """
    parser = _parser()
    args = parser.parse_args(list(argv) if argv is not None else None)

    conn = _connect(args)
    workload = Workload(seed=args.seed)
    if args.command == "create":
        SampleDatabase.create(conn, database=args.database, role_name=args.role_name)
        print(f"created database {args.database} with CDC enabled on {len(SAMPLE_TABLES)} tables", flush=True)
        for table in SAMPLE_TABLES if args.initial_rows else ():
            workload.insert_rows(conn, table.qualified_name, args.initial_rows)
        if args.initial_rows:
            print(f"inserted {args.initial_rows} rows into each table", flush=True)
    else:
        if args.transactions is None and args.duration is None:
            parser.error("run needs --transactions and/or --duration")
        conn.cursor().execute(f"USE [{args.database}]")
        workload.load_model(conn)
        stats = workload.run(conn, args.transactions, duration=args.duration, rate=args.rate)
        print(
            f"{stats.transactions} transactions committed ({stats.rolled_back} rolled back), "
            f"{stats.row_changes} row changes: "
            + ", ".join(f"{stats.rows[kind]} {kind.replace('_', ' ')}s" for kind in STATEMENT_KINDS)
            + f" in {stats.seconds:.1f} s",
            flush=True,
        )
    conn.close()
    return 0
