"""Stream a large 8-column result from the SQL Server simulator to pyodbc + FreeTDS.

Starts the simulator as a separate process (``python -m sqlserver_cdc_simulator``),
loads N rows with T-SQL (INSERT ... SELECT doubling), then times ``SELECT * FROM bench.dbo.wide``
fetched with ``cursor.fetchmany``. Prints rows/s, the server's CPU seconds for the read (from
/proc/<pid>/stat), the client's CPU seconds, and the load time.

    .venv/bin/python benchmarks/simulator_throughput.py            # 1,000,000 rows
    .venv/bin/python benchmarks/simulator_throughput.py --rows 100000
"""

from __future__ import annotations

import argparse
import os
import time

import pyodbc
from bench_source import count_rows, odbc, process_cpu_seconds, start_simulator

COLUMNS = "id bigint NOT NULL PRIMARY KEY, a int NOT NULL, b nvarchar(20) NULL, c decimal(12,2) NULL, d datetime2(7) NULL, e float NULL, f varchar(20) NULL, g bit NULL"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fetch", type=int, default=10_000, help="rows per fetchmany")
    args = parser.parse_args()

    with start_simulator() as simulator:
        conn = pyodbc.connect(odbc(simulator.host, simulator.port), autocommit=True)
        cur = conn.cursor()
        t0 = time.perf_counter()
        cur.execute("CREATE DATABASE bench")
        cur.execute("USE bench")
        cur.execute(f"CREATE TABLE dbo.wide ({COLUMNS})")
        cur.execute(
            "INSERT INTO dbo.wide VALUES (1, 1, N'name-1', 12345.67, '2024-01-02 03:04:05.1234567', 3.25, 'text', 1)"
        )
        n = 1
        while n < args.rows:
            step = min(n, args.rows - n)
            cur.execute(
                f"INSERT INTO dbo.wide SELECT TOP ({step}) id + {n}, a + {n}, b, c + 1, DATEADD(second, 1, d), e * 2, f, g "
                "FROM dbo.wide"
            )
            n += step
        load_s = time.perf_counter() - t0
        total = cur.execute("SELECT COUNT(*) FROM dbo.wide").fetchone()[0]

        cpu0 = process_cpu_seconds(simulator.pid)
        client0 = time.process_time()
        t1 = time.perf_counter()
        cur.execute("SELECT id, a, b, c, d, e, f, g FROM dbo.wide")
        rows = count_rows(cur, args.fetch)
        elapsed = time.perf_counter() - t1
        server_cpu = process_cpu_seconds(simulator.pid) - cpu0
        client_cpu = time.process_time() - client0
        conn.close()
        assert rows == total, (rows, total)
        print(
            f"rows streamed:        {rows:,} (8 columns: bigint, int, nvarchar, decimal, datetime2, float, varchar, bit)"
        )
        print(f"elapsed:              {elapsed:.2f} s")
        print(f"throughput:           {rows / elapsed:,.0f} rows/s  (target >= 100,000)")
        print(
            f"server CPU seconds:   {server_cpu:.2f}  ({rows / max(server_cpu, 1e-9):,.0f} rows per server CPU second)"
        )
        print(f"client CPU seconds:   {client_cpu:.2f}  (pyodbc + FreeTDS)")
        print(f"load ({total:,} rows via INSERT ... SELECT): {load_s:.1f} s")
        print(f"machine load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
