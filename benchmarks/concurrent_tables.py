"""Benchmark: one merge job run over many tables, one table at a time against ``--concurrent-tables N``.

Two sets of tables, each merged by one ``spark.merge.job.run`` (one application, as one DAG run's
merge task), side by side in the same process:

* small: 20 tables of 50,000 rows, a window of 5,000 changes each (a minutely run of a schema);
* large: 2 tables of 1,000,000 rows, a window of 200,000 changes each.

For each set the tables are created and loaded first (untimed; ``merge.py``'s data: 70% updates
with before-images, 20% inserts, 10% deletes), then the run is timed with ``--concurrent-tables 1``
and with N (default: 4 for the small set, 2 for the large one); the order of the two alternates
from round to round, and every round loads fresh tables. The summary prints the median wall time
of each and the ratio sequential / concurrent (above 1: concurrent is faster). Spark runs on
local[2] (``--master``) with ``spark.scheduler.mode`` FAIR (``--scheduler``), as the docs advise
for ``--concurrent-tables``. Usage: ``python benchmarks/concurrent_tables.py [--sets small,large]
[--rounds 3] [--scale 1] [--small-threads 4] [--large-threads 2] [--scheduler FAIR|FIFO]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from merge import (
    SNAPSHOT_LSN,
    change_table,
    last_start_lsn,
    load_baseline,
    snapshot_table,
    write_window,
)

from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import DELETED
from airflow_provider_sqlserver_cdc.spark.merge.job import run
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_spark_conf, local_spark_session


@dataclass(frozen=True)
class TableSet:
    """Tables of one kind: how many, their rows, the changes in each one's window, threads to merge them."""

    name: str
    tables: int
    rows: int
    changes: int
    threads: int


@dataclass(frozen=True)
class PreparedSet:
    """A set's windows on disk: the shared snapshot and one change window per table (capture instance)."""

    table_set: TableSet
    snapshot: str
    windows: dict[str, str]
    live_rows: int


def prepare(table_set: TableSet, base: Path, rng: np.random.Generator) -> PreparedSet:
    """Write the set's snapshot once and its change window once per capture instance ``dbo_<set>_<n>``.

    Every table gets the same changes (its own copy of the window, under its own capture instance), so
    the tables weigh the same.
    """
    directory = base / table_set.name
    snapshot = write_window(
        directory / "snapshot", "snapshot", SNAPSHOT_LSN, SNAPSHOT_LSN, snapshot_table(table_set.rows, rng)
    )
    changes, mix = change_table(table_set.rows, table_set.changes, rng)
    template = Path(
        write_window(directory / "changes", "changes", SNAPSHOT_LSN + 1, last_start_lsn(changes), changes)
    ).parent
    windows = {}
    for number in range(table_set.tables):
        capture_instance = f"dbo_{table_set.name}_{number:02d}"
        copy = directory / capture_instance / template.name
        shutil.copytree(template, copy)
        manifest = json.loads((copy / "_manifest.json").read_text())
        manifest["capture_instance"] = capture_instance
        manifest["source"] = {**manifest["source"], "table": f"{table_set.name}_{number:02d}"}
        (copy / "_manifest.json").write_text(json.dumps(manifest))
        windows[capture_instance] = str(copy / "_manifest.json")
    return PreparedSet(table_set, snapshot, windows, table_set.rows + mix["inserts"] - mix["deletes"])


def timed_run(spark, prepared: PreparedSet, threads: int, label: str) -> float:
    """Load fresh tables (untimed), time one job run over all of them; check every table's live rows."""
    targets = {ci: f"lake.bench.{ci}_{label}" for ci in prepared.windows}
    for table in targets.values():
        load_baseline(spark, prepared.snapshot, table, "merge-on-read", 0)
    settings = MergeJobSettings(
        manifests=tuple(prepared.windows.values()), targets=targets, concurrent_tables=threads
    )
    started = time.perf_counter()
    run(spark, settings)
    elapsed = time.perf_counter() - started
    for table in targets.values():
        # The threads' sessions committed through catalogs of their own: drop this session's cached copy.
        spark.sql(f"REFRESH TABLE {table}")
        live = spark.table(table).where(f"NOT {DELETED}").count()
        assert live == prepared.live_rows, (table, live, prepared.live_rows)
        spark.sql(f"DROP TABLE {table} PURGE")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="small,large", help="small and/or large")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every set's rows and changes")
    parser.add_argument("--small-threads", type=int, default=4)
    parser.add_argument("--large-threads", type=int, default=2)
    parser.add_argument("--scheduler", choices=("FAIR", "FIFO"), default="FAIR")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    args = parser.parse_args()
    logging.getLogger("sqlserver_cdc.merge_job").setLevel(logging.WARNING)
    sets = {
        "small": TableSet("small", 20, int(50_000 * args.scale), int(5_000 * args.scale), args.small_threads),
        "large": TableSet(
            "large", 2, int(1_000_000 * args.scale), int(200_000 * args.scale), args.large_threads
        ),
    }
    work = Path(tempfile.mkdtemp(prefix="cdc-concurrent-bench-"))
    rng = np.random.default_rng(16)
    try:
        prepared = [prepare(sets[name], work / "windows", rng) for name in args.sets.split(",")]
        conf = {**iceberg_spark_conf(work / "warehouse"), "spark.scheduler.mode": args.scheduler}
        spark = local_spark_session(
            conf,
            master=args.master,
            app_name="sqlserver-cdc-concurrent-tables-benchmark",
            shuffle_partitions=args.shuffle_partitions,
            driver_memory="4g",
        )
        print(f"spark {spark.version} {args.master}, scheduler {args.scheduler}, rounds {args.rounds}")
        for item in prepared:
            s = item.table_set
            print(
                f"set {s.name}: {s.tables} tables of {s.rows:,} rows, {s.changes:,} changes each; "
                f"--concurrent-tables 1 against {s.threads}"
            )
            # Warm-up (JIT, catalog): one table, not counted.
            timed_run(
                spark,
                PreparedSet(s, item.snapshot, dict(list(item.windows.items())[:1]), item.live_rows),
                1,
                "warm",
            )
            times: dict[int, list[float]] = {1: [], s.threads: []}
            for round_number in range(1, args.rounds + 1):
                order = [1, s.threads] if round_number % 2 else [s.threads, 1]
                for threads in order:
                    elapsed = timed_run(spark, item, threads, f"r{round_number}_t{threads}")
                    times[threads].append(elapsed)
                    print(
                        f"  round {round_number} --concurrent-tables {threads:<2} {elapsed:7.1f} s",
                        flush=True,
                    )
            sequential, concurrent = statistics.median(times[1]), statistics.median(times[s.threads])
            ratios = sorted(a / b for a, b in zip(times[1], times[s.threads], strict=True))
            print(
                f"set {s.name}: median {sequential:.1f} s one at a time, {concurrent:.1f} s {s.threads} at a time; "
                f"sequential / concurrent {sequential / concurrent:.2f}x (rounds: "
                f"{', '.join(f'{r:.2f}x' for r in ratios)})",
                flush=True,
            )
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
