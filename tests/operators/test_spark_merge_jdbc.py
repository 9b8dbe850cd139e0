"""CdcSparkMergeOperator with a relational (JDBC) target: the URL from a connection, the login in a private file."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest
from airflow.exceptions import AirflowException

from airflow_provider_sqlserver_cdc.operators import spark_merge
from airflow_provider_sqlserver_cdc.operators.jdbc_target_connection import (
    LOGIN_DIRECTORY_PREFIX,
    JdbcTarget,
    jdbc_target_from_connection,
)
from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator, merge_job_arguments
from airflow_provider_sqlserver_cdc.spark import MERGE_JOB_PATH
from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import (
    PASSWORD_ENV,
    USER_ENV,
    JdbcCredentials,
)

SECRET = "s3cret-Pa55"
TARGET = {
    "conn_type": "postgres",
    "host": "pg.internal",
    "port": 5433,
    "login": "replicator",
    "password": SECRET,
    "schema": "reporting",
    "extra": {"sslmode": "require"},
}


class _Popen:
    """Stands in for spark-submit (the edge: the real one runs in tests/spark and tests/e2e): records argv,
    env and the credentials file the job would read, then exits with ``returncode`` (or runs ``during``)."""

    calls: list[tuple[list[str], dict[str, str] | None]] = []
    files: list[tuple[str, int, int, str]] = []
    returncode = 0
    during: Any = None

    def __init__(self, command: list[str], **kwargs: Any) -> None:
        _Popen.calls.append((list(command), kwargs.get("env")))
        path = Path(command[command.index("--jdbc-credentials-file") + 1])
        if path.name == "login":  # the operator's own file (others are the user's, where the driver runs)
            _Popen.files.append(
                (str(path), path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777, path.read_text())
            )
        self.stdout = io.StringIO("")

    def wait(self) -> int:
        if _Popen.during is not None:
            _Popen.during()
        return _Popen.returncode

    def poll(self) -> int | None:
        return None

    def kill(self) -> None:
        pass


class _TaskInstance:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@pytest.fixture
def spark_submit(monkeypatch: pytest.MonkeyPatch) -> type[_Popen]:
    _Popen.calls, _Popen.files, _Popen.returncode, _Popen.during = [], [], 0, None
    monkeypatch.setattr("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", _Popen)
    monkeypatch.setenv("AIRFLOW_CONN_PG_TARGET", json.dumps(TARGET))
    return _Popen


def _jdbc_merge(**kwargs: Any) -> CdcSparkMergeOperator:
    return CdcSparkMergeOperator(
        task_id="merge", windows="/w/a", namespace="reporting", target_kind="postgres", target_conn_id="pg_target",
        jars="/usr/share/java/postgresql.jar", **kwargs,
    )  # fmt: skip


def _spark_connection(monkeypatch: pytest.MonkeyPatch, master: str, deploy_mode: str) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT",
        json.dumps({"conn_type": "spark", "host": master, "extra": {"deploy-mode": deploy_mode}}),
    )


@pytest.mark.parametrize("master", ["local[2]", "yarn"])
def test_the_login_goes_to_a_private_file_not_the_arguments_environment_logs_or_xcom(
    spark_submit: type[_Popen], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, master: str
) -> None:
    _spark_connection(monkeypatch, master, "client")
    operator = _jdbc_merge(env_vars={"OTHER": "1"}, jdbc_connections=2)
    ti = _TaskInstance()
    with caplog.at_level(logging.DEBUG):
        operator.execute({"ti": ti})
    command, env = spark_submit.calls[0]
    assert not any(SECRET in argument or "replicator" in argument for argument in command)
    # The process environment spark-submit gets (None: this process's); only the test's own connection
    # variable, where this test keeps the target's connection, holds the password.
    given = {key: value for key, value in (env or os.environ).items() if key != "AIRFLOW_CONN_PG_TARGET"}
    assert not any(SECRET in value for value in given.values())
    assert USER_ENV not in (env or {}) and PASSWORD_ENV not in (env or {})
    arguments = command[command.index(operator.application) + 1 :]
    settings = parse_args(arguments)
    assert settings.target_kind == "postgres" and settings.jdbc_connections == 2
    assert settings.jdbc_url == "jdbc:postgresql://pg.internal:5433/reporting?sslmode=require"
    # The job read a file only this user may read, in a directory only this user may enter ...
    [(path, mode, directory_mode, text)] = spark_submit.files
    assert settings.jdbc_credentials_file == path
    assert (mode, directory_mode) == (0o600, 0o700)
    assert text == f"user=replicator\npassword={SECRET}\n"
    # ... which is gone after the task, with its directory.
    assert not Path(path).exists() and not Path(path).parent.exists()
    assert SECRET not in caplog.text and SECRET not in repr(ti.pushed)
    assert SECRET not in repr(operator._jdbc_target)


def test_the_job_reads_the_file_the_operator_writes(
    spark_submit: type[_Popen], monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[JdbcCredentials] = []

    def job_reads_its_login() -> None:  # as the job does on the driver (spark/merge/targets/selection.py)
        command = spark_submit.calls[-1][0]
        settings = parse_args(command[command.index(MERGE_JOB_PATH) + 1 :])
        read.append(JdbcCredentials.from_file(settings.jdbc_credentials_file or ""))

    spark_submit.during = job_reads_its_login
    _jdbc_merge().execute({"ti": _TaskInstance()})
    assert read == [JdbcCredentials("replicator", SECRET)]


def test_the_login_file_is_removed_when_spark_submit_fails_and_when_the_task_is_killed(
    spark_submit: type[_Popen],
) -> None:
    spark_submit.returncode = 1
    with pytest.raises(AirflowException, match="Error code is: 1"):
        _jdbc_merge().execute({"ti": _TaskInstance()})
    failed = spark_submit.files[0][0]
    assert not Path(failed).parent.exists()

    # Killed (SIGTERM: Airflow calls on_kill while spark-submit runs): the file goes at once.
    spark_submit.returncode = 0
    operator = _jdbc_merge()
    present: list[bool] = []

    def kill() -> None:
        path = Path(spark_submit.files[-1][0])
        present.append(path.exists())
        operator.on_kill()
        present.append(path.exists())

    spark_submit.during = kill
    operator.execute({"ti": _TaskInstance()})
    assert present == [True, False]
    assert Path(spark_submit.files[-1][0]).parent.name.startswith(LOGIN_DIRECTORY_PREFIX)


def test_login_directories_left_by_killed_tasks_of_this_host_are_removed_by_the_next(
    spark_submit: type[_Popen], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = next(
        pid for pid in range(4_000_000, 0, -1) if not Path(f"/proc/{pid}").exists()
    )  # no such process
    stem = f"{LOGIN_DIRECTORY_PREFIX}{re.sub(r'[^A-Za-z0-9.]+', '_', socket.gethostname())}-"
    stale = tmp_path / f"{stem}{gone}-abc"  # its task was killed with SIGKILL
    running = tmp_path / f"{stem}{os.getpid()}-def"  # a task still running (this process)
    other_host = tmp_path / f"{LOGIN_DIRECTORY_PREFIX}elsewhere-{gone}-ghi"
    for directory in (stale, running, other_host):
        directory.mkdir(mode=0o700)
        (directory / "login").write_text("user=u\npassword=p\n")
    _jdbc_merge().execute({"ti": _TaskInstance()})
    assert spark_submit.files[0][0].startswith(f"{tmp_path}/{stem}{os.getpid()}-")
    assert not stale.exists() and running.exists() and other_host.exists()
    logins = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(LOGIN_DIRECTORY_PREFIX))
    assert logins == sorted([running.name, other_host.name])  # its own removed too


@pytest.mark.parametrize("where", ["connection", "operator"])
def test_cluster_deploy_mode_needs_a_credentials_file(
    spark_submit: type[_Popen], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    _spark_connection(monkeypatch, "yarn", "cluster" if where == "connection" else "client")
    operator = CdcSparkMergeOperator(
        task_id="merge", windows="/w/a", namespace="reporting", target_kind="postgres", target_conn_id="pg_target",
        **({"deploy_mode": "cluster"} if where == "operator" else {}),
    )  # fmt: skip
    with pytest.raises(AirflowException, match="jdbc_credentials_file"):
        operator.execute({"ti": _TaskInstance()})
    assert spark_submit.calls == [] and spark_submit.files == []
    with_file = CdcSparkMergeOperator(
        task_id="merge", windows="/w/a", namespace="reporting", target_kind="postgres",
        jdbc_url="jdbc:postgresql://pg.internal:5433/reporting", jdbc_credentials_file="/etc/cdc/pg.login",
    )  # fmt: skip
    with_file.execute({"ti": _TaskInstance()})
    command, env = spark_submit.calls[0]
    assert command[-2:] == ["--jdbc-credentials-file", "/etc/cdc/pg.login"] and USER_ENV not in (env or {})


def test_the_operator_uses_no_private_api_of_the_spark_provider() -> None:
    # The project's standard: no overriding of other providers' private methods, no use of their private state.
    source = Path(spark_merge.__file__).read_text()
    assert "def _get_hook" not in source and "hook._" not in source


def test_jdbc_settings_are_checked_when_the_dag_is_built() -> None:
    with pytest.raises(ValueError, match="target_kind must be one of"):
        CdcSparkMergeOperator(task_id="m", windows="/w", namespace="x", target_kind="oracle")
    with pytest.raises(ValueError, match="needs target_conn_id"):
        CdcSparkMergeOperator(task_id="m", windows="/w", namespace="x", target_kind="postgres")
    with pytest.raises(ValueError, match="carries credentials"):
        merge_job_arguments(["/w/a"], jdbc_url="jdbc:postgresql://h/db?user=u&password=p")
    with pytest.raises(ValueError, match="supports jdbc:postgresql"):
        merge_job_arguments(["/w/a"], jdbc_url="jdbc:mysql://h/db")


class _Connection:
    def __init__(self, **values: Any) -> None:
        self.conn_type, self.host, self.port = values.get("conn_type"), values.get("host"), values.get("port")
        self.schema, self.login, self.password = (
            values.get("schema"),
            values.get("login"),
            values.get("password"),
        )
        self.extra_dejson = values.get("extra", {})


def test_connections_become_urls_without_the_login() -> None:
    target = jdbc_target_from_connection("t", _Connection(**{**TARGET, "port": None, "extra": {}}))
    assert target.url == "jdbc:postgresql://pg.internal:5432/reporting"
    assert target.file_text() == f"user=replicator\npassword={SECRET}\n"
    with pytest.raises(ValueError, match="line break"):
        JdbcTarget("jdbc:postgresql://h/db", "u", "p\nuser=other").file_text()
    jdbc = jdbc_target_from_connection(
        "t", _Connection(conn_type="jdbc", host="jdbc:postgresql://h/db", login="u")
    )
    assert jdbc.url == "jdbc:postgresql://h/db"
    with pytest.raises(ValueError, match="type 'mssql'"):
        jdbc_target_from_connection("t", _Connection(conn_type="mssql", host="h", schema="d", login="u"))
    with pytest.raises(ValueError, match="no login"):
        jdbc_target_from_connection("t", _Connection(conn_type="postgres", host="h", schema="d"))
