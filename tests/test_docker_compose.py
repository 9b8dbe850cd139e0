"""The docker-compose file validates and wires a real SQL Server 2022 with Agent into the pipeline.

No Docker engine runs on the development machines, so this checks the file with
``docker-compose config`` (Debian's package, installed by ``make test``) and its structure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

COMPOSE_FILE = Path(__file__).resolve().parent.parent / "docker-compose.yaml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_docker_compose_config_validates():
    env = {**os.environ, "MSSQL_SA_PASSWORD": "Only-for-validation-1"}
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE_FILE), "config", "-q"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_docker_compose_refuses_to_start_without_a_password():
    env = {k: v for k, v in os.environ.items() if k != "MSSQL_SA_PASSWORD"}
    result = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE_FILE), "config", "-q"], env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "MSSQL_SA_PASSWORD" in result.stderr


def test_sql_server_runs_with_agent_for_the_capture_job(compose):
    sqlserver = compose["services"]["sqlserver"]
    assert sqlserver["image"].startswith("mcr.microsoft.com/mssql/server:2022")
    assert sqlserver["environment"]["MSSQL_AGENT_ENABLED"] == "true"


def test_airflow_3_components_and_spark_are_present(compose):
    services = set(compose["services"])
    assert {
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
    } <= services
    assert {"spark-master", "spark-worker", "sqlserver-init"} <= services


def test_no_secret_is_written_into_the_file():
    text = COMPOSE_FILE.read_text()
    # The SA password only ever comes from the environment.
    for line in text.splitlines():
        if "MSSQL_SA_PASSWORD" in line and ":" in line and "${" not in line and "$$" not in line:
            pytest.fail(f"literal password in docker-compose.yaml: {line.strip()}")
