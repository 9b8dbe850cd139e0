"""
A small real Airflow 3 deployment for one test: its own metadata DB, dag-processor, scheduler, execution API.

What ``airflow standalone`` runs, minus the UI and the triggerer: ``airflow dag-processor``
parses the DAGs folder into the metadata DB, ``airflow scheduler`` (LocalExecutor) creates task
instances and hands them to its local workers, and the workers run each task through the Task
SDK against ``airflow api-server --apps execution``. Each component is a subprocess in its own
process group, logging to a file under the deployment's home; ``stop()`` signals each group
(SIGTERM, then SIGKILL after a grace period).

The deployment has its own AIRFLOW_HOME and SQLite metadata DB, so it never runs a DAG run that
another test left queued or running in the suite's shared DB. The scheduler does not create
runs from schedules (``[scheduler] use_job_schedule = False``): runs come from the test
(``create_scheduled_run.py``) and from ``airflow backfill create``.

The test process reads the metadata DB with ``sqlite3`` (read-only; it writes only to remove a
partial backfill, see ``create_backfill``) rather than through Airflow's ORM, which is bound to the
suite's DB.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_sqlserver_cdc.testing.dag_runs import airflow_home_environment

HERE = Path(__file__).resolve().parent
CREATE_SCHEDULED_RUN = HERE / "create_scheduled_run.py"
FINISHED_RUN_STATES = ("success", "failed")


class DeploymentError(AssertionError):
    """A component died or a wait timed out; the message carries the components' logs."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def db_time(value: dt.datetime) -> str:
    """A datetime as Airflow stores it in SQLite (naive UTC, microseconds)."""
    return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


