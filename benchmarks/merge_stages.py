"""Benchmark: where one merge job run spends its time, Spark stage by Spark stage, beside a plain copy.

Builds ``benchmarks/merge.py``'s data (a target of ``5,000,000 * --scale`` rows and one window),
then, for each round on a fresh target, times a plain copy of the table and one run of the job, and
prints every Spark job and stage the run started: wall time, tasks, task CPU-seconds summed over
the tasks (``executorRunTime``), when each started (seconds after the run's first job), rows read from files and from shuffles, rows shuffled out. Use it
to see which step a change to the merge path makes cheaper; ``benchmarks/merge.py`` gives the
ratios to quote. The first round warms the JVM up and is printed but not meant to be read.

Usage: ``python benchmarks/merge_stages.py [--scale 1] [--keys uniform|recent] [--changes 1000000]
[--rounds 2] [--strategy merge]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from merge import (
    SNAPSHOT_LSN,
    JvmClock,
    change_table,
    last_start_lsn,
    load_baseline,
    snapshot_table,
    spark_session,
    write_window,
)

from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.job import run


def job_ids(spark: Any) -> set[int]:
    """Return the ids of the Spark jobs the application has run so far."""
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def print_jobs(spark: Any, jobs: list[int]) -> None:
    """Print the given Spark jobs and their stages, in order, from the application's status store."""
    store = spark.sparkContext._jsc.sc().statusStore()
    tracker = spark.sparkContext.statusTracker()
    first = min((store.job(j).submissionTime().get().getTime() for j in jobs), default=0)
    for job_id in sorted(jobs):
        job = store.job(job_id)
        submitted, completed = job.submissionTime(), job.completionTime()
        wall = (completed.get().getTime() - submitted.get().getTime()) / 1000 if completed.isDefined() else -1
        start = (submitted.get().getTime() - first) / 1000
        print(f"  job {job_id:4d} at {start:6.2f} s {wall:6.2f} s  {job.name()[:90]}")
        info = tracker.getJobInfo(job_id)
        for stage_id in sorted(info.stageIds if info else []):
            try:
                stage = store.lastStageAttempt(stage_id)
            except Exception:  # a stage that was skipped (its shuffle output reused) has no attempt
                continue
            if stage.numCompleteTasks() == 0:
                continue
            started, finished = stage.submissionTime(), stage.completionTime()
            wall = (finished.get().getTime() - started.get().getTime()) / 1000 if finished.isDefined() else -1
            start = (started.get().getTime() - first) / 1000
            print(
                f"    stage {stage_id:4d} at {start:6.2f} s {wall:6.2f} s  tasks {stage.numTasks():3d}  task CPU "
                f"{stage.executorRunTime() / 1000:6.2f} s  rows in {stage.inputRecords():>10,}  "
                f"shuffled in {stage.shuffleReadRecords():>10,}  out {stage.shuffleWriteRecords():>10,}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--keys", choices=("uniform", "recent"), default="uniform")
    parser.add_argument("--changes", type=int, default=None, help="default 1,000,000 * scale")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--strategy", default="merge", help="--merge-strategy of the job")
    args = parser.parse_args()
    size = int(5_000_000 * args.scale)
    changes = args.changes if args.changes is not None else int(1_000_000 * args.scale)
    work = Path(tempfile.mkdtemp(prefix="cdc-merge-stages-"))
    try:
        rng = np.random.default_rng(6)
        snapshot = write_window(
            work / "snapshot", "snapshot", SNAPSHOT_LSN, SNAPSHOT_LSN, snapshot_table(size, rng)
        )
        rows, mix = change_table(size, changes, rng, args.keys)
        window = write_window(work / "changes", "changes", SNAPSHOT_LSN + 1, last_start_lsn(rows), rows)
        del rows
        print(f"target rows {size:,}; window {args.keys}: {mix}")
        spark = spark_session(work / "warehouse", 8)
        clock = JvmClock(spark)
        for round_number in range(args.rounds):
            table = f"lake.bench.orders_{round_number}"
            load_baseline(spark, snapshot, table, "merge-on-read", 0)
            copy, _ = clock.measure(
                lambda table=table: spark.sql(
                    f"CREATE OR REPLACE TABLE {table}_copy USING iceberg AS SELECT * FROM {table}"
                )
            )
            before = job_ids(spark)
            settings = MergeJobSettings(
                manifests=(window,), targets={"dbo_orders": table}, merge_strategy=args.strategy
            )
            started = time.perf_counter()
            merge, _ = clock.measure(lambda settings=settings: run(spark, settings))
            label = "warm-up" if round_number == 0 else f"round {round_number}"
            print(f"{label}: copy {copy:.2f} s, merge job {merge:.2f} s ({merge / copy:.2f}x)")
            print_jobs(spark, sorted(job_ids(spark) - before))
            print(
                f"  (driver-side time outside Spark jobs is the rest of {time.perf_counter() - started:.2f} s)"
            )
            spark.sql(f"DROP TABLE {table}_copy PURGE")
            spark.sql(f"DROP TABLE {table} PURGE")
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
