"""The simulator is a distribution of its own: it imports nothing of the provider or Airflow, and brings its pytest plugin."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import sqlserver_cdc_simulator

DISTRIBUTION = Path(__file__).resolve().parents[1]
PACKAGE = Path(sqlserver_cdc_simulator.__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_package_imports_neither_the_provider_nor_airflow() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(found)
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := _imported_modules(path) & {"airflow_provider_sqlserver_cdc", "airflow"})
    }
    assert offenders == {}


def test_the_pytest_plugin_is_registered_under_its_module_name() -> None:
    """Named after its module, the entry point and a conftest's ``pytest_plugins`` load it once."""
    project = tomllib.loads((DISTRIBUTION / "pyproject.toml").read_text())["project"]
    assert project["name"] == "sqlserver-cdc-simulator"
    assert project["entry-points"]["pytest11"] == {
        "sqlserver_cdc_simulator.pytest_plugin": "sqlserver_cdc_simulator.pytest_plugin"
    }
    assert project["scripts"]["sqlserver-cdc-simulator"] == "sqlserver_cdc_simulator.__main__:main"
