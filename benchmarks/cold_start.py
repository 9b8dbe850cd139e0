"""Benchmark: the wall time of one spark-submit of the merge job for a small window, under JVM options for short jobs.

Each round writes a window of ``--rows`` inserts and spark-submits ``merge_job.py`` for it into a new
table (local[2], the Iceberg runtime from the test wheel), once per option set, interleaved so that
the machine's load falls on every set alike. Prints per set the median and range of the wall time.

Usage: ``python benchmarks/cold_start.py [--rounds 3] [--rows 1000]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "spark"))

#: The option sets compared: the driver's (and local executor's) extra JVM options.
OPTION_SETS = {
    "default": "",
    "C1 only (-XX:TieredStopAtLevel=1)": "-XX:TieredStopAtLevel=1",
    "C1 only, serial GC": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    from window_builder import ChangeLog, WindowSpec, flatten, write_window

    from airflow_provider_sqlserver_cdc.spark import MERGE_JOB_PATH, merge_job_py_files
    from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar, iceberg_spark_conf

    work = Path(tempfile.mkdtemp(prefix="cold-start-"))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYSPARK_PYTHON": sys.executable,
    }
    times: dict[str, list[float]] = {name: [] for name in OPTION_SETS}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    for number in range(args.rounds):
        for index, (name, options) in enumerate(OPTION_SETS.items()):
            log = ChangeLog()
            rows = flatten(log.insert(id=k, name=f"n{k}", amount=None) for k in range(args.rows))
            manifest = write_window(
                work / f"w{number}_{index}", WindowSpec("dbo_orders", 0x100, log.lsn, rows)
            )
            command = ["spark-submit", "--master", "local[2]", "--driver-memory", "1g"]
            for key, value in {
                **iceberg_spark_conf(work / "warehouse"),
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
            }.items():
                command += ["--conf", f"{key}={value}"]
            if options:
                command += ["--conf", f"spark.driver.extraJavaOptions={options}"]
            command += [
                "--jars",
                iceberg_runtime_jar(),
                "--py-files",
                merge_job_py_files(),
                MERGE_JOB_PATH,
                "--manifest",
                manifest,
                "--namespace",
                f"lake.r{number}_{index}",
            ]
            started = time.monotonic()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            seconds = time.monotonic() - started
            if done.returncode != 0:
                print(done.stdout[-3000:], done.stderr[-3000:])
                return 1
            times[name].append(seconds)
            print(f"round {number + 1} {name}: {seconds:.1f} s", flush=True)
    print(f"\n{args.rows}-row window, {args.rounds} rounds (load average now {os.getloadavg()[0]:.1f}):")
    for name, values in times.items():
        print(f"  {name}: median {statistics.median(values):.1f} s ({min(values):.1f}-{max(values):.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
