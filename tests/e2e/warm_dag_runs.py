"""DAG runs forked from a warm process instead of started cold: the same runs, about 6 s sooner each.

A cold ``run_dag_process.py`` spends about 6 s of every run before its first task does anything:
importing Airflow and the provider, and building ``dag.test()``'s in-process execution API. The
warm server (``run_dag_process.py --serve``, one per test process, started on first use) does
that once and forks a process per run. This file is both sides of it:

- :class:`WarmDagRunner` (the test process) starts the server and gives the ``runner`` command
  for :func:`~airflow_provider_sqlserver_cdc.testing.dag_runs.run_dag_test`;
- run as a script, ``python warm_dag_runs.py SOCKET ARGS...`` is that command: it hands the
  server its arguments, environment, working directory and its stdout/stderr (so the run writes
  to the log file ``run_dag_test`` gave it), waits, and exits as the run did, killed by the same
  signal when it was killed. Killing this client (a ``run_dag_test`` timeout) kills the run.

Airflow and its providers read some settings once, when imported or first asked (the metadata DB,
the DAGs folder, OpenLineage's transport): a run is forked only when its Airflow settings
(``AIRFLOW__*``, and :data:`IMPORT_TIME_SETTINGS`) are the server's, else it runs cold. The Fernet
key, which each test draws, is the exception: the forked run reads its own.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "run_dag_process.py"
IMPORT_TIME_SETTINGS = (
    "AIRFLOW_HOME",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    "AIRFLOW__CORE__DAGS_FOLDER",
    "AIRFLOW__CORE__UNIT_TEST_MODE",
    "PYTHONPATH",
)
STARTUP_TIMEOUT = 120
FERNET_KEY = "AIRFLOW__CORE__FERNET_KEY"  # the forked run clears Airflow's cached Fernet


class WarmDagRunner:
    """The warm server of this test process: started by the first DAG run, ends with the process (its stdin closes)."""

    _instance: WarmDagRunner | None = None

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.directory = tempfile.mkdtemp(prefix="warm-dag-runs-")
        self.socket = os.path.join(self.directory, "server.sock")
        self.log = Path(self.directory) / "server.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(RUNNER), "--serve", self.socket],
                env=self.env,
                cwd=self.directory,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.ready = False
        atexit.register(self.close)

    def wait_until_ready(self) -> None:
        """Wait until the server has warmed up (started, it imports Airflow in the background)."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self.ready:
            self.ready = b"\nREADY\n" in b"\n" + self.log.read_bytes()
            if not self.ready and (self.process.poll() is not None or time.monotonic() > deadline):
                self.close()
                raise RuntimeError(f"the warm DAG-run server did not start:\n{self.log.read_text()[-4000:]}")
            time.sleep(0 if self.ready else 0.1)

    @classmethod
    def shared(cls, env: Mapping[str, str]) -> WarmDagRunner:
        """This process's server (started with ``env`` when there is none yet)."""
        if cls._instance is None or cls._instance.process.poll() is not None:
            cls._instance = cls(env)
        return cls._instance

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a run with ``env`` may be forked from this server (its Airflow settings are the server's)."""
        names = {n for n in {*env, *self.env} if n.startswith("AIRFLOW__")} - {FERNET_KEY}
        return all(env.get(name) == self.env.get(name) for name in names.union(IMPORT_TIME_SETTINGS))

    @property
    def runner(self) -> tuple[str, ...]:
        """The ``runner`` command of ``run_dag_test`` that runs through this server (once it is ready)."""
        self.wait_until_ready()
        return (sys.executable, __file__, self.socket)

    def close(self) -> None:
        """Stop the server (runs still going are not touched)."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def client(socket_path: str, argv: list[str]) -> int:
    """Run ``argv`` (run_dag_process.py's arguments) through the server; return or die as the run did."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(socket_path)
        request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
        socket.send_fds(conn, [len(request).to_bytes(8, "big") + request], [1, 2])
        answer = b""
        while chunk := conn.recv(64):
            answer += chunk
    code = int(answer)
    if code < 0:
        if code != -signal.SIGKILL:  # SIGKILL has no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(client(sys.argv[1], sys.argv[2:]))
