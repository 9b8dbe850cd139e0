"""Benchmark: the merge job against a plain rewrite of the same Iceberg table, side by side.

At --scale 1: a 5,000,000-row target; a window of 1,000,000 changes (70% updates with their
before-images, 20% inserts, 10% deletes). For copy-on-write and merge-on-read tables it times

* rewrite: ``CREATE OR REPLACE TABLE copy AS SELECT * FROM target`` (read and write every row);
* merge:   ``spark.merge.job.run`` on the window (manifest checks, row count, state, net effect, MERGE).

Each mode runs on a target created unpartitioned (the plain MERGE, whose join shuffles the
target) and on one bucketed by key (``bucket(N, id)``: the storage-partitioned MERGE from a
staging table, docs/merge-performance.md), side by side; ``--layouts`` picks them. Every row
prints the strategy the job chose and the ``Exchange`` count of the MERGE's executed plan (all,
and those feeding the target's scan).

``--strategies`` runs the job's merge strategies side by side (``auto``: its choice per window,
``merge``, ``rewrite``: forced; docs/merge-performance.md); ``--windows`` measures several windows
(``uniform:1000000,recent:1000000,uniform:10000``) in one Spark application; ``--format-versions 2,3``
also measures targets upgraded to Iceberg format 3 (merge-on-read then writes deletion vectors).

Goal: merge within 1.5x of the rewrite. Spark runs on local[2] with the Iceberg runtime jar of the
dev extra; one full-size round runs first and is not counted (JIT warm-up), then every mode is measured
--rounds times (default 3; rewrite and merge of a round run back to back, after a JVM garbage
collection; the order of the modes rotates from round to round). Each round prints wall time and the
JVM's CPU time of both; the summary gives the median ratio per mode, with its range, since the machine
is shared. Usage: ``python benchmarks/merge.py [--scale 0.1] [--changes 10000] [--keys recent]
[--modes copy-on-write,merge-on-read] [--layouts unpartitioned,bucketed] [--buckets 8]
[--strategies auto,merge,rewrite] [--windows uniform:1000000,recent:1000000] [--format-versions 2,3]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from bench_source import process_cpu_seconds

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge import staged_merge
from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import DELETED
from airflow_provider_sqlserver_cdc.spark.merge.executed_plan import MERGE_REPORT_ATTRIBUTE, MergeReport
from airflow_provider_sqlserver_cdc.spark.merge.job import configure_session, run
from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan, plan_schema
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import IcebergTarget, iceberg_table
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import load_window, read_window
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_spark_conf, local_spark_session
from airflow_provider_sqlserver_cdc.window.net_effect import OPERATION_NAMES

SNAPSHOT_LSN = 0x1000
CHANGES_PER_TRANSACTION = 1000
COLUMNS = [
    {
        "name": "id",
        "sql_type": "bigint",
        "precision": 19,
        "scale": 0,
        "nullable": False,
        "arrow_type": "int64",
    },
    {
        "name": "customer_id",
        "sql_type": "int",
        "precision": 10,
        "scale": 0,
        "nullable": True,
        "arrow_type": "int32",
    },
    {"name": "name", "sql_type": "nvarchar", "max_length": 200, "nullable": True, "arrow_type": "string"},
    {"name": "status", "sql_type": "varchar", "max_length": 20, "nullable": True, "arrow_type": "string"},
    {
        "name": "amount",
        "sql_type": "decimal",
        "precision": 12,
        "scale": 2,
        "nullable": True,
        "arrow_type": "decimal128(12, 2)",
    },
    {
        "name": "updated_at",
        "sql_type": "datetime2",
        "scale": 6,
        "nullable": True,
        "arrow_type": "timestamp[us]",
    },
]
STATUSES = np.array(["new", "paid", "shipped", "returned"], dtype=object)


def lsn_bytes(values: np.ndarray) -> pa.Array:
    """10-byte big-endian LSNs from integers (< 2**64)."""
    raw = np.zeros((len(values), 10), dtype=np.uint8)
    raw[:, 2:] = values.astype(">u8").view(np.uint8).reshape(-1, 8)
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(10), len(values), [None, pa.py_buffer(raw.tobytes())]
    ).cast(pa.binary())


def decimal_cents(cents: np.ndarray) -> pa.Array:
    """decimal(12,2) values from non-negative integer cents (built from the 128-bit unscaled values)."""
    raw = np.zeros((len(cents), 2), dtype="<i8")
    raw[:, 0] = cents
    return pa.Array.from_buffers(pa.decimal128(12, 2), len(cents), [None, pa.py_buffer(raw.tobytes())])


def rows(ids: np.ndarray, version: int, rng: np.random.Generator) -> dict[str, pa.Array]:
    """Captured column values for the given ids."""
    n = len(ids)
    id_array = pa.array(ids, pa.int64())
    names = pc.binary_join_element_wise(
        pa.array(["customer"] * n), pc.cast(id_array, pa.string()), f"v{version}", "-"
    )
    return {
        "id": id_array,
        "customer_id": pa.array((ids % 100_000).astype(np.int32)),
        "name": names,
        "status": pa.array(STATUSES[rng.integers(0, len(STATUSES), n)], pa.string()),
        "amount": decimal_cents(rng.integers(0, 10**9, n)),
        "updated_at": pa.array(
            np.datetime64("2026-01-01T00:00:00")
            + rng.integers(0, 86_400_000_000, n).astype("timedelta64[us]"),
            pa.timestamp("us"),
        ),
    }


def write_window(
    base: Path, kind: str, from_lsn: int, to_lsn: int, table: pa.Table, rows_per_file: int = 1_000_000
) -> str:
    """Write a window (Parquet files then manifest) in the documented format; return the manifest path."""
    directory = base / "dbo_orders" / f"{Lsn.from_int(from_lsn).hex}_{Lsn.from_int(to_lsn).hex}"
    directory.mkdir(parents=True)
    files = []
    for number, start in enumerate(range(0, max(table.num_rows, 1), rows_per_file)):
        chunk = table.slice(start, rows_per_file)
        name = f"part-{number:05d}.parquet"
        pq.write_table(chunk, directory / name, compression="zstd")
        files.append({"path": name, "rows": chunk.num_rows, "bytes": (directory / name).stat().st_size})
    operations = pc.value_counts(table["__$operation"]).to_pylist()
    counts = dict.fromkeys(OPERATION_NAMES.values(), 0)
    for entry in operations:
        counts[OPERATION_NAMES[entry["values"]]] = entry["counts"]
    manifest = {
        "format_version": 1,
        "kind": kind,
        "capture_instance": "dbo_orders",
        "source": {"server": "bench", "database": "shop", "schema": "dbo", "table": "orders"},
        "from_lsn": Lsn.from_int(from_lsn).hex,
        "to_lsn": Lsn.from_int(to_lsn).hex,
        "from_time": None,
        "to_time": None,
        "mode": "snapshot" if kind == "snapshot" else "interval",
        "row_filter_option": "all update old",
        "key_columns": ["id"],
        "columns": [dict(c, ordinal=i + 1) for i, c in enumerate(COLUMNS)],
        "files": files,
        "row_count": table.num_rows,
        "operation_counts": counts,
    }
    (directory / "_manifest.json").write_text(json.dumps(manifest))
    return str(directory / "_manifest.json")


def change_positions(
    ids: np.ndarray, kinds: np.ndarray, first_lsn: int, per_transaction: int = CHANGES_PER_TRANSACTION
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Place changes in transactions of ``per_transaction`` from ``first_lsn``; return them in LSN order.

    Each update (operation 4) gets its before-image (operation 3) at the same position, as
    ``cdc.fn_cdc_get_all_changes_<ci>(..., 'all update old')`` returns it.

    :param ids: one key per change.
    :param kinds: each change's ``__$operation`` (1 delete, 2 insert, 4 update).
    :param first_lsn: the first transaction's LSN (as an integer).
    :param per_transaction: changes per transaction (one LSN each).
    :return: keys, operations, start LSNs and seqvals of every row, sorted.
    """
    number = np.arange(len(kinds))
    start_lsn = first_lsn + number // per_transaction
    seqval = start_lsn * 0x10000 + number % per_transaction
    before = kinds == 4
    all_ids = np.concatenate([ids, ids[before]])
    all_ops = np.concatenate([kinds, np.full(before.sum(), 3, dtype=np.int32)])
    all_start = np.concatenate([start_lsn, start_lsn[before]])
    all_seq = np.concatenate([seqval, seqval[before]])
    order = np.lexsort((all_ops, all_seq, all_start))
    return all_ids[order], all_ops[order], all_start[order], all_seq[order]


