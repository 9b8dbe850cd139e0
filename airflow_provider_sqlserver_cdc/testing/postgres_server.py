"""
A throw-away PostgreSQL cluster for tests, the demo and benchmarks: ``initdb`` into a temporary
directory, a server on a free loopback port, stopped and removed afterwards.

PostgreSQL refuses to run as root: when this process is root, the cluster's files belong to the
system user ``postgres`` (the Debian package creates it; it is created here when missing) and
``initdb`` / ``pg_ctl`` run as that user. Clients log in over TCP as :data:`SUPERUSER` with a
random password (``scram-sha-256``), as a deployment would::

    with PostgresServer.start() as server:
        server.create_database("shop")
        url = server.jdbc_url("shop")          # jdbc:postgresql://127.0.0.1:PORT/shop
        conn = server.connect("shop")          # psycopg (dev extra)

The cluster runs with ``fsync=off``: it is thrown away, and a test must not wait for disks.
The binaries come from the ``postgresql`` Debian package (``make test`` installs it), the JDBC
driver from ``libpostgresql-jdbc-java`` (:func:`postgres_jdbc_jar`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUPERUSER = "cdc"
"""The cluster's superuser, the login clients use."""

SYSTEM_USER = "postgres"
"""The system user the server runs as when this process is root."""

JDBC_JAR_CANDIDATES = ("/usr/share/java/postgresql.jar",)
"""Where ``libpostgresql-jdbc-java`` puts the PostgreSQL JDBC driver."""

JDBC_DRIVER_CLASS = "org.postgresql.Driver"


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries (or the JDBC driver) are not installed."""


def postgres_bin_dir() -> Path:
    """
    Return the directory holding ``initdb`` and ``pg_ctl``: Debian's ``/usr/lib/postgresql/<v>/bin``, or PATH.

    :raises PostgresUnavailable: no PostgreSQL server binaries are installed.
    """
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name or 0), reverse=True
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for directory in candidates:
        if (Path(directory) / "initdb").is_file() and (Path(directory) / "pg_ctl").is_file():
            return Path(directory)
    raise PostgresUnavailable(
        "the PostgreSQL server binaries (initdb, pg_ctl) are not installed: "
        "apt-get install postgresql (make test installs it when run as root)"
    )


def postgres_jdbc_jar() -> str:
    """
    Return the path of the PostgreSQL JDBC driver jar (for ``spark.jars``).

    :raises PostgresUnavailable: ``libpostgresql-jdbc-java`` is not installed.
    """
    for candidate in JDBC_JAR_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    raise PostgresUnavailable(
        "the PostgreSQL JDBC driver is not installed (looked for "
        f"{', '.join(JDBC_JAR_CANDIDATES)}): apt-get install libpostgresql-jdbc-java"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_account() -> pwd.struct_passwd | None:
    """Return the account the server runs as: None for this process's own (not root), else ``postgres``."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SYSTEM_USER,
            ],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(SYSTEM_USER)


@dataclass
class PostgresServer:
    """
    A running throw-away PostgreSQL cluster.

    :param directory: the temporary directory holding the data directory and the log.
    :param port: the loopback TCP port it listens on.
    :param password: :data:`SUPERUSER`'s password.
    """

    directory: Path
    port: int
    password: str
    bin_dir: Path
    host: str = "127.0.0.1"
    user: str = SUPERUSER
    _account: pwd.struct_passwd | None = field(default=None, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @classmethod
    def start(cls, *, timeout_seconds: int = 60) -> PostgresServer:
        """
        Create a cluster in a new temporary directory and start it on a free loopback port.

        :param timeout_seconds: how long ``pg_ctl`` waits for the server to accept connections.
        :raises PostgresUnavailable: the binaries are not installed.
        :raises RuntimeError: initdb or the server failed (the message carries the server log's end).
        """
        bin_dir = postgres_bin_dir()
        account = _server_account()
        directory = Path(tempfile.mkdtemp(prefix="sqlserver-cdc-pg-"))
        server = cls(directory, _free_port(), "pg-" + secrets.token_hex(12), bin_dir, _account=account)
        try:
            if account is not None:
                os.chown(directory, account.pw_uid, account.pw_gid)
            password_file = directory / "pwfile"
            password_file.write_text(server.password + "\n")
            password_file.chmod(0o600)
            if account is not None:
                os.chown(password_file, account.pw_uid, account.pw_gid)
            server._run(
                "initdb",
                "-D",
                str(server.data_dir),
                "-U",
                SUPERUSER,
                f"--pwfile={password_file}",
                "--auth-host=scram-sha-256",
                "--auth-local=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
            password_file.unlink()
            options = " ".join(
                [
                    f"-p {server.port}",
                    f"-c listen_addresses={server.host}",
                    f"-c unix_socket_directories={directory}",
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                    "-c max_connections=50",
                ]
            )
            server._run(
                "pg_ctl", "-D", str(server.data_dir), "-l", str(server.log_file), "-o", options,
                "-w", "-t", str(timeout_seconds), "start",
            )  # fmt: skip
        except BaseException:
            server.stop()
            raise
        return server

    def _run(self, program: str, *arguments: str) -> None:
        account = self._account
        user_options: dict[str, Any] = {}
        if account is not None:
            user_options = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(self.directory)}
        result = subprocess.run(
            [str(self.bin_dir / program), *arguments],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.directory,
            **user_options,
        )
        if result.returncode != 0:
            log = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
            raise RuntimeError(
                f"{program} failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
                + (f"\nserver log:\n{log}" if log else "")
            )

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def jdbc_url(self, database: str = "postgres") -> str:
        """The JDBC URL of ``database`` (no credentials in it)."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{database}"

    def conninfo(self, database: str = "postgres") -> str:
        """A libpq connection string for ``database``, password included (for this process only)."""
        return (
            f"host={self.host} port={self.port} dbname={database} user={self.user} "
            f"password={self.password} connect_timeout=10"
        )

    def connect(self, database: str = "postgres", *, autocommit: bool = True) -> Any:
        """A psycopg connection to ``database`` (psycopg comes with the ``dev`` extra)."""
        import psycopg

        return psycopg.connect(self.conninfo(database), autocommit=autocommit)

    def create_database(self, name: str) -> str:
        """Create an empty database (dropped first if it exists); return its name."""
        with contextlib.closing(self.connect()) as conn:
            quoted = '"' + name.replace('"', '""') + '"'
            conn.execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {quoted}")
        return name

    def airflow_connection(self, database: str) -> str:
        """An Airflow ``postgres`` connection to ``database`` in JSON (the value of ``AIRFLOW_CONN_<ID>``)."""
        import json

        return json.dumps(
            {
                "conn_type": "postgres",
                "host": self.host,
                "port": self.port,
                "login": self.user,
                "password": self.password,
                "schema": database,
            }
        )
