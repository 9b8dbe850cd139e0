"""JDBC from the merge job's driver: where the credentials come from, and a connection through the Spark JVM.

Credentials never travel on the command line. The job reads them from its own environment
(:data:`USER_ENV`, :data:`PASSWORD_ENV`: the environment of the spark-submit process, which *is*
the driver in client deploy mode) or from a file given by path that only its owner may read
(``user=...`` and ``password=...`` lines). The JDBC URL must not carry them either.

The driver's connection is opened through the Spark JVM (py4j) with the JDBC driver the job
gets through ``spark.jars``, so the job needs no Python database client on the cluster.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

USER_ENV = "SQLSERVER_CDC_JDBC_USER"
PASSWORD_ENV = "SQLSERVER_CDC_JDBC_PASSWORD"
#: JDBC URL prefix -> driver class (the relational targets the job knows).
DRIVERS = {"jdbc:postgresql:": "org.postgresql.Driver"}
_SECRET_PARAMETERS = ("password", "sslpassword", "user")


@dataclass(frozen=True)
class JdbcCredentials:
    """A login for the target database (the password is left out of ``repr``)."""

    user: str
    password: str = field(repr=False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> JdbcCredentials | None:
        """Read :data:`USER_ENV` / :data:`PASSWORD_ENV`; None when the user is not set."""
        environ = os.environ if environ is None else environ
        user = environ.get(USER_ENV)
        return cls(user, environ.get(PASSWORD_ENV, "")) if user else None

    @classmethod
    def from_file(cls, path: str) -> JdbcCredentials:
        """Read ``user=`` and ``password=`` lines from a file only its owner may read or write."""
        file = Path(path)
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
        except OSError as err:
            raise MergeJobError(
                f"JDBC credentials file {path}: {err.strerror}; it must exist where the Spark driver runs"
            ) from None
        if mode & 0o077:
            raise MergeJobError(
                f"JDBC credentials file {path} has mode {mode:04o}: others may read it; chmod 600 {path}"
            )
        values = dict(
            line.split("=", 1) for line in file.read_text().splitlines() if "=" in line and line.strip()
        )
        user = values.get("user", "").strip()
        if not user:
            raise MergeJobError(f"JDBC credentials file {path} has no user= line")
        return cls(user, values.get("password", "").rstrip("\n"))


def check_jdbc_url(url: str) -> str:
    """Return the driver class of a JDBC URL; refuse unknown databases and URLs that carry credentials.

    :param url: e.g. ``jdbc:postgresql://host:5432/database``.
    """
    driver = next((cls for prefix, cls in DRIVERS.items() if url.startswith(prefix)), None)
    if driver is None:
        raise MergeJobError(
            f"JDBC URL {url.split('?')[0]!r}: the relational target supports {', '.join(DRIVERS)} URLs only"
        )
    rest = urlsplit(url[len("jdbc:") :])
    named = {k.lower() for k, _ in parse_qsl(rest.query)}
    if rest.password or rest.username or named & set(_SECRET_PARAMETERS):
        raise MergeJobError(
            "the JDBC URL carries credentials; spark-submit arguments are visible to anyone who can list "
            f"processes. Pass them in {USER_ENV}/{PASSWORD_ENV} or a credentials file instead"
        )
    return driver


class JdbcConnection:
    """One JDBC connection of the Spark driver, through py4j; autocommit off.

    :param spark: the session whose JVM has the JDBC driver (``spark.jars``).
    :param url: the JDBC URL.
    :param credentials: the login.
    """

    def __init__(self, spark: SparkSession, url: str, credentials: JdbcCredentials) -> None:
        jvm = spark.sparkContext._jvm
        driver = check_jdbc_url(url)
        # Spark's registry makes DriverManager see a driver loaded from spark.jars (another class loader).
        jvm.org.apache.spark.sql.execution.datasources.jdbc.DriverRegistry.register(driver)
        properties = jvm.java.util.Properties()
        properties.setProperty("user", credentials.user)
        properties.setProperty("password", credentials.password)
        try:
            self._conn = jvm.java.sql.DriverManager.getConnection(url, properties)
        except Exception as err:
            raise MergeJobError(f"cannot connect to {url.split('?')[0]}: {jdbc_error_text(err)}") from None
        self._conn.setAutoCommit(False)

    def execute(self, sql: str) -> int:
        """Run one statement; return its update count (-1 when it returns rows)."""
        statement = self._conn.createStatement()
        try:
            return int(statement.executeUpdate(sql)) if not sql.lstrip().upper().startswith("SELECT") else -1
        finally:
            statement.close()

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a query with ``?`` parameters (strings, ints); return its rows as tuples of Java values."""
        statement = self._conn.prepareStatement(sql)
        try:
            for index, value in enumerate(parameters, start=1):
                statement.setObject(index, value)
            result = statement.executeQuery()
            width = result.getMetaData().getColumnCount()
            rows = []
            while result.next():
                rows.append(tuple(result.getObject(i) for i in range(1, width + 1)))
            return rows
        finally:
            statement.close()

    def update(self, sql: str, parameters: Sequence[Any]) -> int:
        """Run a parameterised statement; return its update count."""
        statement = self._conn.prepareStatement(sql)
        try:
            for index, value in enumerate(parameters, start=1):
                statement.setObject(index, value)
            return int(statement.executeUpdate())
        finally:
            statement.close()

    def commit(self) -> None:
        self._conn.commit()

    def rollback(self) -> None:
        self._conn.rollback()

    def close(self) -> None:
        """Close the connection; an open transaction is rolled back by the server."""
        with suppress(Exception):  # closing a broken connection: nothing left to do
            self._conn.close()


@contextmanager
def jdbc_connection(spark: SparkSession, url: str, credentials: JdbcCredentials) -> Iterator[JdbcConnection]:
    """Yield a :class:`JdbcConnection`, rolled back and closed afterwards (commit inside the block)."""
    conn = JdbcConnection(spark, url, credentials)
    try:
        yield conn
    finally:
        with suppress(Exception):  # the connection may be gone: the server rolled back already
            conn.rollback()
        conn.close()


def jdbc_error_text(err: BaseException) -> str:
    """Return the database's message of a JDBC error raised through py4j (its SQLException), else the error's."""
    java = getattr(err, "java_exception", None)
    if java is not None:
        try:
            return str(java.getMessage())
        except Exception:  # the JVM may be gone
            pass
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def jdbc_sql_state(err: BaseException) -> str | None:
    """Return the SQLSTATE of a JDBC error raised through py4j, if it carries one."""
    java = getattr(err, "java_exception", None)
    try:
        return str(java.getSQLState()) if java is not None else None
    except Exception:  # not an SQLException
        return None
