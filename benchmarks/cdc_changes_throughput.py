"""Stream a window of ``cdc.fn_cdc_get_all_changes_<ci>`` to pyodbc and print rows/s.

The target (issue 4) is at least 100,000 rows/s for a 1,000,000-change window on this machine.
For comparison, the same run streams a plain ``SELECT`` of the same number of rows from the
source table, so the ratio shows what the CDC function costs over a table scan.

By default the script starts the simulator (``python -m sqlserver_cdc_simulator
--port 0``) and reports the server process's CPU seconds during each stream; with ``--odbc`` it
runs against any SQL Server (the window is then captured with ``sys.sp_cdc_scan``).

Usage::

    .venv/bin/python benchmarks/cdc_changes_throughput.py               # 1,000,000 changes
    .venv/bin/python benchmarks/cdc_changes_throughput.py --rows 100000 # quick run
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pyodbc
from bench_source import bench_server, count_rows, process_cpu_seconds

TABLE = """CREATE TABLE dbo.bench (
    id bigint NOT NULL PRIMARY KEY,
    account int NOT NULL,
    name nvarchar(40) NULL,
    amount decimal(18,4) NULL,
    created datetime2(3) NULL,
    ratio float NULL,
    active bit NULL,
    tag varbinary(16) NULL
)"""
SEED_ROWS = 1000


def load(conn: pyodbc.Connection, rows: int) -> float:
    """Create the database and table, enable CDC, insert ``rows`` rows; return seconds taken."""
    cursor = conn.cursor()
    started = time.perf_counter()
    cursor.execute("USE master")
    if cursor.execute("SELECT DB_ID(N'cdc_bench')").fetchone()[0] is not None:
        cursor.execute("DROP DATABASE cdc_bench")
    cursor.execute("CREATE DATABASE cdc_bench")
    cursor.execute("USE cdc_bench")
    cursor.execute(TABLE)
    cursor.execute("EXEC sys.sp_cdc_enable_db")
    cursor.execute(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'bench', @role_name = NULL, "
        "@supports_net_changes = 0"
    )
    cursor.execute("EXEC sys.sp_cdc_stop_job")
    values = ", ".join(
        f"({i}, {i % 997}, N'name {i}', {i}.1234, '2026-01-01T00:00:{i % 60:02d}.123', {i}.5, {i % 2}, 0x{i:08X})"
        for i in range(1, min(rows, SEED_ROWS) + 1)
    )
    cursor.execute(f"INSERT INTO dbo.bench VALUES {values}")
    have = min(rows, SEED_ROWS)
    while have < rows:
        take = min(have, rows - have)
        cursor.execute(
            f"INSERT INTO dbo.bench SELECT TOP ({take}) id + {have}, account, name, amount, created, ratio, active, tag "
            "FROM dbo.bench ORDER BY id"
        )
        have += take
    return time.perf_counter() - started


def capture(conn: pyodbc.Connection) -> float:
    """Run the capture job synchronously until the window is in the change table; return seconds."""
    started = time.perf_counter()
    conn.cursor().execute("EXEC sys.sp_cdc_scan @maxtrans = 1000000, @maxscans = 100").close()
    return time.perf_counter() - started


def stream(
    conn: pyodbc.Connection, sql: str, params: tuple[object, ...], pid: int | None
) -> tuple[int, float, float | None, float]:
    """Fetch every row of ``sql`` in batches; return (rows, seconds, server CPU s, client CPU s)."""
    cursor = conn.cursor()
    cpu_before = None if pid is None else process_cpu_seconds(pid)
    client_before = time.process_time()
    started = time.perf_counter()
    cursor.execute(sql, *params)
    count = count_rows(cursor, 10_000)
    seconds = time.perf_counter() - started
    client_cpu = time.process_time() - client_before
    cpu_after = None if pid is None else process_cpu_seconds(pid)
    cursor.close()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return count, seconds, cpu, client_cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="changes in the window (default 1,000,000)"
    )
    parser.add_argument("--odbc", help="run against this ODBC connection string instead of a fresh simulator")
    args = parser.parse_args()

    with bench_server(args.odbc) as server:
        conn = pyodbc.connect(server.connection_string, autocommit=True)
        load_s = load(conn, args.rows)
        capture_s = capture(conn)
        cursor = conn.cursor()
        low = cursor.execute("SELECT sys.fn_cdc_get_min_lsn(N'dbo_bench')").fetchone()[0]
        high = cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0]
        cursor.close()
        print(
            f"window: {args.rows:,} inserts loaded in {load_s:.1f} s, captured in {capture_s:.1f} s",
            flush=True,
        )

        print(f"load average before streaming: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
        results = {}
        for label, sql, params in (
            (
                "fn_cdc_get_all_changes (all)",
                "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_bench(?, ?, N'all')",
                (low, high),
            ),
            ("plain SELECT of the table", "SELECT * FROM dbo.bench", ()),
            (
                "provider query (ORDER BY, time)",
                "SELECT [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], "
                "sys.fn_cdc_map_lsn_to_time([__$start_lsn]) AS [__$commit_time], id, account, name, amount, "
                "CAST(created AS varchar(40)) AS created, ratio, active, tag "
                "FROM [cdc].[fn_cdc_get_all_changes_dbo_bench](?, ?, ?) "
                "ORDER BY [__$start_lsn], [__$seqval], [__$operation]",
                (low, high, "all"),
            ),
        ):
            rows, seconds, cpu, client_cpu = stream(conn, sql, params, server.pid)
            results[label] = rows / seconds
            cpu_text = (
                "" if cpu is None else f", server CPU {cpu:.1f} s"
            ) + f", client CPU {client_cpu:.1f} s"
            print(
                f"{label:32s} {rows:>10,} rows in {seconds:6.2f} s = {rows / seconds:>10,.0f} rows/s{cpu_text}",
                flush=True,
            )
            if cpu is not None:
                bound = rows / max(cpu, client_cpu, 1e-9)
                print(
                    f"{'':32s} CPU-bound rate (rows / max(server, client CPU)): {bound:>10,.0f} rows/s",
                    flush=True,
                )
        ratio = results["fn_cdc_get_all_changes (all)"] / results["plain SELECT of the table"]
        print(f"ratio all-changes / plain select: {ratio:.2f}", flush=True)
        target = results["fn_cdc_get_all_changes (all)"] >= 100_000
        print(f"target >= 100,000 rows/s: {'met' if target else 'NOT met'}", flush=True)
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
