"""Test-suite set-up: an isolated Airflow home with a migrated metadata database, and the fixture plugins.

The simulator's fixtures come from its distribution's plugin (registered by its ``pytest11`` entry
point when installed; listed here too, which loads it once either way), the provider's harness
fixtures from :mod:`airflow_provider_sqlserver_cdc.testing.fixtures`, which nothing registers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from airflow_provider_sqlserver_cdc.testing.airflow_connections import (
    LOCAL_SPARK_CONNECTION,
    connection_variable,
)
from airflow_provider_sqlserver_cdc.testing.dag_runs import (
    airflow_home_environment,
    interpreter_environment,
    migrate_metadata_db,
)
from sqlserver_cdc_simulator.odbc_drivers import register_test_drivers

pytest_plugins = ["sqlserver_cdc_simulator.pytest_plugin", "airflow_provider_sqlserver_cdc.testing.fixtures"]

REPO_ROOT = Path(__file__).resolve().parent.parent
# The Airflow home the caller chose (make test-lowest does), or the suite's own.
_HOME = Path(os.environ.get("AIRFLOW_HOME") or REPO_ROOT / ".airflow-test-home")
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
# One Airflow home per pytest-xdist worker (its SQLite metadata database takes one writer); the
# controller's settings, inherited by the workers, are replaced, and the DAG-run processes inherit these.
AIRFLOW_HOME = _HOME.with_name(f"{_HOME.name}-{_WORKER}") if _WORKER else _HOME
if _WORKER:
    os.environ.update(airflow_home_environment(AIRFLOW_HOME))

# Airflow reads its configuration at import time: set it before anything imports airflow.
_settings = {
    **airflow_home_environment(AIRFLOW_HOME, dags_folder=REPO_ROOT / "dags"),
    "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    connection_variable("spark_default"): LOCAL_SPARK_CONNECTION,
    # The suite's connections name their ODBC driver (FreeTDS) in the extra: allow it, as a deployment would.
    "AIRFLOW__SQLSERVER_CDC__ALLOW_DRIVER_IN_EXTRA": "True",
    # Every Spark JVM of the suite (the test sessions' and each spark-submit's driver) handles small
    # windows: the client compiler alone and the serial collector start it with about 0.64x the CPU
    # time (user CPU of tests/operators/test_spark_merge.py, two runs each, side by side). Only the
    # JIT tiers and the collector change; a caller's own SPARK_SUBMIT_OPTS wins.
    "SPARK_SUBMIT_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
for _name, _value in _settings.items():
    os.environ.setdefault(_name, _value)
# Microsoft's ODBC Driver 18 (make client-deps unpacks it from its PyPI wheel) beside the system's
# drivers, for this process and the DAG-run processes only; the `odbc_driver` fixture skips its
# Driver 18 runs with this reason when it is missing.
register_test_drivers(
    REPO_ROOT / ".cache" / "clients" / "msodbcsql18" / "driver",
    AIRFLOW_HOME.with_name(AIRFLOW_HOME.name + "-odbc"),
)
# spark-submit from the pyspark wheel runs the first python3 on PATH: make it this interpreter.
_interpreter = interpreter_environment()
os.environ["PATH"] = _interpreter["PATH"]
os.environ.setdefault("PYSPARK_PYTHON", _interpreter["PYSPARK_PYTHON"])


# The longest end-to-end modules, longest first (CI's "slowest durations"); the others follow them.
LONGEST_E2E_MODULES = (
    "test_replication_proof.py",
    "test_change_tracking_dag.py",
    "test_backfill_create.py",
    "test_downstream_assets.py",
    "test_production_corners.py",
    "test_schema_change_dag.py",
    "test_several_sources_dag.py",
    "test_watermark_dag.py",
    "test_continuous_apply_dag.py",
    "test_postgres_target.py",
)


def run_order(item: pytest.Item) -> tuple[int, int]:
    """Where a test's module goes in the queue: end-to-end modules first, the longest of them first."""
    if not item.nodeid.startswith("tests/e2e/"):
        return (1, 0)
    name = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return (0, LONGEST_E2E_MODULES.index(name) if name in LONGEST_E2E_MODULES else len(LONGEST_E2E_MODULES))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the end-to-end modules first, longest first; skip tests that need a real SQL Server or Java when
    they are missing.

    pytest-xdist (``--dist loadfile --no-loadscope-reorder``) hands modules to its workers in this
    order, so the long end-to-end modules start at once, longest first, and the many short ones fill the
    workers' time after them, instead of one long module running alone at the end.
    """
    items.sort(key=run_order)
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
    migrate_metadata_db(os.environ)
    return AIRFLOW_HOME