def interleaved_changes(
    updated: np.ndarray,
    inserted: np.ndarray,
    deleted: np.ndarray,
    first_lsn: int,
    rng: np.random.Generator,
    *,
    version: int,
    commit_offsets: Callable[[np.ndarray], np.ndarray],
    per_transaction: int = CHANGES_PER_TRANSACTION,
) -> pa.Table:
    """The change rows of updates, inserts and deletes of these keys in random order (:func:`change_positions`).

    As SQL Server sets ``__$update_mask``: every column for inserts and deletes; for updates the
    columns they changed (name, status, amount, updated_at: ordinals 3-6), never the key.

    :param version: the version of the rows' values (:func:`rows`).
    :param commit_offsets: each row's ``__$commit_time`` after 2026-01-02 00:00, from its start LSNs.
    """
    # Interleave kinds: one change number per logical change, in random order.
    counts = [len(updated), len(inserted), len(deleted)]
    kinds = rng.permutation(np.repeat(np.array([4, 2, 1], dtype=np.int32), counts))
    ids = np.empty(len(kinds), dtype=np.int64)
    ids[kinds == 4], ids[kinds == 2], ids[kinds == 1] = updated, inserted, deleted
    all_ids, all_ops, all_start, all_seq = change_positions(ids, kinds, first_lsn, per_transaction)
    return pa.table(
        {
            "__$start_lsn": lsn_bytes(all_start),
            "__$seqval": lsn_bytes(all_seq),
            "__$operation": pa.array(all_ops, pa.int32()),
            "__$update_mask": pa.array(np.where(all_ops >= 3, b"\x3c", b"\x3f"), pa.binary()),
            "__$commit_time": pa.array(
                np.datetime64("2026-01-02T00:00:00") + commit_offsets(all_start),
                pa.timestamp("us", tz="UTC"),
            ),
            **rows(all_ids, version, rng),
        }
    )


