"""Benchmark the CDC extraction against the SQL Server simulator.

Loads about ``--rows`` changes of a 10-column table into a simulator, then measures, each in a
fresh process so CPU time and peak RSS belong to that reader alone (the simulator's own CPU is
not counted):

- ``bare``: the same window read with the same driver (pyodbc + FreeTDS), rows discarded;
- ``extract``: ``extract_window`` (CdcExtractOperator's core) writing Parquet + manifest;
- ``pandas``: naive ``pandas.read_sql`` of the change function + ``DataFrame.to_parquet``;
- ``extract`` again on a quarter of the window, to show that peak RSS does not grow with it.

Prints CPU seconds per million rows, the ratios, and peak RSS. Goals (issue 5): extract within
1.5x of the bare read, at least 3x less CPU than pandas, peak RSS under 400 MB and flat.

    .venv/bin/python benchmarks/extract.py               # ~1,000,000 changes
    .venv/bin/python benchmarks/extract.py --rows 50000  # quick run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench_source import COLUMNS, count_rows, insert_rows, measured, odbc, run_child, start_simulator

DATABASE = "cdc_bench"
CAPTURE_INSTANCE = "dbo_bench"
#: What a naive reader would run: ``SELECT *`` from the change function (from LSN, to LSN, row filter option).
BARE_CHANGES_QUERY = f"SELECT * FROM [cdc].[fn_cdc_get_all_changes_{CAPTURE_INSTANCE}](?, ?, ?)"


def load(host: str, port: int, rows: int) -> dict[str, str]:
    """Create the table with CDC and apply ``rows`` changes in four phases; return LSN bounds."""
    import pyodbc

    conn = pyodbc.connect(odbc(host, port), autocommit=True)
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE {DATABASE}")
    cur.execute(f"USE {DATABASE}")
    cur.execute("EXEC sys.sp_cdc_enable_db")
    cur.execute(f"CREATE TABLE dbo.bench ({COLUMNS})")
    cur.execute(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'bench', @role_name = NULL, "
        "@capture_instance = N'dbo_bench'"
    )
    cur.execute("EXEC sys.sp_cdc_stop_job @job_type = N'capture'")
    # 70 % inserts, 10 % of rows updated (2 change rows each with 'all update old'), 10 % deleted.
    inserts = int(rows * 0.7)
    bounds: dict[str, str] = {}
    started = time.monotonic()
    for phase in range(4):
        lo, hi = inserts * phase // 4, inserts * (phase + 1) // 4
        insert_rows(cur, "bench", lo, hi)
        cur.execute(
            "UPDATE dbo.bench SET c_bigint = c_bigint + 1, c_nvarchar = N'updated' WHERE id >= ? AND id < ? AND id % 7 = 0",
            lo,
            hi,
        )
        cur.execute("DELETE FROM dbo.bench WHERE id >= ? AND id < ? AND id % 7 = 1", lo, hi)
        cur.execute(f"USE {DATABASE}")
        cur.execute("EXEC sys.sp_cdc_scan @maxtrans = 100000000, @maxscans = 1, @continuous = 0")
        if phase == 0:
            bounds["quarter_to"] = (
                "0x" + cur.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0].hex().upper()
            )
        print(f"  loaded phase {phase + 1}/4 ({time.monotonic() - started:.0f} s)", flush=True)
    bounds["from"] = (
        "0x" + cur.execute("SELECT sys.fn_cdc_get_min_lsn(?)", CAPTURE_INSTANCE).fetchone()[0].hex().upper()
    )
    bounds["to"] = "0x" + cur.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0].hex().upper()
    conn.close()
    return bounds


# --------------------------------------------------------------------------- the measured readers


def child(kind: str, host: str, port: int, from_lsn: str, to_lsn: str, out_dir: str, batch_size: int) -> dict:
    """Run one reader in this (fresh) process and report the CPU time of the read and the peak RSS."""
    import warnings

    import pyodbc

    from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_window
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.lsn import Lsn
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow

    if kind == "pandas":
        import pandas as pd

    params = [bytes.fromhex(from_lsn[2:]), bytes.fromhex(to_lsn[2:]), "all update old"]
    # Imports above are not measured; everything below (connect, metadata, read, write) is.
    with measured() as reading:
        rows = 0
        if kind == "bare":
            conn = pyodbc.connect(odbc(host, port, DATABASE), autocommit=True)
            cur = conn.cursor()
            cur.execute(BARE_CHANGES_QUERY, *params)
            rows = count_rows(cur, batch_size)
            conn.close()
        elif kind == "pandas":
            conn = pyodbc.connect(odbc(host, port, DATABASE), autocommit=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                frame = pd.read_sql(BARE_CHANGES_QUERY, conn, params=params)
            frame["c_guid"] = frame["c_guid"].astype(str)
            os.makedirs(out_dir, exist_ok=True)
            frame.to_parquet(os.path.join(out_dir, "naive.parquet"), compression="zstd")
            rows = len(frame)
            conn.close()
        else:
            hook = SqlServerCdcHook("bench")
            tz = hook.get_server_time_zone()
            instance = hook.get_capture_instance(CAPTURE_INSTANCE)
            window = LsnWindow(CAPTURE_INSTANCE, Lsn.from_hex(from_lsn), Lsn.from_hex(to_lsn), "watermark")
            result = extract_window(
                hook, instance, window, base_uri=out_dir, tz=tz, database=DATABASE, batch_size=batch_size
            )
            rows = result.manifest.row_count
            hook.close()
    return {"kind": kind, "rows": rows, **reading}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="approximate number of changes in the window"
    )
    parser.add_argument("--batch-size", type=int, default=50_000)
    parser.add_argument("--timezone", default="Asia/Kolkata", help="simulator time zone (not UTC on purpose)")
    parser.add_argument("--child", choices=["bare", "extract", "pandas"], help=argparse.SUPPRESS)
    parser.add_argument("--host", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--from-lsn", help=argparse.SUPPRESS)
    parser.add_argument("--to-lsn", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(
            json.dumps(
                child(args.child, args.host, args.port, args.from_lsn, args.to_lsn, args.out, args.batch_size)
            )
        )
        return 0

    with (
        tempfile.TemporaryDirectory(prefix="cdc-bench-") as work,
        start_simulator("--timezone", args.timezone) as simulator,
    ):
        host, port = simulator.host, simulator.port
        print(f"simulator {host}:{port} ({args.timezone}); loading ~{args.rows:,} changes ...", flush=True)
        bounds = load(host, port, args.rows)

        def measure(kind: str, to_lsn: str, out: str) -> dict:
            """Run one reader in a fresh process (``--child``) and return what it reported."""
            options = {"from_lsn": bounds["from"], "to_lsn": to_lsn, "out": str(Path(work) / out)}
            return run_child(
                __file__, simulator, DATABASE, kind, child=kind, batch_size=args.batch_size, **options
            )

        results = {}
        for kind in ("bare", "extract", "pandas"):
            results[kind] = measure(kind, bounds["to"], kind)
            r = results[kind]
            print(
                f"  {kind:8s} {r['rows']:>9,} rows  cpu {r['cpu_s']:7.2f} s  wall {r['wall_s']:7.2f} s  peak RSS {r['peak_rss_mb']:6.0f} MB",
                flush=True,
            )
        quarter = measure("extract", bounds["quarter_to"], "quarter")

    def per_million(r: dict) -> float:
        return r["cpu_s"] / max(r["rows"], 1) * 1e6

    bare, extract, naive = results["bare"], results["extract"], results["pandas"]
    print()
    print(
        f"window: {extract['rows']:,} change rows of a 10-column table (quarter window: {quarter['rows']:,})"
    )
    print(
        f"CPU s per million rows: bare read {per_million(bare):.2f} | extract {per_million(extract):.2f} | pandas read_sql+to_parquet {per_million(naive):.2f}"
    )
    print(f"extract / bare read CPU:   {extract['cpu_s'] / bare['cpu_s']:.2f}x  (goal <= 1.5x)")
    print(f"pandas / extract CPU:      {naive['cpu_s'] / extract['cpu_s']:.2f}x  (goal >= 3x)")
    print(
        f"extract peak RSS:          {extract['peak_rss_mb']:.0f} MB full window, {quarter['peak_rss_mb']:.0f} MB quarter window  (goal < 400 MB, flat)"
    )
    print(f"pandas peak RSS:           {naive['peak_rss_mb']:.0f} MB")
    print(f"extract throughput:        {extract['rows'] / extract['wall_s']:,.0f} rows/s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
