"""
Run a DAG once with ``dag.test()`` in a process of its own, against an isolated Airflow home.

``dag.test()`` runs every task of one DAG run in the calling process, with a real metadata DB,
XComs and Variables: the closest a test gets to a worker without a scheduler. Running it in a
child process keeps the DAG's imports, Spark sessions and signal handling out of the test
process, and lets a test kill a run midway. Airflow 3 only runs DAGs found in
``AIRFLOW__CORE__DAGS_FOLDER``, so the child loads the DAG from the folder it is given::

    env = {**os.environ, **airflow_home_environment(tmp_path / "airflow", dags_folder=dags)}
    migrate_metadata_db(env)
    run = run_dag_test("my_dag", dags_folder=dags, env=env, logical_date=interval_end)
    assert run.state == "success", run.output[-4000:]

The child is ``python -m airflow_provider_sqlserver_cdc.testing.dag_runs DAGS_FOLDER DAG_ID
[--logical-date ISO] [--run-conf JSON]``; it prints ``TASK_STATE=<task id>[<map index>]=<state>``
per task instance, ``DATA_INTERVAL=<start>/<end>`` and ``DAG_RUN_STATE=<state>``, and exits 0 only
when the run succeeded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_PREFIX = "DAG_RUN_STATE="
INTERVAL_PREFIX = "DATA_INTERVAL="
TASK_STATE_PREFIX = "TASK_STATE="


def airflow_home_environment(home: Path, *, dags_folder: Path | None = None) -> dict[str, str]:
    """
    Return the settings of an Airflow home of its own: config, SQLite metadata DB and logs under ``home``.

    :param home: the directory for AIRFLOW_HOME (``airflow.db`` goes there).
    :param dags_folder: the DAGs folder, when the environment should name one.
    """
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    if dags_folder is not None:
        env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags_folder)
    return env


def interpreter_environment() -> dict[str, str]:
    """
    Return PATH and PYSPARK_PYTHON set so that child processes run this interpreter.

    spark-submit from the pyspark wheel starts the first ``python3`` on PATH: it must be this
    interpreter (the one with the provider installed), as must Spark's Python workers.
    """
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if not path.startswith(bin_dir):
        path = bin_dir + os.pathsep + path
    return {"PATH": path, "PYSPARK_PYTHON": sys.executable}


def migrate_metadata_db(env: Mapping[str, str]) -> None:
    """
    Create or upgrade the metadata DB of the Airflow home that ``env`` names (``airflow db migrate``).

    :param env: the environment of the Airflow home, see :func:`airflow_home_environment`.
    :raises RuntimeError: the migration failed (its output is in the message).
    """
    completed = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{completed.stdout}\n{completed.stderr}")


@dataclass
class DagTestRun:
    """
    What one ``dag.test()`` process reported.

    :param state: the DAG run's final state (``success``, ``failed``), None when the process died first.
    :param data_interval: ``<start>/<end>`` in ISO 8601, None when not reported.
    :param output: everything the process wrote (stdout and stderr).
    :param returncode: the process's exit status.
    :param task_states: the final state of each task instance, by task id (``task[i]`` for map index ``i``).
    """

    state: str | None
    data_interval: str | None
    output: str
    returncode: int
    task_states: dict[str, str] = field(default_factory=dict)


def run_dag_test(
    dag_id: str,
    *,
    dags_folder: Path,
    env: Mapping[str, str] | None = None,
    logical_date: dt.datetime | str | None = None,
    run_conf: Mapping[str, Any] | None = None,
    log_path: Path | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
    runner: Sequence[str] = (sys.executable, "-m", __name__),
    runner_args: Sequence[str] = (),
) -> DagTestRun:
    """
    Run ``dag_id`` of ``dags_folder`` once with ``dag.test()`` in a child process; return its report.

    :param dag_id: the DAG to run.
    :param dags_folder: the folder the DAG file is in (it becomes ``AIRFLOW__CORE__DAGS_FOLDER``).
    :param env: the child's environment (default: this process's).
    :param logical_date: the run's logical date (default: now, as ``dag.test()`` picks).
    :param run_conf: the run's ``conf``.
    :param log_path: a file the child's output streams into, as it runs.
    :param cwd: the child's working directory.
    :param timeout: seconds before the child is killed (``subprocess.TimeoutExpired``).
    :param runner: the command that runs the child (a script that ends in :func:`main` may add
        what a test needs, e.g. a fault).
    :param runner_args: further arguments for ``runner``.
    """
    command = [*runner, str(dags_folder), dag_id, *runner_args]
    if logical_date is not None:
        date = logical_date if isinstance(logical_date, str) else logical_date.isoformat()
        command += ["--logical-date", date]
    if run_conf is not None:
        command += ["--run-conf", json.dumps(run_conf)]
    child_env = {**(os.environ if env is None else env), "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder)}
    if log_path is None:
        completed = subprocess.run(
            command, env=child_env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
        output = completed.stdout + completed.stderr
        reported = completed.stdout
    else:
        with log_path.open("w") as log:
            completed = subprocess.run(
                command,
                env=child_env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        output = reported = log_path.read_text(errors="replace")
    lines = reported.splitlines()
    values = dict(line.split("=", 1) for line in lines if line.startswith((STATE_PREFIX, INTERVAL_PREFIX)))
    task_states = dict(
        line.removeprefix(TASK_STATE_PREFIX).rsplit("=", 1)
        for line in lines
        if line.startswith(TASK_STATE_PREFIX)
    )
    return DagTestRun(
        values.get(STATE_PREFIX[:-1]),
        values.get(INTERVAL_PREFIX[:-1]),
        output,
        completed.returncode,
        task_states,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """
    Run one DAG with ``dag.test()`` in this process and print its interval and state (the child's side).

    :param argv: ``DAGS_FOLDER DAG_ID [--logical-date ISO] [--run-conf JSON]`` (default: ``sys.argv``).
    """
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=main.__doc__)
    parser.add_argument("dags_folder", type=Path)
    parser.add_argument("dag_id")
    parser.add_argument("--logical-date", type=dt.datetime.fromisoformat)
    parser.add_argument("--run-conf", type=json.loads)
    args = parser.parse_args(argv)
    # The DAG files import their siblings, as they do in a deployment's DAGs folder.
    sys.path.insert(0, str(args.dags_folder))
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=str(args.dags_folder), bundle_path=args.dags_folder)
    if bag.import_errors:
        print(f"IMPORT_ERRORS={bag.import_errors}", flush=True)
        return 2
    options: dict[str, Any] = {}
    if args.logical_date is not None:
        options["logical_date"] = args.logical_date
    if args.run_conf is not None:
        options["run_conf"] = args.run_conf
    run = bag.dags[args.dag_id].test(**options)
    for ti in run.get_task_instances():
        task = ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"
        print(f"{TASK_STATE_PREFIX}{task}={ti.state}", flush=True)
    if run.data_interval_start is not None and run.data_interval_end is not None:
        interval = f"{run.data_interval_start.isoformat()}/{run.data_interval_end.isoformat()}"
        print(INTERVAL_PREFIX + interval, flush=True)
    print(f"{STATE_PREFIX}{run.state}", flush=True)
    return 0 if run.state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
