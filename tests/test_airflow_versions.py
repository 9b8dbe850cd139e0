"""The Airflow versions the provider declares are the ones ``make test`` runs it on.

``make test`` runs the whole suite on the newest Airflow the declared range resolves to, then this
module, ``tests/dags``' parse tests and one ``dag.test()`` module on the lowest declared Airflow, in
a second virtualenv (Makefile: ``AIRFLOW_LOWEST``). These tests hold on both.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import airflow
from packaging.version import Version

import airflow_provider_sqlserver_cdc

REPO_ROOT = Path(__file__).resolve().parent.parent


def declared_airflow_floor() -> Version:
    """Return the lowest Airflow version pyproject.toml admits."""
    dependencies = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in dependencies if re.match(r"apache-airflow\s*[<>=]", d)]
    return Version(re.search(r">=\s*([0-9.]+)", spec).group(1))


def test_makefile_runs_the_declared_lowest_airflow():
    makefile = (REPO_ROOT / "Makefile").read_text()
    lowest = Version(re.search(r"^AIRFLOW_LOWEST\s*:=\s*(\S+)", makefile, re.MULTILINE).group(1))
    assert lowest == declared_airflow_floor(), (
        "pyproject.toml's apache-airflow floor and the Makefile's AIRFLOW_LOWEST must name the same "
        "version: make test runs the smoke tests on it"
    )


def test_running_airflow_is_inside_the_declared_range():
    running = Version(airflow.__version__)
    assert declared_airflow_floor() <= running < Version("4")


OPTIONAL_IMPORTS = {"airflow_provider_sqlserver_cdc.lineage": "airflow.providers.openlineage"}
"""Modules that only the optional OpenLineage provider imports (lineage.py's docstring): they may miss it."""


def test_every_module_of_the_provider_imports():
    failures = {}
    for module in pkgutil.walk_packages(
        airflow_provider_sqlserver_cdc.__path__, airflow_provider_sqlserver_cdc.__name__ + "."
    ):
        if module.name.endswith(".__main__"):
            continue  # command-line entry points run on import
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as err:
            optional = OPTIONAL_IMPORTS.get(module.name)
            if optional is None or not (err.name or "").startswith(optional):
                failures[module.name] = f"{type(err).__name__}: {err}"
        except Exception as err:  # collect them all: the message lists every module that fails
            failures[module.name] = f"{type(err).__name__}: {err}"
    assert not failures, f"on Airflow {airflow.__version__}: {failures}"


def test_plain_install_gets_a_spark_that_can_submit():
    """The Spark provider 6 replaces pyspark with pyspark-client (no spark-submit, no jars)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    assert Version(pyspark.__version__) < Version("4"), pyspark.__version__
    assert any(jars.glob("spark-core_*.jar")), f"no Spark jars under {jars}"
