"""
A Spark standalone cluster on this machine, for tests: one master and one worker from the pyspark install.

Both daemons run ``spark-class`` of the installed pyspark, bound to 127.0.0.1 on ports the system
picks (the web UIs too), with small heaps and a configuration directory of their own (so no
``spark-defaults.conf`` of the machine applies). The context manager stops them, and the executors
the worker started, whatever happens::

    with spark_standalone_cluster(tmp_path / "spark") as cluster:
        env = {"AIRFLOW_CONN_SPARK_CLUSTER": cluster.master_url}   # spark://127.0.0.1:<port>
        CdcSparkMergeOperator(..., conn_id="spark_cluster", conf={**cluster.application_conf(), ...})

Applications reach it in client deploy mode: the driver runs in the spark-submit process, the
executors in processes the worker starts (``work_dir``/``app-*``/``<executor>``: each executor's
working directory, where the files and jars of the application are fetched).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

#: How long a daemon may take to start (JVM start-up on a busy machine).
START_TIMEOUT_SECONDS = 120.0
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_WORKER_REGISTERED = "Successfully registered with master"


class SparkStandaloneError(RuntimeError):
    """A daemon of the standalone cluster did not start."""


@dataclass(frozen=True)
class SparkStandaloneCluster:
    """
    A running master and worker.

    :param master_url: ``spark://127.0.0.1:<port>``, the ``--master`` of spark-submit.
    :param work_dir: the worker's directory: one ``app-*`` directory per application, one directory per
        executor in it.
    :param worker_cores: cores the worker offers.
    :param worker_memory: memory the worker offers, e.g. ``1g``.
    """

    master_url: str
    work_dir: Path
    worker_cores: int
    worker_memory: str

    def application_conf(self, executor_memory: str = "512m") -> dict[str, str]:
        """
        Return the Spark settings that fit an application into this cluster: one executor with every core.

        :param executor_memory: the executor's heap; at most the worker's memory.
        """
        return {
            "spark.executor.memory": executor_memory,
            "spark.executor.cores": str(self.worker_cores),
            "spark.cores.max": str(self.worker_cores),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
        }

    def executor_directories(self) -> list[Path]:
        """Return the working directories of the executors the worker started so far (every application)."""
        return sorted(p for p in self.work_dir.glob("app-*/*") if p.is_dir())


def java_missing() -> str | None:
    """Return why Spark cannot start here (no ``java``), or None when it can."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return None
    if shutil.which("java"):
        return None
    return "no Java runtime: neither $JAVA_HOME/bin/java nor java on PATH (make test installs a JDK)"


def spark_class() -> Path:
    """Return the ``spark-class`` script of the installed pyspark."""
    import pyspark

    script = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
    if not script.is_file():
        raise SparkStandaloneError(f"{script} is missing: is pyspark installed from its wheel?")
    return script


def daemon_environment(conf_dir: Path, daemon_memory: str) -> dict[str, str]:
    """
    Return the environment of a daemon: loopback only, a small heap, an empty configuration directory.

    :param conf_dir: ``SPARK_CONF_DIR`` (no ``spark-defaults.conf`` or ``spark-env.sh`` of the machine).
    :param daemon_memory: ``SPARK_DAEMON_MEMORY``, the heap of the master and of the worker.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(
        {
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": daemon_memory,
            "SPARK_NO_DAEMONIZE": "1",
        }
    )
    return env


@contextmanager
def _daemon(command: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """Run a daemon in a process group of its own, its output in ``log``; stop the group on exit."""
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        yield process
    finally:
        _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes], grace_seconds: float = 15.0) -> None:
    """Stop a daemon and what it started (the worker's executors share its process group)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_seconds)
    try:  # the daemon if it hung, and executors still going down
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait(timeout=10.0)


def _wait_for(log: Path, process: subprocess.Popen[bytes], found: re.Pattern[str] | str, what: str) -> str:
    """Wait until ``log`` shows ``found``; return the matching text; fail naming the log's end otherwise."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        text = log.read_text(errors="replace") if log.exists() else ""
        match = found.search(text) if isinstance(found, re.Pattern) else (found if found in text else None)
        if match:
            return match.group(1) if isinstance(match, re.Match) else match
        if process.poll() is not None or time.monotonic() > deadline:
            state = f"exited with {process.returncode}" if process.poll() is not None else "timed out"
            tail = "\n".join(text.splitlines()[-20:])
            raise SparkStandaloneError(f"the Spark {what} did not start ({state}); the end of {log}:\n{tail}")
        time.sleep(0.25)


@contextmanager
def spark_standalone_cluster(
    directory: Path,
    *,
    worker_cores: int = 2,
    worker_memory: str = "1g",
    daemon_memory: str = "256m",
) -> Iterator[SparkStandaloneCluster]:
    """
    Start a master and a worker on 127.0.0.1; yield the cluster; stop both (and the executors) afterwards.

    :param directory: for the logs (``master.log``, ``worker.log``), the configuration directory and the
        worker's ``work`` directory.
    :param worker_cores: cores the worker offers to applications.
    :param worker_memory: memory the worker offers to executors.
    :param daemon_memory: heap of each daemon.
    :raises SparkStandaloneError: a daemon did not start; the message has the end of its log.
    """
    reason = java_missing()
    if reason:
        raise SparkStandaloneError(reason)
    conf_dir, work_dir = directory / "conf", directory / "work"
    conf_dir.mkdir(parents=True, exist_ok=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    env = daemon_environment(conf_dir, daemon_memory)
    script = str(spark_class())
    loopback = ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
    with ExitStack() as daemons:
        master_log = directory / "master.log"
        master = daemons.enter_context(_daemon([script, MASTER_CLASS, *loopback], master_log, env))
        master_url = _wait_for(master_log, master, _MASTER_URL, "master")
        worker_log = directory / "worker.log"
        worker_options = [
            "--cores",
            str(worker_cores),
            "--memory",
            worker_memory,
            "--work-dir",
            str(work_dir),
        ]
        worker = daemons.enter_context(
            _daemon([script, WORKER_CLASS, *loopback, *worker_options, master_url], worker_log, env)
        )
        _wait_for(worker_log, worker, _WORKER_REGISTERED, "worker")
        yield SparkStandaloneCluster(master_url, work_dir, worker_cores, worker_memory)
