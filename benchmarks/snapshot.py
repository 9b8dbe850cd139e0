"""Benchmark the initial snapshot (CdcSnapshotOperator's core) against the SQL Server simulator.

Loads a 10-column table of ``--rows`` rows and a second one of a quarter of that into a simulator
(ALLOW_SNAPSHOT_ISOLATION ON, CDC enabled), then measures, each in a fresh process so CPU time
and peak RSS belong to that reader alone (the simulator's CPU is not counted):

- ``bare``: ``SELECT`` of the whole big table with the same driver (pyodbc + FreeTDS), rows discarded;
- ``snapshot``: ``snapshot_capture_instance`` of the big table (consistent point, keyset chunks of
  ``--chunk-rows``, Parquet + progress file + manifest);
- ``snapshot`` of the quarter-size table, to show that peak RSS does not grow with the table.

Prints rows/s, CPU seconds per million rows, the snapshot/bare CPU ratio, peak RSS, and how long
the table lock was held.

    .venv/bin/python benchmarks/snapshot.py                # 400,000 rows
    .venv/bin/python benchmarks/snapshot.py --rows 40000   # quick run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from bench_source import (
    count_rows,
    create_cdc_database,
    create_cdc_table,
    insert_rows,
    measured,
    odbc,
    run_child,
    start_simulator,
)

DATABASE = "snap_bench"


def load(host: str, port: int, tables: dict[str, int]) -> None:
    """Create the tables with CDC enabled and fill them."""
    conn, cur = create_cdc_database(host, port, DATABASE)
    started = time.monotonic()
    for table, rows in tables.items():
        create_cdc_table(cur, table)
        insert_rows(cur, table, 0, rows)
        print(f"  loaded dbo.{table}: {rows} rows ({time.monotonic() - started:.0f} s)", flush=True)
    conn.close()


def child(
    kind: str, table: str, host: str, port: int, out_dir: str, batch_size: int, chunk_rows: int
) -> dict:
    """Run one reader in this (fresh) process; report CPU time of the read and peak RSS."""
    import pyodbc

    from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_capture_instance

    with measured() as reading:
        lock_ms = None
        if kind == "bare":
            conn = pyodbc.connect(odbc(host, port, DATABASE), autocommit=True)
            cur = conn.cursor()
            cur.execute(f"SELECT * FROM dbo.{table}")
            rows = count_rows(cur, batch_size)
            conn.close()
        else:
            hook = SqlServerCdcHook("bench")
            instance = hook.get_capture_instance(f"dbo_{table}")
            result = snapshot_capture_instance(
                hook,
                instance,
                output=WindowOutput(out_dir, DATABASE, batch_size=batch_size),
                chunk_rows=chunk_rows,
            )
            rows = result.manifest.row_count
            lock_ms = None if result.lock_held_s is None else result.lock_held_s * 1000
            hook.close()
    return {"kind": kind, "table": table, "rows": rows, **reading, "lock_ms": lock_ms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=400_000, help="rows of the big table")
    parser.add_argument("--batch-size", type=int, default=50_000)
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--child")
    parser.add_argument("--table")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.child:
        result = child(
            args.child, args.table, args.host, args.port, args.out, args.batch_size, args.chunk_rows
        )
        print(json.dumps(result))
        return 0

    with (
        tempfile.TemporaryDirectory(prefix="snap-bench-") as work,
        start_simulator("--data", os.path.join(work, "data")) as simulator,
    ):
        host, port = simulator.host, simulator.port
        print(f"simulator at {host}:{port}; loading {args.rows} + {args.rows // 4} rows", flush=True)
        load(host, port, {"big": args.rows, "small": args.rows // 4})

        def measure(kind: str, table: str, out: str) -> dict:
            """Run one reader in a fresh process (``--child``) and return what it reported."""
            options = {"table": table, "out": os.path.join(work, out), "chunk_rows": args.chunk_rows}
            label = f"{kind} of {table}"
            return run_child(
                __file__, simulator, DATABASE, label, child=kind, batch_size=args.batch_size, **options
            )

        results = [
            measure("bare", "big", "bare"),
            measure("snapshot", "big", "s1"),
            measure("snapshot", "small", "s2"),
        ]
    print()
    print(
        f"{'reader':<22}{'rows':>10}{'wall s':>9}{'rows/s':>10}{'CPU s/1M rows':>15}{'peak RSS MB':>13}{'lock ms':>9}"
    )
    for r in results:
        label = f"{r['kind']} {r['table']}"
        per_million = r["cpu_s"] / max(r["rows"], 1) * 1e6
        lock = "" if r["lock_ms"] is None else f"{r['lock_ms']:.1f}"
        print(
            f"{label:<22}{r['rows']:>10}{r['wall_s']:>9.1f}{r['rows'] / max(r['wall_s'], 1e-9):>10.0f}"
            f"{per_million:>15.2f}{r['peak_rss_mb']:>13.0f}{lock:>9}"
        )
    bare, big, small = results
    ratio = (big["cpu_s"] / big["rows"]) / (bare["cpu_s"] / bare["rows"])
    print()
    print(f"snapshot / bare read CPU per row: {ratio:.2f}x")
    print(
        f"peak RSS: {big['peak_rss_mb']:.0f} MB for {big['rows']} rows, {small['peak_rss_mb']:.0f} MB for "
        f"{small['rows']} rows (batch {args.batch_size}, chunk {args.chunk_rows})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
