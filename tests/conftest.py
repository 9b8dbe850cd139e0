"""Test-suite set-up: an isolated Airflow home with a migrated metadata database."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
AIRFLOW_HOME = REPO_ROOT / ".airflow-test-home"

# Airflow reads its configuration at import time: set it before anything imports airflow.
os.environ.setdefault("AIRFLOW_HOME", str(AIRFLOW_HOME))
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO_ROOT / "dags"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}")
os.environ.setdefault(
    "AIRFLOW_CONN_SPARK_DEFAULT",
    '{"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}',
)
# spark-submit from the pyspark wheel runs the first python3 on PATH: make it this interpreter.
_bin = str(Path(sys.executable).parent)
if not os.environ.get("PATH", "").startswith(_bin):
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests that need a real SQL Server unless one is configured, and Spark tests without Java."""
    if not os.environ.get("SQLSERVER_CDC_TEST_ODBC"):
        skip = pytest.mark.skip(reason="set SQLSERVER_CDC_TEST_ODBC to an ODBC connection string to run")
        for item in items:
            if "mssql" in item.keywords:
                item.add_marker(skip)
    if shutil.which("java") is None:
        skip_spark = pytest.mark.skip(reason="Java is not installed (make test installs it when run as root)")
        for item in items:
            if "spark" in item.keywords:
                item.add_marker(skip_spark)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """Migrate the isolated Airflow metadata database once per test session."""
    AIRFLOW_HOME.mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
    )
    return AIRFLOW_HOME
