"""Run one example DAG with ``dag.test()`` in its own process (as a worker would), optionally killed mid-write.

Usage: ``python run_dag_process.py DAG_ID LOGICAL_DATE [--kill-extract-of CAPTURE_INSTANCE]``.
Prints ``DAG_RUN_STATE=<state>``. With ``--kill-extract-of`` the process sends itself SIGKILL
right after the extract task of that capture instance has written its first Parquet batch: the
part file is left without its footer and the window has no manifest, as when a worker dies.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
from pathlib import Path

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"


def kill_after_first_batch(capture_instance: str) -> None:
    """Make the window writer of ``capture_instance`` kill this process after its first batch."""
    from airflow_provider_sqlserver_cdc.parquet import window_writer

    original = window_writer.ParquetWindowWriter.write_batch

    def write_then_die(self, batch, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = original(self, batch, *args, **kwargs)
        if f"/{capture_instance}/" in self.window_dir:
            print(f"KILLING extract of {capture_instance} mid-write", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    window_writer.ParquetWindowWriter.write_batch = write_then_die  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dag_id")
    parser.add_argument("logical_date")
    parser.add_argument("--kill-extract-of")
    args = parser.parse_args()
    sys.path.insert(0, str(DAGS_FOLDER))
    if args.kill_extract_of:
        kill_after_first_batch(args.kill_extract_of)
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=str(DAGS_FOLDER), bundle_path=DAGS_FOLDER)
    if bag.import_errors:
        print(f"IMPORT_ERRORS={bag.import_errors}", flush=True)
        return 2
    run = bag.dags[args.dag_id].test(logical_date=dt.datetime.fromisoformat(args.logical_date))
    print(
        f"DATA_INTERVAL={run.data_interval_start.isoformat()}/{run.data_interval_end.isoformat()}", flush=True
    )
    print(f"DAG_RUN_STATE={run.state}", flush=True)
    return 0 if run.state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