def change_table(
    size: int, changes: int, rng: np.random.Generator, keys: str = "uniform"
) -> tuple[pa.Table, dict[str, int]]:
    """70% updates (before + after image), 20% inserts, 10% deletes, in transactions of 1000.

    ``keys="uniform"`` updates and deletes keys drawn from the whole table; ``"recent"`` draws them
    from the newest fifth of the keys (recent rows are the ones that change, as in most OLTP tables).
    """
    updates, inserts = int(changes * 0.7), int(changes * 0.2)
    deletes = changes - updates - inserts
    first = 0 if keys == "uniform" else size - size // 5
    existing = first + rng.permutation(size - first)[: updates + deletes] + 1
    updated, deleted = existing[:updates], existing[updates:]
    inserted = np.arange(size + 1, size + inserts + 1)
    table = interleaved_changes(
        updated,
        inserted,
        deleted,
        SNAPSHOT_LSN + 0x10,
        rng,
        version=2,
        # The commit times follow the LSNs, a millisecond each.
        commit_offsets=lambda starts: (starts - SNAPSHOT_LSN).astype("timedelta64[ms]"),
    )
    return table, {"updates": updates, "inserts": inserts, "deletes": deletes, "rows": table.num_rows}


def last_start_lsn(changes: pa.Table) -> int:
    """The ``__$start_lsn`` of the last change row (rows are in LSN order), as an integer."""
    return int(np.frombuffer(changes["__$start_lsn"][-1].as_py()[2:], dtype=">u8")[0])


