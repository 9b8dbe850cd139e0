"""The continuous apply application in a child process (spark-submit, local master), for tests, the demo and benchmarks.

::

    app = ApplyApplication.start(staging, "lake.cdc", conf, jars, log_path=tmp / "apply.log")
    app.wait_for_log("holding ")        # it holds the staging path's lock
    ...
    app.stop()                          # SIGTERM to its process group: it finishes its poll, releases the lock

The process runs in a session of its own, so ``kill()`` (SIGKILL, as an OOM killer would) ends the
spark-submit JVM and the Python driver together.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from airflow_provider_sqlserver_cdc.spark import CONTINUOUS_APPLY_JOB_PATH, merge_job_py_files


def spark_submit_command(
    staging: str,
    namespace: str,
    conf: Mapping[str, str],
    jars: str,
    *,
    master: str = "local[2]",
    poll_seconds: float = 1.0,
    driver_memory: str = "1g",
    arguments: Sequence[str] = (),
) -> list[str]:
    """Return the spark-submit command line of the continuous apply application.

    :param staging: the staging path it applies.
    :param namespace: ``catalog.namespace`` of the target tables.
    :param conf: Spark settings (the Iceberg catalog...).
    :param jars: the Iceberg runtime jar (comma-separated jars).
    :param master: the Spark master.
    :param poll_seconds: seconds between polls.
    :param driver_memory: the driver's heap.
    :param arguments: further arguments of the job (merge job options).
    """
    command = ["spark-submit", "--master", master, "--driver-memory", driver_memory]
    for key, value in {"spark.ui.enabled": "false", **conf}.items():
        command += ["--conf", f"{key}={value}"]
    command += ["--jars", jars, "--py-files", merge_job_py_files(), CONTINUOUS_APPLY_JOB_PATH]
    return [
        *command,
        "--staging-path",
        staging,
        "--namespace",
        namespace,
        "--poll-seconds",
        str(poll_seconds),
        *arguments,
    ]


@dataclass
class ApplyApplication:
    """A running continuous apply application and its log file."""

    process: subprocess.Popen[Any]
    log_path: Path
    _log: IO[Any]

    @classmethod
    def start(
        cls,
        staging: str,
        namespace: str,
        conf: Mapping[str, str],
        jars: str,
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> ApplyApplication:
        """Start the application (``spark_submit_command``'s options); its output goes to ``log_path``."""
        bin_dir = str(Path(sys.executable).parent)
        environment = dict(env if env is not None else os.environ)
        environment["PATH"] = bin_dir + os.pathsep + environment.get("PATH", "")
        environment["PYSPARK_PYTHON"] = sys.executable
        log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        process = subprocess.Popen(
            spark_submit_command(staging, namespace, conf, jars, **options),
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return cls(process, log_path, log)

    @classmethod
    def for_settings(
        cls, settings: Any, *, log_path: Path, env: Mapping[str, str], **options: Any
    ) -> ApplyApplication:
        """:meth:`start` on a DAG's ``ReplicationSettings``: its staging path, namespace, Spark conf and jars."""
        return cls.start(
            settings.staging_path,
            settings.merge.namespace,
            dict(settings.spark.conf),
            settings.spark.jars,
            log_path=log_path,
            env=env,
            **options,
        )

    def log_text(self) -> str:
        """Return what the application logged so far."""
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 300.0) -> None:
        """Wait until the log contains ``text``; raise if the process ends or the time runs out first."""
        deadline = time.monotonic() + timeout
        while text not in self.log_text():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the apply application exited ({self.process.returncode}) before logging {text!r}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"the apply application did not log {text!r} within {timeout:.0f} s")
            time.sleep(0.2)

    def driver_pids(self) -> list[int]:
        """Return the process ids of the Python driver (spark-submit's child running the job) in its group."""
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                command = (stat.parent / "cmdline").read_bytes()
            except (OSError, IndexError):
                continue
            if (
                int(fields[2]) == self.process.pid
                and b"continuous_apply_job.py" in command
                and b"java" not in command
            ):
                pids.append(int(stat.parent.name))
        return pids

    def stop(self, timeout: float = 120.0) -> int:
        """Ask it to stop and wait; return its exit code (0 after a clean stop).

        SIGTERM goes to the Python driver, which finishes its poll, releases the lock and stops Spark;
        spark-submit then exits with the driver's code. Without a driver yet, the whole group gets it.
        """
        if self.process.poll() is None:
            drivers = self.driver_pids()
            for pid in drivers:
                os.kill(pid, signal.SIGTERM)
            if not drivers:
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return int(self.process.returncode)

    def kill(self) -> None:
        """Kill it at once (SIGKILL to its process group), as an out-of-memory killer would."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._log.close()
