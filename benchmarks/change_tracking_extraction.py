"""Stream the same number of changes through the provider's Change Tracking and CDC queries; print rows/s.

The table of cdc_changes_throughput.py, with both CDC and Change Tracking on, gets ``--rows`` inserted rows, then every row is
updated once (so each source has ``--rows`` changed keys). The CDC query is the extract's
(``tsql.all_changes_query``: all changes, ORDER BY position, commit time); the CT query is the
version window's (``tsql.ct_changes_query``: CHANGETABLE(CHANGES) LEFT JOIN the table, in a
SNAPSHOT transaction). CDC returns 3 rows per key here (insert, update before- and after-image with
``all update old``); CT returns one net change per key, so rows/s and keys/s are both printed.

By default the script starts the simulator and reports its CPU seconds per stream; ``--odbc`` runs
against any SQL Server 2016+ (the login needs to enable CDC and CT on a new database).

Usage::

    .venv/bin/python benchmarks/change_tracking_extraction.py --rows 100000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pyodbc
from bench_source import bench_server, count_rows, process_cpu_seconds
from cdc_changes_throughput import load

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn

COLUMNS = [
    CapturedColumn("id", 1, "bigint", 8, 19, 0, False),
    CapturedColumn("account", 2, "int", 4, 10, 0, False),
    CapturedColumn("name", 3, "nvarchar", 80, 0, 0, True),
    CapturedColumn("amount", 4, "decimal", 9, 18, 4, True),
    CapturedColumn("created", 5, "datetime2", 7, 23, 3, True),
    CapturedColumn("ratio", 6, "float", 8, 53, 0, True),
    CapturedColumn("active", 7, "bit", 1, 1, 0, True),
    CapturedColumn("tag", 8, "varbinary", 16, 0, 0, True),
]


def prepare(conn: pyodbc.Connection, rows: int) -> float:
    """Turn Change Tracking on, load and update ``rows`` rows, capture; return seconds."""
    started = time.perf_counter()
    load(conn, rows)  # creates cdc_bench with CDC on dbo.bench and the rows
    cursor = conn.cursor()
    cursor.execute("USE cdc_bench")
    cursor.execute("ALTER DATABASE cdc_bench SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS)")
    cursor.execute("ALTER DATABASE cdc_bench SET ALLOW_SNAPSHOT_ISOLATION ON")
    cursor.execute("ALTER TABLE dbo.bench ENABLE CHANGE_TRACKING")
    cursor.execute("UPDATE dbo.bench SET amount = amount + 1")
    cursor.execute("EXEC sys.sp_cdc_scan @maxtrans = 1000000, @maxscans = 100").close()
    return time.perf_counter() - started


def stream(
    conn: pyodbc.Connection, statements: list[tuple[str, tuple]], pid: int | None
) -> tuple[int, float, float | None]:
    """Run the statements, fetch every row of the last; return (rows, seconds, server CPU s)."""
    cursor = conn.cursor()
    cpu_before = None if pid is None else process_cpu_seconds(pid)
    started = time.perf_counter()
    for sql, params in statements[:-1]:
        cursor.execute(sql, *params)
        cursor.fetchall()
    cursor.execute(statements[-1][0], *statements[-1][1])
    count = count_rows(cursor, 10_000)
    seconds = time.perf_counter() - started
    cpu = None if cpu_before is None else process_cpu_seconds(pid) - cpu_before
    cursor.close()
    return count, seconds, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="changed keys (default 100,000)")
    parser.add_argument("--odbc", help="run against this ODBC connection string instead of a fresh simulator")
    args = parser.parse_args()
    with bench_server(args.odbc) as server:
        conn = pyodbc.connect(server.connection_string, autocommit=True)
        prepare_s = prepare(conn, args.rows)
        cursor = conn.cursor()
        low = cursor.execute("SELECT sys.fn_cdc_get_min_lsn(N'dbo_bench')").fetchone()[0]
        high = cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0]
        cursor.close()
        print(f"{args.rows:,} keys inserted and updated once, captured, in {prepare_s:.1f} s", flush=True)
        print(f"load average before streaming: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
        cdc = [(tsql.all_changes_query("dbo_bench", COLUMNS), (low, high, "all update old"))]
        ct_string = server.database("cdc_bench")
        ct_conn = pyodbc.connect(ct_string, autocommit=True)
        ct_conn.cursor().execute(tsql.SET_SNAPSHOT_ISOLATION).close()
        ct_conn.autocommit = False
        ct = [
            (tsql.CT_CURRENT_VERSION, ()),
            (tsql.ct_changes_query("dbo", "bench", COLUMNS, ["id"]), (0,)),
        ]
        for label, connection, statements in (
            ("CDC all changes", conn, cdc),
            ("CT CHANGETABLE join", ct_conn, ct),
        ):
            rows, seconds, cpu = stream(connection, statements, server.pid)
            cpu_text = "" if cpu is None else f", server CPU {cpu:.1f} s"
            print(
                f"{label:22s} {rows:>9,} rows in {seconds:6.2f} s = {rows / seconds:>9,.0f} rows/s, "
                f"{args.rows / seconds:>9,.0f} keys/s{cpu_text}",
                flush=True,
            )
        ct_conn.rollback()
        ct_conn.close()
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