@dataclass
class AirflowDeployment:
    """
    Airflow's metadata DB, dag-processor, scheduler and execution API server, started for one test.

    :param home: an empty directory for AIRFLOW_HOME (airflow.cfg, airflow.db, logs).
    :param base_env: the environment the DAG needs (connections, settings, Fernet key, PATH).
    :param parallelism: LocalExecutor worker processes (the machine is small).
    """

    home: Path
    base_env: dict[str, str]
    parallelism: int = 3
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(init=False)
    db_path: Path = field(init=False)  # the deployment's SQLite metadata DB
    log_dir: Path = field(init=False)  # the components' own output (task logs are under ``logs/``)
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.db_path, self.log_dir = self.home / "airflow.db", self.home / "components"
        self.env = {
            **self.base_env,
            **airflow_home_environment(self.home),
            # A deployment, not the unit-test configuration the rest of the suite runs under.
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            # Scheduler, dag-processor, API server, task workers and the test's CLI commands write to one
            # SQLite file: wait up to 30 s for another writer's lock (pysqlite's default is 5 s; under a loaded
            # CI machine `airflow backfill create` failed with "database is locked" after its backfill row
            # was committed, so it cannot simply be run again).
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.db_path}?timeout=30",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.port}/execution/",
            # The scheduler signs each task's token; the API server checks it: one shared secret.
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            # The scheduler serves task logs on this port (default 8793): one per deployment.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
        }
        self.env.pop("AIRFLOW_CONFIG", None)

    # ----------------------------------------------------------------- life cycle

    def python(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run this interpreter with ``args`` in the deployment's environment; capture its output."""
        return subprocess.run(
            [sys.executable, *args],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def airflow(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run one ``airflow`` CLI command in the deployment's environment."""
        return self.python("-m", "airflow", *args, timeout=timeout)

    def create_backfill(
        self, dag_id: str, from_date: dt.datetime, to_date: dt.datetime, *options: str, attempts: int = 3
    ) -> subprocess.CompletedProcess[str]:
        """
        ``airflow backfill create`` of ``dag_id`` from ``from_date`` to ``to_date``, re-running completed runs.

        SQLite answers a lock upgrade that conflicts with another writer (here the scheduler) with
        "database is locked" at once, whatever the busy timeout. The command has then committed its
        backfill row but not its runs; Airflow removes such a partial backfill itself only on PostgreSQL
        and MySQL (``airflow.models.backfill._cleanup_partial_backfill``), so on that error this removes
        it the same way and runs the command again, as an operator would.
        """
        known = {row["id"] for row in self.query("SELECT id FROM backfill WHERE dag_id = ?", dag_id)}
        for attempt in range(1, attempts + 1):
            created = self.airflow(
                "backfill",
                "create",
                "--dag-id",
                dag_id,
                "--from-date",
                from_date.isoformat(),
                "--to-date",
                to_date.isoformat(),
                "--reprocess-behavior",
                "completed",
                *options,
            )
            if (
                created.returncode == 0
                or "database is locked" not in created.stdout + created.stderr
                or attempt == attempts
            ):
                return created
            self._remove_partial_backfills(dag_id, known)
        raise AssertionError("unreachable")

    def _remove_partial_backfills(self, dag_id: str, known: set[int]) -> None:
        """Delete the backfills of ``dag_id`` not in ``known`` with their runs (what Airflow's cleanup deletes)."""
        with contextlib.closing(sqlite3.connect(self.db_path, timeout=60)) as db, db:
            db.execute("PRAGMA foreign_keys = ON")
            for (backfill_id,) in db.execute(
                "SELECT id FROM backfill WHERE dag_id = ?", (dag_id,)
            ).fetchall():
                if backfill_id in known:
                    continue
                db.execute("DELETE FROM backfill_dag_run WHERE backfill_id = ?", (backfill_id,))
                db.execute("DELETE FROM dag_run WHERE backfill_id = ?", (backfill_id,))
                db.execute("DELETE FROM backfill WHERE id = ?", (backfill_id,))

    def start(self) -> None:
        """Migrate the DB and start the three components (``wait_until_ready`` waits for them)."""
        migrated = self.airflow("db", "migrate")
        if migrated.returncode != 0:
            raise DeploymentError(f"airflow db migrate failed:\n{migrated.stdout}\n{migrated.stderr}")
        self.log_dir.mkdir(exist_ok=True)
        self._spawn(
            "api-server",
            ["api-server", "--apps", "execution", "-H", "127.0.0.1", "-p", str(self.port), "-w", "1"],
        )
        self._spawn("dag-processor", ["dag-processor"])
        self._spawn("scheduler", ["scheduler"])

    def wait_until_ready(self, dag_id: str, timeout: float = 120) -> None:
        """Wait until the execution API answers and the dag-processor has stored ``dag_id``, unpaused."""
        self.wait_for(self._api_is_up, "the execution API to answer", timeout)
        self.wait_for(lambda: self.dag_is_parsed(dag_id), f"the dag-processor to store {dag_id}", timeout)

    def stop(self, grace: float = 30) -> None:
        """Stop the components (scheduler first): SIGTERM to each process group, SIGKILL after ``grace`` s."""
        for name in ("scheduler", "dag-processor", "api-server"):
            process = self._processes.get(name)
            if process is None or process.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        # Workers of the LocalExecutor and spark-submit children live in the scheduler's group.
        for process in self._processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

    @contextlib.contextmanager
    def running(self) -> Iterator[AirflowDeployment]:
        """Start the deployment for the ``with`` block and stop it afterwards, whatever happens."""
        try:
            self.start()
            yield self
        finally:
            self.stop()

    def _spawn(self, name: str, args: list[str]) -> None:
        with (self.log_dir / f"{name}.log").open("wb") as log:
            self._processes[name] = subprocess.Popen(
                [sys.executable, "-m", "airflow", *args],
                env=self.env,
                cwd=self.home,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() signals it with its children
            )

    def _api_is_up(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/execution/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_for(self, condition: Any, what: str, timeout: float, poll: float = 1.0) -> Any:
        """Poll ``condition()`` until it returns something truthy; fail with the logs when a component dies."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            dead = {n: p.returncode for n, p in self._processes.items() if p.poll() is not None}
            if dead:
                raise DeploymentError(f"waiting for {what}: {dead} exited\n{self.diagnostics()}")
            if time.monotonic() > deadline:
                raise DeploymentError(
                    f"timed out after {timeout:.0f} s waiting for {what}\n{self.diagnostics()}"
                )
            time.sleep(poll)

    # ----------------------------------------------------------------- the metadata DB (read-only)

    def query(self, sql: str, *params: Any) -> list[sqlite3.Row]:
        """Run one read-only query on the metadata DB."""
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30)
        try:
            conn.row_factory = sqlite3.Row
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def dag_is_parsed(self, dag_id: str) -> bool:
        """Whether the dag-processor has serialized ``dag_id`` (and it is active, unpaused)."""
        if not self.db_path.exists():
            return False
        try:
            rows = self.query(
                "SELECT d.is_paused, d.is_stale FROM dag d JOIN serialized_dag s ON s.dag_id = d.dag_id "
                "WHERE d.dag_id = ?",
                dag_id,
            )
        except sqlite3.OperationalError:
            return False
        return any(not r["is_paused"] and not r["is_stale"] for r in rows)

    def create_scheduled_runs(self, dag_id: str, interval_starts: list[dt.datetime]) -> list[str]:
        """Create the scheduled runs of the intervals starting at ``interval_starts``; return their run ids."""
        completed = self.python(str(CREATE_SCHEDULED_RUN), dag_id, *(s.isoformat() for s in interval_starts))
        run_ids = [
            line.split("=", 1)[1] for line in completed.stdout.splitlines() if line.startswith("RUN_ID=")
        ]
        if completed.returncode != 0 or len(run_ids) != len(interval_starts):
            raise DeploymentError(f"could not create the runs:\n{completed.stdout}\n{completed.stderr}")
        return run_ids

    def dag_runs(self, dag_id: str) -> dict[str, sqlite3.Row]:
        """Every run of ``dag_id`` by run id."""
        return {r["run_id"]: r for r in self.query("SELECT * FROM dag_run WHERE dag_id = ?", dag_id)}

    def wait_for_runs(self, dag_id: str, run_ids: list[str], timeout: float) -> dict[str, sqlite3.Row]:
        """Wait until each of ``run_ids`` has finished (success or failed); return them."""

        def finished() -> dict[str, sqlite3.Row] | None:
            runs = self.dag_runs(dag_id)
            if all(r in runs and runs[r]["state"] in FINISHED_RUN_STATES for r in run_ids):
                return {r: runs[r] for r in run_ids}
            return None

        return self.wait_for(finished, f"runs {run_ids} of {dag_id} to finish", timeout, poll=2.0)

    def task_instances(self, dag_id: str, run_id: str) -> list[sqlite3.Row]:
        """The task instances of one run."""
        return self.query(
            "SELECT * FROM task_instance WHERE dag_id = ? AND run_id = ? ORDER BY task_id, map_index",
            dag_id,
            run_id,
        )

    def xcoms(self, dag_id: str, run_id: str, task_id: str) -> dict[int, Any]:
        """The ``return_value`` XComs of one task of one run, by map index (JSON-decoded)."""
        rows = self.query(
            "SELECT map_index, value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? "
            "AND key = 'return_value'",
            dag_id,
            run_id,
            task_id,
        )
        return {r["map_index"]: json.loads(r["value"]) for r in rows}

    def variable(self, key: str, fernet_key: str) -> str | None:
        """An Airflow Variable's value (decrypted with the deployment's Fernet key)."""
        rows = self.query("SELECT val, is_encrypted FROM variable WHERE key = ?", key)
        if not rows:
            return None
        value, encrypted = rows[0]["val"], rows[0]["is_encrypted"]
        if encrypted:
            from cryptography.fernet import Fernet

            value = Fernet(fernet_key.encode()).decrypt(value.encode()).decode()
        return value

    # ----------------------------------------------------------------- what to show when it fails

    def diagnostics(self, chars: int = 6000) -> str:
        """The tails of the components' logs and of every failed task's log."""
        parts = []
        for name in ("scheduler", "dag-processor", "api-server"):
            path = self.log_dir / f"{name}.log"
            if path.exists():
                parts.append(f"===== {name} log (tail) =====\n{path.read_text(errors='replace')[-chars:]}")
        with contextlib.suppress(sqlite3.Error):
            failed = self.query(
                "SELECT dag_id, run_id, task_id, map_index, try_number, state FROM task_instance "
                "WHERE state IN ('failed', 'up_for_retry', 'upstream_failed')"
            )
            for ti in failed[:5]:
                parts.append(f"===== task {dict(ti)} =====\n{self.task_log(ti, chars)}")
        return "\n".join(parts)

    def task_log(self, ti: sqlite3.Row, chars: int = 6000) -> str:
        """The log of a task instance's last try (as written by its worker), or a note that there is none."""
        base = (
            self.home
            / "logs"
            / f"dag_id={ti['dag_id']}"
            / f"run_id={ti['run_id']}"
            / f"task_id={ti['task_id']}"
        )
        if ti["map_index"] >= 0:
            base = base / f"map_index={ti['map_index']}"
        logs = sorted(base.glob("attempt=*.log"))
        if not logs:
            return f"(no log under {base})"
        return logs[-1].read_text(errors="replace")[-chars:]
