"""The provider's wheel: no simulator inside, no pytest plugin for its users, the harness behind an extra."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _pyproject(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def test_the_provider_registers_no_pytest_plugin() -> None:
    entry_points = _pyproject(REPO_ROOT / "pyproject.toml")["project"]["entry-points"]
    assert "pytest11" not in entry_points
    assert set(entry_points) == {"apache_airflow_provider"}


def test_the_provider_wheel_holds_only_the_provider_package() -> None:
    find = _pyproject(REPO_ROOT / "pyproject.toml")["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["airflow_provider_sqlserver_cdc*"]
    assert not (REPO_ROOT / "airflow_provider_sqlserver_cdc" / "testing" / "simulator").exists()
    assert (REPO_ROOT / "simulator" / "sqlserver_cdc_simulator" / "__init__.py").exists()


def test_dev_installs_the_simulator_distribution_and_the_harness_extra() -> None:
    extras = _pyproject(REPO_ROOT / "pyproject.toml")["project"]["optional-dependencies"]
    assert "simulator" not in extras
    assert "airflow-provider-sqlserver-cdc[testing]" in extras["dev"]
    assert any(requirement.startswith("sqlserver-cdc-simulator") for requirement in extras["dev"])
    simulator = _pyproject(REPO_ROOT / "simulator" / "pyproject.toml")["project"]
    assert simulator["name"] == "sqlserver-cdc-simulator"