def snapshot_table(size: int, rng: np.random.Generator) -> pa.Table:
    """The initial rows: every row operation 2 at the snapshot LSN."""
    ids = np.arange(1, size + 1, dtype=np.int64)
    position = lsn_bytes(np.full(size, SNAPSHOT_LSN, dtype=np.int64))
    return pa.table(
        {
            "__$start_lsn": position,
            "__$seqval": position,
            "__$operation": pa.array(np.full(size, 2, dtype=np.int32)),
            "__$update_mask": pa.nulls(size, pa.binary()),
            "__$commit_time": pa.array(
                [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * 1, pa.timestamp("us", tz="UTC")
            ).take(pa.array(np.zeros(size, dtype=np.int64))),
            **rows(ids, 1, rng),
        }
    )


def spark_session(warehouse: Path, shuffle_partitions: int):
    return local_spark_session(
        iceberg_spark_conf(warehouse),
        app_name="sqlserver-cdc-merge-benchmark",
        shuffle_partitions=shuffle_partitions,
        driver_memory="6g",
    )


class JvmClock:
    """Wall time and the driver JVM's CPU time (local mode: the executors run in that JVM)."""

    def __init__(self, spark) -> None:
        self.jvm = spark.sparkContext._jvm
        self.pid = self.jvm.java.lang.ProcessHandle.current().pid()

    def measure(self, action) -> tuple[float, float]:
        """Collect garbage first (so no step pays for the previous one's), then time ``action``."""
        self.jvm.java.lang.System.gc()
        cpu, started = process_cpu_seconds(self.pid), time.perf_counter()
        action()
        return time.perf_counter() - started, process_cpu_seconds(self.pid) - cpu


class MergeReports(logging.Handler):
    """Keep the ``MergeReport`` the job logs for each MERGE."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.reports: list[MergeReport] = []

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, MERGE_REPORT_ATTRIBUTE):
            self.reports.append(getattr(record, MERGE_REPORT_ATTRIBUTE))


def load_baseline(
    spark, snapshot_manifest: str, table: str, mode: str, buckets: int | None, format_version: int = 2
) -> None:
    """Create the target as the job would and fill it with the snapshot rows (untimed set-up).

    :param format_version: 3 upgrades the table to Iceberg format 3 (deletion vectors) before the rows go in.
    """
    from pyspark.sql import functions as F

    configure_session(spark)
    window = load_window(spark, snapshot_manifest)
    plan = TargetPlan(table, windows=[window])
    plan_schema(plan, None)
    IcebergTarget(spark, mode, partition_buckets=buckets).create_table(plan)
    if format_version != 2:
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('format-version'='{format_version}')")
    frame = read_window(spark, window, table).withColumn(DELETED, F.lit(False))
    frame.writeTo(table).append()


#: Layouts that run the staged MERGE with one more session setting: an experiment against the job's choice.
LAYOUT_EXPERIMENTS = {
    "bucketed-hash-join": {"spark.sql.join.preferSortMergeJoin": "false"},
    "bucketed-sort-merge-join": {"spark.sql.join.preferSortMergeJoin": "true"},
}


def merge_in(spark, settings: MergeJobSettings, layout: str) -> None:
    """Run the job; for an experimental layout with its setting added to the staged MERGE's."""
    extra = LAYOUT_EXPERIMENTS.get(layout, {})
    saved = dict(staged_merge.SPJ_CONF)
    staged_merge.SPJ_CONF.update(extra)
    try:
        run(spark, settings)
    finally:
        staged_merge.SPJ_CONF.clear()
        staged_merge.SPJ_CONF.update(saved)


def parse_windows(text: str | None, keys: str, changes: int) -> list[tuple[str, int]]:
    """Return the windows to measure: ``KEYS:CHANGES`` items, or the one of ``--keys`` and ``--changes``."""
    if not text:
        return [(keys, changes)]
    windows = []
    for item in text.split(","):
        kind, _, count = item.partition(":")
        if kind not in ("uniform", "recent") or not count.isdigit():
            raise SystemExit(f"--windows {item!r}: expected uniform:N or recent:N")
        windows.append((kind, int(count)))
    return windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = 5,000,000 rows and 1,000,000 changes")
    parser.add_argument(
        "--changes",
        type=int,
        default=None,
        help="changes in the window (default 1,000,000 x scale); e.g. 10000 for a minutely window",
    )
    parser.add_argument("--modes", default="merge-on-read,copy-on-write")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument(
        "--layouts",
        default="unpartitioned,bucketed",
        help="target layouts: unpartitioned (plain MERGE) and/or bucketed (storage-partitioned MERGE)",
    )
    parser.add_argument(
        "--buckets",
        type=int,
        default=None,
        help="key buckets of the bucketed target (default: the job's heuristic)",
    )
    parser.add_argument(
        "--keys",
        choices=("uniform", "recent"),
        default="uniform",
        help="which rows the updates and deletes hit: any (default) or the newest fifth of the keys",
    )
    parser.add_argument(
        "--windows",
        default=None,
        help="several windows, measured one after another: KEYS:CHANGES,... (replaces --keys and --changes)",
    )
    parser.add_argument(
        "--strategies",
        default="auto",
        help="merge strategies side by side: auto (the job's choice), merge, rewrite (--merge-strategy)",
    )
    parser.add_argument(
        "--format-versions",
        default="2",
        help="Iceberg formats of the targets, side by side: 2 and/or 3 (deletion vectors for merge-on-read)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="measure each mode this many times")
    parser.add_argument(
        "--warm-up-rounds",
        type=int,
        default=1,
        help="full-size rounds run first and not counted (JIT warm-up)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    size = int(5_000_000 * args.scale)
    changes = args.changes if args.changes is not None else int(1_000_000 * args.scale)
    window_kinds = parse_windows(args.windows, args.keys, changes)
    arms = [
        (mode, layout, strategy, int(version))
        for mode in args.modes.split(",")
        for layout in args.layouts.split(",")
        for strategy in args.strategies.split(",")
        for version in args.format_versions.split(",")
    ]
    reports = MergeReports()
    job_log = logging.getLogger("sqlserver_cdc.merge_job")
    job_log.setLevel(logging.INFO)
    job_log.addHandler(reports)
    job_log.propagate = False
    work = Path(tempfile.mkdtemp(prefix="cdc-merge-bench-"))
    rng = np.random.default_rng(6)
    try:
        started = time.perf_counter()
        snapshot = write_window(
            work / "windows", "snapshot", SNAPSHOT_LSN, SNAPSHOT_LSN, snapshot_table(size, rng)
        )
        windows: list[tuple[str, str, dict[str, int]]] = []
        for keys, count in window_kinds:
            change_rows, mix = change_table(size, count, rng, keys)
            manifest = write_window(
                work / f"windows_{keys}_{count}",
                "changes",
                SNAPSHOT_LSN + 1,
                last_start_lsn(change_rows),
                change_rows,
            )
            del change_rows
            windows.append((f"{keys} {count:,}", manifest, mix))
            print(
                f"target rows {size:,}; window {keys} {count:,}: {mix['updates']:,} updates, "
                f"{mix['inserts']:,} inserts, {mix['deletes']:,} deletes; {mix['rows']:,} change rows with "
                "before-images"
            )
        print(f"windows written in {time.perf_counter() - started:.1f} s")
        spark = spark_session(work / "warehouse", args.shuffle_partitions)
        clock = JvmClock(spark)
        print(
            f"spark {spark.version} local[2], shuffle partitions {args.shuffle_partitions}, "
            f"Iceberg format(s) {args.format_versions}"
        )
        print(
            f"{'window':<16} {'mode':<15} {'layout':<13} {'strategy':<8} {'fv':>2} {'round':>7} {'rewrite s':>10} "
            f"{'merge s':>8} {'ratio':>6}   {'rewrite cpu s':>13} {'merge cpu s':>11} {'ratio':>6} "
            f"{'rows after':>12}  strategy chosen (Exchanges: all/target)"
        )
        ratios: dict[tuple[str, str, str, str, int], list[tuple[float, float]]] = {}
        for index, (label_window, window, mix) in enumerate(windows):
            first_round = 1 - args.warm_up_rounds if index == 0 else 1  # one JVM warm-up for all windows
            for round_number in range(first_round, args.rounds + 1):
                # Rotate the order of the arms: the first measurement of a round tends to be slower.
                shift = (round_number - 1) % len(arms)
                label = str(round_number) if round_number > 0 else "warm-up"
                for mode, layout, strategy, version in arms[shift:] + arms[:shift]:
                    table = (
                        f"lake.bench.orders_{mode.replace('-', '_')}_{layout.replace('-', '_')}_{strategy}_"
                        f"v{version}_{round_number + args.warm_up_rounds}"
                    )
                    buckets = 0 if layout == "unpartitioned" else args.buckets
                    load_baseline(spark, snapshot, table, mode, buckets, version)
                    rewrite, rewrite_cpu = clock.measure(
                        lambda table=table: spark.sql(
                            f"CREATE OR REPLACE TABLE {table}_rewrite USING iceberg AS SELECT * FROM {table}"
                        )
                    )
                    settings = MergeJobSettings(
                        manifests=(window,), targets={"dbo_orders": table}, merge_strategy=strategy
                    )
                    reports.reports.clear()
                    merge, merge_cpu = clock.measure(
                        lambda settings=settings, layout=layout: merge_in(spark, settings, layout)
                    )
                    report = reports.reports[-1]
                    fields = iceberg_table(spark, table).spec().fields()
                    spec = ",".join(str(fields.get(i).transform()) for i in range(fields.size())) or "none"
                    total = spark.table(table).count()
                    live = spark.table(table).where(f"NOT {DELETED}").count()
                    expected_live = size + mix["inserts"] - mix["deletes"]
                    assert live == expected_live, (live, expected_live)
                    print(
                        f"{label_window:<16} {mode:<15} {layout:<13} {strategy:<8} {version:>2} {label:>7} "
                        f"{rewrite:>10.1f} "
                        f"{merge:>8.1f} {merge / rewrite:>5.2f}x   {rewrite_cpu:>13.1f} {merge_cpu:>11.1f} "
                        f"{merge_cpu / rewrite_cpu:>5.2f}x {total:>12,}  {report.strategy} "
                        f"({report.shuffles.exchanges}/{report.shuffles.table_exchanges}) spec {spec}",
                        flush=True,
                    )
                    if round_number > 0:
                        ratios.setdefault((label_window, mode, layout, strategy, version), []).append(
                            (merge / rewrite, merge_cpu / rewrite_cpu)
                        )
                    spark.sql(f"DROP TABLE {table}_rewrite PURGE")
                    spark.sql(f"DROP TABLE {table} PURGE")
        for (label_window, mode, layout, strategy, version), measured in ratios.items():
            wall = sorted(r for r, _ in measured)
            cpu = sorted(c for _, c in measured)
            print(
                f"{label_window:<16} {mode:<15} {layout:<13} {strategy:<8} {version:>2} merge/rewrite over {len(measured)} "
                f"rounds: wall median {statistics.median(wall):.2f}x (min {wall[0]:.2f}x, max {wall[-1]:.2f}x); "
                f"JVM CPU median {statistics.median(cpu):.2f}x (min {cpu[0]:.2f}x, max {cpu[-1]:.2f}x)"
            )
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
