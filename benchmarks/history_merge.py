"""Benchmark: the history (SCD type 2) merge against the current-state merge, on the same windows.

Two target tables start from the same snapshot (``--size`` rows, merged by the job into each:
untimed). Then ``--windows`` change windows (each ``--changes`` changes: 70 % updates with their
before-images, 20 % inserts, 10 % deletes, as ``merge.py`` makes them; ``--keys uniform`` draws the
updated and deleted keys from the whole table, ``recent`` from its newest fifth) are merged by
``spark.merge.job.run`` into both, window by window, the two tables' merges back to back in
alternating order, each after a JVM garbage collection. The first window warms the JVM and is not
counted. Per window it prints the wall and JVM CPU time of both merges and their ratio; the
summary gives the median ratio history / current (and its range) and the tables' row counts
(the history table keeps every version).

Spark runs on local[2] with the Iceberg runtime jar of the dev extra. Usage:
``python benchmarks/history_merge.py [--size 1000000] [--changes 100000] [--windows 4]
[--keys uniform|recent] [--mode merge-on-read|copy-on-write]``.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
from merge import (
    SNAPSHOT_LSN,
    JvmClock,
    change_positions,
    lsn_bytes,
    rows,
    snapshot_table,
    spark_session,
    write_window,
)

from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.job import run

#: LSNs between the first transactions of two windows (each window's transactions fit in it).
WINDOW_LSNS = 0x100000


def window_changes(
    size: int, changes: int, rng: np.random.Generator, number: int, keys: str
) -> tuple[pa.Table, int, int]:
    """One window's change rows (``merge.change_table``'s mix) after ``number`` earlier windows.

    Inserted keys continue after the snapshot's and the earlier windows' inserts; updated and
    deleted keys are drawn from the snapshot's keys. Return the rows and the window's LSN range.
    """
    updates, inserts = int(changes * 0.7), int(changes * 0.2)
    deletes = changes - updates - inserts
    first = 0 if keys == "uniform" else size - size // 5
    existing = first + rng.permutation(size - first)[: updates + deletes] + 1
    inserted = np.arange(size + number * inserts + 1, size + (number + 1) * inserts + 1)
    kinds = rng.permutation(np.repeat(np.array([4, 2, 1], dtype=np.int32), [updates, inserts, deletes]))
    ids = np.empty(changes, dtype=np.int64)
    ids[kinds == 4], ids[kinds == 2], ids[kinds == 1] = existing[:updates], inserted, existing[updates:]
    first_lsn = SNAPSHOT_LSN + 0x10 + number * WINDOW_LSNS
    all_ids, all_ops, all_start, all_seq = change_positions(ids, kinds, first_lsn)
    table = pa.table(
        {
            "__$start_lsn": lsn_bytes(all_start),
            "__$seqval": lsn_bytes(all_seq),
            "__$operation": pa.array(all_ops, pa.int32()),
            "__$update_mask": pa.array(np.where(all_ops >= 3, b"\x3c", b"\x3f"), pa.binary()),
            "__$commit_time": pa.array(
                np.datetime64("2026-01-02T00:00:00") + (all_start - SNAPSHOT_LSN).astype("timedelta64[ms]"),
                pa.timestamp("us", tz="UTC"),
            ),
            **rows(all_ids, number + 2, rng),
        }
    )
    return table, first_lsn, int(all_start.max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="rows of the snapshot")
    parser.add_argument("--changes", type=int, default=100_000, help="changes per window")
    parser.add_argument("--windows", type=int, default=4, help="windows, the first one not counted")
    parser.add_argument("--keys", choices=("uniform", "recent"), default="uniform")
    parser.add_argument("--mode", choices=("merge-on-read", "copy-on-write"), default="merge-on-read")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="history-merge-bench-"))
    rng = np.random.default_rng(35)
    spark = spark_session(work / "warehouse", args.shuffle_partitions)
    clock = JvmClock(spark)
    tables = {"current": "lake.bench.orders_current", "history": "lake.bench.orders_history"}

    def merge(mode: str, manifest: str) -> None:
        modes = {"dbo_orders": mode} if mode != "current" else {}
        settings = MergeJobSettings(
            manifests=(manifest,),
            targets={"dbo_orders": tables[mode]},
            write_mode=args.mode,
            table_modes=modes,
        )
        run(spark, settings)

    try:
        snapshot = write_window(
            work / "windows", "snapshot", SNAPSHOT_LSN, SNAPSHOT_LSN, snapshot_table(args.size, rng)
        )
        for mode in tables:
            merge(mode, snapshot)  # untimed set-up
        print(
            f"{args.size:,} rows, windows of {args.changes:,} changes ({args.keys} keys), {args.mode}; "
            "wall s (JVM CPU s)"
        )
        ratios, cpu_ratios = [], []
        for number in range(args.windows):
            changes, first_lsn, last_lsn = window_changes(args.size, args.changes, rng, number, args.keys)
            manifest = write_window(work / "windows", "changes", first_lsn, last_lsn, changes)
            order = ["current", "history"] if number % 2 == 0 else ["history", "current"]
            times = {
                mode: clock.measure(lambda mode=mode, manifest=manifest: merge(mode, manifest))
                for mode in order
            }
            (cur_wall, cur_cpu), (his_wall, his_cpu) = times["current"], times["history"]
            counted = number > 0
            if counted:
                ratios.append(his_wall / cur_wall)
                cpu_ratios.append(his_cpu / cur_cpu)
            print(
                f"window {number + 1}{'' if counted else ' (warm-up)'}: current {cur_wall:.2f} ({cur_cpu:.2f}), "
                f"history {his_wall:.2f} ({his_cpu:.2f}), history / current {his_wall / cur_wall:.2f}x"
            )
        counts = {mode: spark.table(table).count() for mode, table in tables.items()}
        if ratios:
            print(
                f"history / current, median of {len(ratios)} windows: {statistics.median(ratios):.2f}x wall "
                f"({min(ratios):.2f}-{max(ratios):.2f}), {statistics.median(cpu_ratios):.2f}x JVM CPU; "
                f"rows: current {counts['current']:,}, history {counts['history']:,}"
            )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
