"""
The SQL Server CDC simulator in a process of its own, as the demo and the benchmarks run it.

``python -m sqlserver_cdc_simulator --port 0`` picks a free port and prints
``READY host:port``; :class:`SimulatorProcess` starts it, waits for that line, and stops it::

    with SimulatorProcess.start("Sim-Pa55word!", "--timezone", "Asia/Kolkata") as simulator:
        connect(host=simulator.host, port=simulator.port, ...)

Tests that want the simulator in their own process (to move its clock) use the pytest plugin's
``sqlserver_simulator`` fixture instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SIMULATOR_MODULE = "sqlserver_cdc_simulator"
PASSWORD_ENV = "SQLSERVER_SIMULATOR_PASSWORD"
"""The environment variable the simulator reads its ``sa`` password from (never the command line)."""


class SimulatorStartError(RuntimeError):
    """The simulator process exited before printing ``READY host:port``."""


@dataclass
class SimulatorProcess:
    """
    A running simulator process and the address it serves on.

    :param process: the simulator process (stdout is the pipe its ``READY`` line came through).
    :param host: the address it listens on.
    :param port: the TCP port it picked.
    :param password: the ``sa`` password it was given.
    """

    process: subprocess.Popen[str]
    host: str
    port: int
    password: str
    user: str = "sa"

    @classmethod
    def start(cls, password: str, *options: str, stderr: IO[str] | Path | None = None) -> SimulatorProcess:
        """
        Start the simulator on a free port and wait until it accepts connections.

        :param password: the ``sa`` password, passed through the environment, not argv.
        :param options: further command-line options, e.g. ``"--timezone", "Asia/Kolkata"``.
        :param stderr: where the simulator's log goes: an open file, a path to write, or (None)
            this process's stderr.
        :raises SimulatorStartError: the process ended without printing ``READY``.
        """
        log_file = stderr.open("w") if isinstance(stderr, Path) else stderr
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", SIMULATOR_MODULE, "--port", "0", *options],
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
                env={**os.environ, PASSWORD_ENV: password},
            )
        finally:
            if isinstance(stderr, Path) and log_file is not None:
                log_file.close()  # the child holds its own descriptor
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("READY "):
                host, _, port = line.split()[1].rpartition(":")
                return cls(process, host, int(port), password)
        process.wait()
        where = f"; see {stderr}" if isinstance(stderr, Path) else ""
        raise SimulatorStartError(
            f"the simulator exited ({process.returncode}) without printing READY{where}"
        )

    @property
    def pid(self) -> int:
        """The simulator's process id (to read its CPU time)."""
        return self.process.pid

    def stop(self, timeout: float = 30) -> None:
        """Stop the simulator: SIGTERM (it writes its durable state), SIGKILL after ``timeout`` s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            with contextlib.suppress(OSError):
                self.process.stdout.close()

    def __enter__(self) -> SimulatorProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
