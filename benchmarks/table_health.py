"""Benchmark: a table's health over many consecutive windows, with and without the provider's maintenance.

Merges --windows consecutive windows (default 300; the issue's figure is 1,000) of --changes changes
each (60% updates with their before-images, 25% inserts, 15% deletes, keys drawn uniformly from the
live rows) into a table loaded with --rows rows (default 500,000), in one local Spark session, with
the merge job (``spark.merge.job.run``). Windows are adjacent in LSN order (each starts right after the
previous one's end), as the extractor cuts them. Every --report-every windows (default 100) it prints
the merge time (median of those windows), a downstream full scan (every column of the live rows), the
data and delete files, snapshots, metadata.json bytes, the applied state's size, tombstones and the
bytes on disk against the live data's; at the end the ratios last/first.

``--maintenance`` runs the maintenance job's table step (``spark.maintenance.job.maintain_table``, with
its default thresholds) after every --maintenance-every windows (default 10), as the pipeline's
maintenance task would, and prints each run that did something with the bytes on disk over the live
data right after it (the highest point: a full compaction's inputs are still pinned). The benchmark's
time runs faster than the wall clock, so the time-travel window is 0 hours and the last --retain-last
snapshots are kept. Only the merge is timed; the windows are generated in memory (a few ms each) and
the warehouse is removed at the end (--keep keeps it). Usage::

    python benchmarks/table_health.py [--windows 300] [--rows 500000] [--write-mode merge-on-read]
        [--delete-granularity partition|file] [--maintenance] [--maintenance-every 10] [--report-every 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from merge import COLUMNS, interleaved_changes, last_start_lsn, snapshot_table, spark_session, write_window

from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import MaintenanceSettings
from airflow_provider_sqlserver_cdc.spark.maintenance.job import maintain_table
from airflow_provider_sqlserver_cdc.spark.maintenance.table_health import read_health, tombstone_count
from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.job import run
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table

TABLE = "lake.bench.dbo_orders"
SNAPSHOT_LSN = 0x1000
CHANGES_PER_TRANSACTION = 100
# Position of the update mask bits: every column for inserts and deletes, the non-key ones for updates.
assert len(COLUMNS) == 6


class LiveKeys:
    """The keys of the source table's live rows, and the next key an insert takes."""

    def __init__(self, size: int) -> None:
        self.keys = np.arange(1, size + 1, dtype=np.int64)
        self.next_key = size + 1

    def draw(self, changes: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (updated, inserted, deleted) keys of one window and apply them."""
        updates, inserts = int(changes * 0.60), int(changes * 0.25)
        deletes = changes - updates - inserts
        picked = rng.choice(len(self.keys), updates + deletes, replace=False)
        updated, deleted = self.keys[picked[:updates]], self.keys[picked[updates:]]
        inserted = np.arange(self.next_key, self.next_key + inserts, dtype=np.int64)
        self.next_key += inserts
        keep = np.ones(len(self.keys), dtype=bool)
        keep[picked[updates:]] = False
        self.keys = np.concatenate([self.keys[keep], inserted])
        return updated, inserted, deleted


def change_window(
    base: Path, number: int, first_lsn: int, keys: LiveKeys, changes: int, rng: np.random.Generator
) -> tuple[str, int]:
    """Write window ``number`` starting at ``first_lsn``; return its manifest and last LSN."""
    updated, inserted, deleted = keys.draw(changes, rng)
    table = interleaved_changes(
        updated,
        inserted,
        deleted,
        first_lsn,
        rng,
        version=number + 2,
        per_transaction=CHANGES_PER_TRANSACTION,
        # The whole window commits in minute ``number`` of the day.
        commit_offsets=lambda starts: np.full(len(starts), number, dtype="timedelta64[m]"),
    )
    last = last_start_lsn(table)
    return write_window(base, "changes", first_lsn, last, table), last


def disk_bytes(location: str) -> int:
    """Bytes of every file under a local table location."""
    root = location.removeprefix("file:")
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def full_scan_seconds(spark) -> float:
    """Time a downstream reader's full scan: every column of the live rows."""
    started = time.perf_counter()
    spark.sql(f"SELECT count(*), sum(xxhash64(*)) FROM {TABLE} WHERE NOT _cdc_deleted").collect()
    return time.perf_counter() - started


def figures(spark, merge_seconds: list[float]) -> dict[str, float]:
    """The report line's figures."""
    iceberg = iceberg_table(spark, TABLE)
    health = read_health(spark, TABLE, iceberg)
    return {
        "merge_s": statistics.median(merge_seconds) if merge_seconds else float("nan"),
        "scan_s": full_scan_seconds(spark),
        "data_files": health.data_files,
        "delete_files": health.delete_files,
        "snapshots": health.snapshots,
        "metadata_bytes": health.metadata_bytes,
        "state_chars": health.state_chars,
        "tombstones": tombstone_count(spark, TABLE),
        "disk_over_live": disk_bytes(iceberg.location()) / max(health.data_bytes, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=300)
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--write-mode", choices=("merge-on-read", "copy-on-write"), default="merge-on-read")
    parser.add_argument("--delete-granularity", choices=("partition", "file"), default=None)
    parser.add_argument("--maintenance", action="store_true")
    parser.add_argument("--maintenance-every", type=int, default=10)
    parser.add_argument("--retain-last", type=int, default=10)
    parser.add_argument("--report-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument(
        "--keep", action="store_true", help="keep the warehouse and windows (default: removed)"
    )
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    work = Path(tempfile.mkdtemp(prefix="table-health-"))
    try:
        measure(args, rng, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, rng: np.random.Generator, work: Path) -> None:
    """Load the table, merge the windows, maintain it if asked, print the figures."""
    spark = spark_session(work / "warehouse", shuffle_partitions=4)
    properties = {"write.delete.granularity": args.delete_granularity} if args.delete_granularity else {}
    options = {"namespace": "lake.bench", "write_mode": args.write_mode, "table_properties": properties}
    snapshot = write_window(
        work / "windows", "snapshot", SNAPSHOT_LSN, SNAPSHOT_LSN, snapshot_table(args.rows, rng)
    )
    run(spark, MergeJobSettings(manifests=(snapshot,), **options))
    full_scan_seconds(spark)  # JIT warm-up: the first scan of a session is several times slower
    first = figures(spark, [])
    print(f"initial load of {args.rows:,} rows: scan {first['scan_s']:.2f} s, {first}", flush=True)
    keys, last_lsn, merge_seconds, reports = LiveKeys(args.rows), SNAPSHOT_LSN, [], []
    settings = MaintenanceSettings(tables=(TABLE,), snapshot_retention_hours=0, retain_last=args.retain_last)
    for number in range(1, args.windows + 1):
        manifest, last_lsn = change_window(work / "windows", number, last_lsn + 1, keys, args.changes, rng)
        started = time.perf_counter()
        run(spark, MergeJobSettings(manifests=(manifest,), **options))
        merge_seconds.append(time.perf_counter() - started)
        if args.maintenance and number % args.maintenance_every == 0:
            started = time.perf_counter()
            entry = maintain_table(spark, TABLE, settings, dt.datetime.now(dt.UTC))
            if entry["status"] != "skipped":
                # Disk right after a run: the highest point (a full compaction's inputs are still pinned).
                disk = disk_bytes(iceberg_table(spark, TABLE).location()) / max(
                    entry["after"]["data_bytes"], 1
                )
                print(
                    f"  window {number}: maintenance {entry['status']} {entry.get('compaction', '')} "
                    f"({'; '.join(entry['reasons']) or 'expiry only'}) {time.perf_counter() - started:.1f} s, "
                    f"disk/live {disk:.2f}",
                    flush=True,
                )
        if number % args.report_every == 0 or number == args.windows:
            report = figures(spark, merge_seconds[-args.report_every :])
            reports.append(report)
            print(f"window {number}: " + ", ".join(f"{k} {v:.3g}" for k, v in report.items()), flush=True)
    last, head = reports[-1], reports[0]
    print(
        "ratios last/first report: "
        + ", ".join(
            f"{k} {last[k] / head[k]:.2f}"
            for k in ("merge_s", "scan_s", "metadata_bytes", "disk_over_live")
            if head[k]
        )
    )
    print(
        f"scan last / after the initial load: {last['scan_s'] / first['scan_s']:.2f}; "
        f"state {last['state_chars']} chars; metadata.json {last['metadata_bytes']:,} bytes"
    )
    spark.stop()


if __name__ == "__main__":
    main()
