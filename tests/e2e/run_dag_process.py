"""Run one example DAG with ``dag.test()`` in its own process (as a worker would), optionally killed mid-write.

Usage: ``python run_dag_process.py DAGS_FOLDER DAG_ID [--logical-date ISO] [--kill-extract-of CAPTURE_INSTANCE]``:
the child of :func:`~airflow_provider_sqlserver_cdc.testing.dag_runs.run_dag_test` plus one fault. With
``--kill-extract-of`` the process sends itself SIGKILL right after the extract task of that capture
instance has written its first Parquet batch: the part file is left without its footer and the
window has no manifest, as when a worker dies.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from airflow_provider_sqlserver_cdc.testing import dag_runs


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
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--kill-extract-of")
    args, dag_run_args = parser.parse_known_args()
    if args.kill_extract_of:
        kill_after_first_batch(args.kill_extract_of)
    return dag_runs.main(dag_run_args)


if __name__ == "__main__":
    sys.exit(main())
