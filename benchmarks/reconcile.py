"""Benchmark the reconcile (CdcReconcileOperator's core) on a table with a few differing keys.

Loads a 10-column table of ``--rows`` rows into a simulator (CDC enabled, snapshot isolation on),
copies it to an Iceberg table (snapshot + merge, the full re-copy a repair would otherwise be),
corrupts ``--differing`` keys of the target (changed, deleted, added rows), then times:

- ``compare``: the comparison at one consistent LSN (source read once in key order and summarised per
  leaf of ``--leaf-rows`` rows; the target summarised by the Spark job with the same bounds; bisection;
  the differing leaves compared key by key);
- ``repair``: the differing leaves read again at a new LSN, the differing rows written as a repair
  window, and the merge job's commit of it;
- ``verify``: the comparison again (it must find nothing).

It prints the seconds of each step beside the full copy's, the rows the repair read and wrote, and
the repair commit's Iceberg summary (records added, data files rewritten), which shows that the table
was not re-copied. Spark runs in this process (local[2]), as in the tests; the operator runs the same
functions through spark-submit.

    .venv/bin/python benchmarks/reconcile.py                 # 1,000,000 rows, 10 differing keys
    .venv/bin/python benchmarks/reconcile.py --rows 20000    # quick run
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench_source import PASSWORD, create_cdc_database, create_cdc_table, insert_rows, odbc, start_simulator

DATABASE = "reconcile_bench"
CATALOG = "bench"
TABLE = f"{CATALOG}.cdc.dbo_bench"


def load(host: str, port: int, rows: int) -> None:
    """Create dbo.bench with CDC enabled and fill it."""
    conn, cur = create_cdc_database(host, port, DATABASE)
    create_cdc_table(cur, "bench")
    started = time.monotonic()
    # a part with parameters, then doubled inside the server (ids shifted): far faster than parameters alone
    part, doublings = rows, 0
    while part > 20_000 and part % 2 == 0:
        part, doublings = part // 2, doublings + 1
    insert_rows(cur, "bench", 0, part)
    columns = "c_bigint, c_decimal, c_nvarchar, c_varchar, c_datetime2, c_date, c_float, c_bit, c_guid"
    for step in range(doublings):
        cur.execute(
            f"INSERT INTO dbo.bench (id, {columns}) SELECT id + {part << step}, {columns} FROM dbo.bench"
        )
    print(f"loaded dbo.bench: {rows} rows ({time.monotonic() - started:.0f} s)", flush=True)
    conn.close()


def corrupt(spark, source, rows: int, differing: int) -> list[int]:
    """Keys of the target changed, deleted, and deleted at the source only (a lost delete), spread over the table."""
    step = rows // (differing + 1)
    keys = [step * (i + 1) for i in range(differing)]
    changed, deleted, extra = keys[0::3], keys[1::3], keys[2::3]
    spark.sql(f"UPDATE {TABLE} SET c_varchar = 'corrupt' WHERE id IN ({','.join(map(str, changed))})")
    spark.sql(f"DELETE FROM {TABLE} WHERE id IN ({','.join(map(str, deleted))})")
    # rows the source no longer has: deleted at the source, the change never merged
    source.cursor().execute(f"DELETE FROM dbo.bench WHERE id IN ({','.join(map(str, extra))})")
    return keys


def data_files(spark) -> set[str]:
    return {r[0] for r in spark.sql(f"SELECT file_path FROM {TABLE}.files WHERE content = 0").collect()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--differing", type=int, default=10)
    parser.add_argument("--leaf-rows", type=int, default=10_000)
    args = parser.parse_args()

    from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
    from sqlserver_cdc_simulator.connections import mssql_connection_json

    work = Path(tempfile.mkdtemp(prefix="reconcile-bench-"))
    os.environ.setdefault("AIRFLOW_HOME", str(work / "airflow"))
    os.environ["AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA"] = "True"
    with start_simulator() as simulator:
        load(simulator.host, simulator.port, args.rows)
        os.environ[connection_variable("bench")] = mssql_connection_json(
            simulator.host, simulator.port, "sa", PASSWORD, DATABASE
        )
        run(args, work, simulator.host, simulator.port)


def run(args: argparse.Namespace, work: Path, host: str, port: int) -> None:
    from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.snapshot.range_copy import write_repair_window
    from airflow_provider_sqlserver_cdc.snapshot.reconcile import compare_at_consistent_point
    from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_capture_instance
    from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args
    from airflow_provider_sqlserver_cdc.spark.merge.job import run as merge_run
    from airflow_provider_sqlserver_cdc.spark.reconcile.job import compare_target
    from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_spark_conf, local_spark_session

    hook = SqlServerCdcHook("bench")
    instance = hook.get_capture_instance("dbo_bench")
    spark = local_spark_session(iceberg_spark_conf(work / "warehouse", catalog=CATALOG), driver_memory="2g")
    staging = str(work / "staging")
    seconds: dict[str, float] = {}

    def merge(uri: str) -> None:
        merge_run(spark, parse_args(["--manifest", uri, "--namespace", f"{CATALOG}.cdc"]))

    started = time.monotonic()
    copy = snapshot_capture_instance(
        hook, instance, output=WindowOutput(staging, DATABASE), chunk_rows=250_000
    )
    seconds["full copy: snapshot"] = time.monotonic() - started
    started = time.monotonic()
    merge(copy.extract.manifest_uri)
    seconds["full copy: merge"] = time.monotonic() - started
    import pyodbc

    source = pyodbc.connect(odbc(host, port, DATABASE), autocommit=True)
    keys = corrupt(spark, source, args.rows, args.differing)
    source.close()

    def compare():
        return compare_at_consistent_point(
            hook,
            instance,
            table=TABLE,
            target_side=lambda request: compare_target(spark, request),
            leaf_rows=args.leaf_rows,
        )

    started = time.monotonic()
    comparison = compare()
    seconds["compare"] = time.monotonic() - started
    found = sorted(d.key[0] for d in comparison.differences)
    if found != sorted(keys):
        raise SystemExit(f"the comparison found {found}, expected {sorted(keys)}")
    before = data_files(spark)
    started = time.monotonic()
    repair = write_repair_window(hook, instance, comparison, staging_uri=staging, database=DATABASE)
    seconds["repair: read + window"] = time.monotonic() - started
    started = time.monotonic()
    merge(repair.manifest_uri)
    seconds["repair: merge"] = time.monotonic() - started
    summary = spark.sql(f"SELECT summary FROM {TABLE}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[
        0
    ]
    kept = before <= data_files(spark)
    started = time.monotonic()
    again = compare()
    seconds["verify (compare again)"] = time.monotonic() - started
    spark.stop()

    print(f"\n{args.rows:,} rows, {args.differing} differing keys, leaves of {args.leaf_rows:,} rows")
    for step, value in seconds.items():
        print(f"  {step:<26} {value:8.1f} s")
    full = seconds["full copy: snapshot"] + seconds["full copy: merge"]
    reconcile = seconds["compare"] + seconds["repair: read + window"] + seconds["repair: merge"]
    print(f"  compare + repair / full copy: {reconcile / full:.2f}x")
    print(
        f"  comparison: {comparison.leaves} leaves, {len(comparison.differing_leaves)} differ, "
        f"{comparison.ranges_compared} ranges compared, {len(comparison.differences)} differing keys"
    )
    print(
        f"  repair: {len(repair.ranges)} leaf ranges, {repair.rows_read:,} source rows read again, "
        f"{repair.upserts} rows written, {repair.deletes} deleted"
    )
    print(
        f"  repair commit: added-records {summary.get('added-records')}, deleted-data-files "
        f"{summary.get('deleted-data-files', '0')}, every earlier data file still live: {kept}"
    )
    print(f"  after the repair the table matches its source: {again.matches}")
    print(json.dumps({"seconds": seconds, "summary": dict(summary), "matches": again.matches}))


if __name__ == "__main__":
    main()
