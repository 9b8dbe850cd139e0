"""An Airflow connection to a relational target database: the JDBC URL for the merge job and its login.

The URL names host, port and database only; the login goes to the job in a private file
(:func:`write_login_file`: mode 600 in a directory only this user may enter, removed afterwards) whose
path the job gets with ``--jdbc-credentials-file``: never in spark-submit's arguments or
environment, logs or XCom.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import check_jdbc_url

POSTGRES_CONN_TYPES = ("postgres", "postgresql")
#: Connection extras passed on as parameters of the PostgreSQL JDBC URL (none of them secret).
POSTGRES_URL_EXTRAS = ("sslmode", "sslrootcert", "ApplicationName", "connectTimeout", "options")


@dataclass(frozen=True)
class JdbcTarget:
    """Where the merge job writes: the JDBC URL (no credentials) and the login, kept out of ``repr``."""

    url: str
    user: str
    password: str = field(repr=False)

    def file_text(self) -> str:
        """The content of the job's credentials file: ``user=`` and ``password=`` lines."""
        if any(value.splitlines() != ([value] if value else []) for value in (self.user, self.password)):
            raise ValueError(
                "the target database's login has a line break, which a credentials file cannot hold"
            )
        return f"user={self.user}\npassword={self.password}\n"


#: Prefix of the private directories that hold a login file while the merge job runs:
#: ``{prefix}{host}-{pid}-{random}``, the host and process of the task that wrote it.
LOGIN_DIRECTORY_PREFIX = "sqlserver-cdc-jdbc-login-"


def write_login_file(target: JdbcTarget) -> Path:
    """Write the target's login to a new file (mode 600) in a new directory (mode 700); return the file.

    Remove it with :func:`remove_login_file`. The directory is under the temporary directory of this
    machine: the Spark driver reads it in client deploy mode only.

    :param target: the JDBC target whose login the file holds.
    """
    remove_stale_login_files()
    directory = Path(tempfile.mkdtemp(prefix=f"{_login_directory_stem()}{os.getpid()}-"))  # mode 700
    path = directory / "login"
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(target.file_text())
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return path


def _login_directory_stem() -> str:
    return LOGIN_DIRECTORY_PREFIX + re.sub(r"[^A-Za-z0-9.]+", "_", socket.gethostname()) + "-"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_login_files() -> list[Path]:
    """Remove the login directories that tasks of this host left when killed outright (SIGKILL); return them.

    A directory counts as stale when its process (in its name) is gone: a task removes its own
    when spark-submit ends, fails or is killed with SIGTERM (``on_kill``).
    """
    stem = _login_directory_stem()
    removed = []
    for directory in Path(tempfile.gettempdir()).glob(f"{stem}*"):  # the stem holds no pattern characters
        pid = directory.name[len(stem) :].split("-", 1)[0]
        if not pid.isdigit() or _process_exists(int(pid)):
            continue
        if directory.is_dir() and directory.stat().st_uid == os.getuid():
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def remove_login_file(path: Path | str | None) -> None:
    """Remove a file :func:`write_login_file` wrote, and its directory; nothing when it is gone already."""
    if path is not None:
        shutil.rmtree(Path(path).parent, ignore_errors=True)


def jdbc_target_from_connection(conn_id: str, connection: Any) -> JdbcTarget:
    """Build the JDBC target from an Airflow connection of type ``postgres`` (or ``jdbc``, whose host is the URL).

    :param conn_id: the connection id, for messages.
    :param connection: the Airflow ``Connection``.
    """
    conn_type = (connection.conn_type or "").lower()
    extra: Mapping[str, Any] = connection.extra_dejson or {}
    if conn_type in POSTGRES_CONN_TYPES:
        if not connection.host or not connection.schema:
            raise ValueError(
                f"connection {conn_id!r}: a PostgreSQL target needs host and schema (the database name)"
            )
        parameters = {k: str(extra[k]) for k in POSTGRES_URL_EXTRAS if k in extra}
        url = f"jdbc:postgresql://{connection.host}:{connection.port or 5432}/{quote(connection.schema, safe='')}"
        if parameters:
            url += "?" + urlencode(parameters)
    elif conn_type == "jdbc":
        url = str(connection.host or "")
    else:
        raise ValueError(
            f"connection {conn_id!r} is of type {conn_type!r}: the relational target takes a 'postgres' connection "
            "(or 'jdbc' with the URL as host)"
        )
    try:
        check_jdbc_url(url)
    except Exception as err:
        raise ValueError(f"connection {conn_id!r}: {err}") from None
    if not connection.login:
        raise ValueError(f"connection {conn_id!r} has no login for the target database")
    return JdbcTarget(url, connection.login, connection.password or "")
