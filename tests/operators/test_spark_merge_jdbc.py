"""CdcSparkMergeOperator with a relational (JDBC) target: the URL from a connection, the login never in argv."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from airflow.exceptions import AirflowException

from airflow_provider_sqlserver_cdc.operators.jdbc_target_connection import jdbc_target_from_connection
from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator, merge_job_arguments
from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import PASSWORD_ENV, USER_ENV

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
    """Stands in for spark-submit (the edge: the real one runs in tests/spark): records argv and env."""

    calls: list[tuple[list[str], dict[str, str]]] = []

    def __init__(self, command: list[str], **kwargs: Any) -> None:
        _Popen.calls.append((list(command), dict(kwargs.get("env") or {})))
        self.stdout = io.StringIO("")
        self.returncode = 0

    def wait(self) -> int:
        return 0


class _TaskInstance:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@pytest.fixture
def spark_submit(monkeypatch: pytest.MonkeyPatch) -> type[_Popen]:
    _Popen.calls = []
    monkeypatch.setattr("airflow.providers.apache.spark.hooks.spark_submit.subprocess.Popen", _Popen)
    monkeypatch.setenv("AIRFLOW_CONN_PG_TARGET", json.dumps(TARGET))
    return _Popen


@pytest.mark.parametrize("master", ["local[2]", "yarn"])
def test_the_login_goes_to_the_environment_of_spark_submit_not_its_arguments(
    spark_submit: type[_Popen], monkeypatch: pytest.MonkeyPatch, master: str
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT",
        json.dumps({"conn_type": "spark", "host": master, "extra": {"deploy-mode": "client"}}),
    )
    operator = CdcSparkMergeOperator(
        task_id="merge", windows="/w/a", namespace="reporting", target_kind="postgres", target_conn_id="pg_target",
        jars="/usr/share/java/postgresql.jar", env_vars={"OTHER": "1"}, jdbc_connections=2,
    )  # fmt: skip
    operator.execute({"ti": _TaskInstance()})
    command, env = spark_submit.calls[0]
    assert not any(SECRET in argument or "replicator" in argument for argument in command)
    assert env[USER_ENV] == "replicator" and env[PASSWORD_ENV] == SECRET and env["OTHER"] == "1"
    arguments = command[command.index(operator.application) + 1 :]
    settings = parse_args(arguments)
    assert settings.target_kind == "postgres" and settings.jdbc_connections == 2
    assert settings.jdbc_url == "jdbc:postgresql://pg.internal:5433/reporting?sslmode=require"
    assert SECRET not in repr(operator._jdbc_target)


def test_cluster_deploy_mode_needs_a_credentials_file(
    spark_submit: type[_Popen], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT",
        json.dumps({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}),
    )
    operator = CdcSparkMergeOperator(
        task_id="merge",
        windows="/w/a",
        namespace="reporting",
        target_kind="postgres",
        target_conn_id="pg_target",
    )
    with pytest.raises(AirflowException, match="jdbc_credentials_file"):
        operator.execute({"ti": _TaskInstance()})
    assert spark_submit.calls == []
    with_file = CdcSparkMergeOperator(
        task_id="merge", windows="/w/a", namespace="reporting", target_kind="postgres",
        jdbc_url="jdbc:postgresql://pg.internal:5433/reporting", jdbc_credentials_file="/etc/cdc/pg.login",
    )  # fmt: skip
    with_file.execute({"ti": _TaskInstance()})
    command, env = spark_submit.calls[0]
    assert command[-2:] == ["--jdbc-credentials-file", "/etc/cdc/pg.login"] and USER_ENV not in env


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
    assert target.environment() == {USER_ENV: "replicator", PASSWORD_ENV: SECRET}
    jdbc = jdbc_target_from_connection(
        "t", _Connection(conn_type="jdbc", host="jdbc:postgresql://h/db", login="u")
    )
    assert jdbc.url == "jdbc:postgresql://h/db"
    with pytest.raises(ValueError, match="type 'mssql'"):
        jdbc_target_from_connection("t", _Connection(conn_type="mssql", host="h", schema="d", login="u"))
    with pytest.raises(ValueError, match="no login"):
        jdbc_target_from_connection("t", _Connection(conn_type="postgres", host="h", schema="d"))
