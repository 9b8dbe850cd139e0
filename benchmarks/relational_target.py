"""Benchmark: the merge job into PostgreSQL with 1, 2 and 4 connections, against a plain COPY of the same rows.

At --scale 1: a 5,000,000-row PostgreSQL table and a window of 1,000,000 changes (70% updates
with their before-images, 20% inserts, 10% deletes); the default --scale 0.02 is 100,000 rows and
20,000 changes. For each connection count it times ``spark.merge.job.run`` with the JDBC target
(manifest checks, net effect, the staging load over N connections, the apply transaction with
the LSN guard and the bookkeeping), and once per round the physical reference: ``COPY`` of the
batch's net-effect rows into an empty table of the same shape and primary key.

A throw-away PostgreSQL (testing/postgres_server.py, ``fsync=off``) and Spark local[2] run on the
same machine. One round runs first and is not counted (JIT warm-up; it also creates the table);
before every measured apply the table is restored to its 5M rows and analysed. The summary gives
the median time and its ratio to COPY per connection count. Usage:
``python benchmarks/relational_target.py [--scale 0.02] [--rounds 3] [--connections 1,2,4]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import io
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.job import run
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import PASSWORD_ENV, USER_ENV
from airflow_provider_sqlserver_cdc.testing.local_iceberg import local_spark_session
from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresServer

SNAPSHOT_LSN = 0x1000
CHANGES_PER_TRANSACTION = 1000
TABLE = "bench.dbo_orders"
COLUMNS = [
    {"name": "id", "sql_type": "bigint", "precision": 19, "scale": 0, "max_length": 8, "arrow_type": "int64"},
    {"name": "customer_id", "sql_type": "int", "precision": 10, "scale": 0, "max_length": 4, "arrow_type": "int32"},
    {"name": "amount", "sql_type": "decimal", "precision": 12, "scale": 2, "max_length": 9,
     "arrow_type": "decimal128(12, 2)"},
    {"name": "note", "sql_type": "nvarchar", "precision": 0, "scale": 0, "max_length": 80, "arrow_type": "string"},
    {"name": "updated_at", "sql_type": "datetime2", "precision": 26, "scale": 6, "max_length": 8,
     "arrow_type": "timestamp[us]"},
]  # fmt: skip
EPOCH = dt.datetime(2026, 1, 1)


def _lsn_bytes(values: np.ndarray) -> pa.Array:
    return pa.array([Lsn.from_int(int(v)).value for v in values], pa.binary())


def write_change_window(base: Path, rows: int, changes: int, seed: int) -> tuple[str, pa.Table]:
    """Write one window of ``changes`` changes to a ``rows``-row table; return its manifest and net-effect rows."""
    rng = np.random.default_rng(seed)
    existing = rng.permutation(np.arange(1, rows + 1))
    updates, inserts = int(changes * 0.7), int(changes * 0.2)
    deletes = changes - updates - inserts
    updated, deleted = existing[:updates], existing[updates : updates + deletes]
    inserted = np.arange(rows + 1, rows + inserts + 1)
    keys = np.concatenate([updated, updated, inserted, deleted])
    operations = np.concatenate(
        [np.full(updates, 3), np.full(updates, 4), np.full(inserts, 2), np.full(deletes, 1)]
    ).astype(np.int32)
    sequence = np.concatenate([np.arange(updates), np.arange(updates), np.arange(updates, changes)])
    order = np.lexsort((operations, sequence))
    keys, operations, sequence = keys[order], operations[order], sequence[order]
    start_lsn = SNAPSHOT_LSN + 1 + sequence // CHANGES_PER_TRANSACTION
    seqval = (start_lsn << 20) + sequence
    after = operations != 3
    amount = np.where(after, rng.integers(0, 10_000_000, len(keys)), keys % 100_000)
    table = pa.table(
        {
            "__$start_lsn": _lsn_bytes(start_lsn),
            "__$seqval": _lsn_bytes(seqval),
            "__$operation": pa.array(operations, pa.int32()),
            "__$update_mask": pa.array([b"\x04"] * len(keys), pa.binary()),  # amount only: no key change
            "__$commit_time": pa.array(
                [dt.datetime(2026, 1, 2, tzinfo=dt.UTC)] * len(keys), pa.timestamp("us", tz="UTC")
            ),
            "id": pa.array(keys, pa.int64()),
            "customer_id": pa.array(keys % 1000, pa.int32()),
            "amount": pa.array([decimal.Decimal(int(a)).scaleb(-2) for a in amount], pa.decimal128(12, 2)),
            "note": pa.array([f"note {k}" for k in keys]),
            "updated_at": pa.array([EPOCH + dt.timedelta(seconds=int(k)) for k in keys], pa.timestamp("us")),
        }
    )
    directory = (
        base / "dbo_orders" / f"{Lsn.from_int(SNAPSHOT_LSN + 1).hex}_{Lsn.from_int(int(start_lsn.max())).hex}"
    )
    directory.mkdir(parents=True)
    pq.write_table(table, directory / "part-00000.parquet", compression="zstd")
    names = ("delete", "insert", "update_before", "update_after")
    manifest = {
        "format_version": 1,
        "kind": "changes",
        "capture_instance": "dbo_orders",
        "source": {"server": "bench", "database": "shop", "schema": "dbo", "table": "orders"},
        "from_lsn": Lsn.from_int(SNAPSHOT_LSN + 1).hex,
        "to_lsn": Lsn.from_int(int(start_lsn.max())).hex,
        "from_time": "2026-01-02T00:00:00+00:00",
        "to_time": "2026-01-02T01:00:00+00:00",
        "mode": "interval",
        "row_filter_option": "all update old",
        "key_columns": ["id"],
        "columns": [{**c, "ordinal": i + 1, "nullable": c["name"] != "id"} for i, c in enumerate(COLUMNS)],
        "files": [
            {
                "path": "part-00000.parquet",
                "rows": len(keys),
                "bytes": (directory / "part-00000.parquet").stat().st_size,
            }
        ],
        "row_count": len(keys),
        "operation_counts": {n: int((operations == i + 1).sum()) for i, n in enumerate(names)},
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "dag_id": "bench",
        "run_id": "bench",
    }
    (directory / "_manifest.json").write_text(json.dumps(manifest))
    net = table.filter(pc.not_equal(table["__$operation"], 3))
    values = net.select(["id", "customer_id", "amount", "note", "updated_at"])
    positions = {
        "_cdc_start_lsn": pa.array(["\\x" + v.hex() for v in net["__$start_lsn"].to_pylist()]),
        "_cdc_seqval": pa.array(["\\x" + v.hex() for v in net["__$seqval"].to_pylist()]),
        "_cdc_operation": net["__$operation"],
        "_cdc_commit_time": net["__$commit_time"],
        "_cdc_deleted": pc.equal(net["__$operation"], 1),
    }
    for name, column in positions.items():
        values = values.append_column(name, column)
    return str(directory / "_manifest.json"), values


def restore(conn: object, rows: int) -> None:
    """Put the target back to its ``rows`` rows (as a snapshot at SNAPSHOT_LSN left them) and analyse it."""
    lsn = Lsn.from_int(SNAPSHOT_LSN).hex[2:]
    conn.execute(f"TRUNCATE {TABLE}")
    conn.execute("DELETE FROM bench._cdc_applied_lsn_ranges")
    conn.execute(
        f"INSERT INTO {TABLE} SELECT i, (i % 1000)::int, ((i % 100000) / 100.0)::numeric(12,2), 'note ' || i, "
        f"timestamp '2026-01-01' + i * interval '1 second', '\\x{lsn}'::bytea, '\\x{lsn}'::bytea, 2, "
        f"timestamptz '2026-01-01 00:00:00+00', false FROM generate_series(1, {rows}) i"
    )
    conn.execute(f"VACUUM ANALYZE {TABLE}")


def copy_reference(conn: object, net: pa.Table) -> float:
    """Time a COPY of the net-effect rows into an empty table of the same shape (primary key included)."""
    conn.execute("DROP TABLE IF EXISTS bench.copy_reference")
    conn.execute(f"CREATE TABLE bench.copy_reference (LIKE {TABLE} INCLUDING ALL)")
    buffer = io.BytesIO()
    pacsv.write_csv(net, buffer, pacsv.WriteOptions(include_header=False))
    data = buffer.getvalue()
    started = time.perf_counter()
    with (
        conn.cursor() as cursor,
        cursor.copy(
            f"COPY bench.copy_reference ({', '.join(net.column_names)}) FROM STDIN (FORMAT csv)"
        ) as copy,
    ):
        copy.write(data)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.02, help="1 = 5M rows, 1M changes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", default="1,2,4")
    args = parser.parse_args()
    # The target logs how long the staging load and the apply transaction took: the split of each run.
    logging.basicConfig(format="  %(message)s")
    logging.getLogger("sqlserver_cdc.merge_job").setLevel(logging.INFO)
    logging.getLogger("sqlserver_cdc.merge_job").addFilter(
        lambda r: "staged" in r.msg or "committed" in r.msg
    )
    rows, changes = int(5_000_000 * args.scale), int(1_000_000 * args.scale)
    counts = [int(c) for c in args.connections.split(",")]
    with PostgresServer.start() as server, tempfile.TemporaryDirectory() as work:
        database = server.create_database("bench")
        os.environ[USER_ENV], os.environ[PASSWORD_ENV] = server.user, server.password
        manifest, net = write_change_window(Path(work), rows, changes, seed=7)
        spark = local_spark_session({}, app_name="relational-target-bench", driver_memory="2g")
        conn = server.connect(database)

        def apply(connections: int) -> float:
            settings = MergeJobSettings(
                manifests=(manifest,), namespace="bench", target_kind="postgres",
                jdbc_url=server.jdbc_url(database), jdbc_connections=connections,
            )  # fmt: skip
            started = time.perf_counter()
            run(spark, settings)
            return time.perf_counter() - started

        print(f"target {rows:,} rows, window {changes:,} changes ({net.num_rows:,} net-effect rows)")
        apply(counts[-1])  # warm-up: creates the table
        times: dict[str, list[float]] = {str(c): [] for c in counts} | {"COPY": []}
        for round_number in range(args.rounds):
            for connections in counts[round_number % len(counts) :] + counts[: round_number % len(counts)]:
                restore(conn, rows)
                times[str(connections)].append(apply(connections))
                check = conn.execute(f"SELECT count(*) FROM {TABLE} WHERE NOT _cdc_deleted").fetchone()[0]
                assert check == rows + int(changes * 0.2) - (
                    changes - int(changes * 0.7) - int(changes * 0.2)
                )
            times["COPY"].append(copy_reference(conn, net))
            print(f"round {round_number + 1}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()))
        reference = statistics.median(times["COPY"])
        print(f"COPY of the net-effect rows: {reference:.2f}s (median)")
        for connections in counts:
            median = statistics.median(times[str(connections)])
            print(
                f"apply with {connections} connection(s): {median:.2f}s median "
                f"(range {min(times[str(connections)]):.2f}-{max(times[str(connections)]):.2f}), "
                f"{median / reference:.1f}x COPY"
            )
        conn.close()
        spark.stop()


if __name__ == "__main__":
    main()
