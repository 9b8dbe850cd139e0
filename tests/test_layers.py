"""The package's floors (docs/architecture.md, "Layers"): a room imports only rooms on lower floors."""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_provider_sqlserver_cdc

PACKAGE = Path(airflow_provider_sqlserver_cdc.__file__).parent
NAME = PACKAGE.name

#: Each top-level room (a folder or a module of the package) and its floor, as docs/architecture.md
#: draws them. A room may import rooms on lower floors only: so no two rooms import each other, even
#: round a loop. ``testing/`` is the test harness, not a floor of the provider.
FLOORS = {
    "errors": 0,
    "lsn": 0,
    "get_provider_info": 0,
    "capture_instance": 1,
    "shared_storage": 1,
    "column_masking": 1,
    "tsql": 2,
    "window": 3,
    "reconcile": 3,
    "parquet": 4,
    "state": 4,
    "spark": 4,
    "assets": 4,
    "hooks": 5,
    "staging_files": 5,
    "lineage": 5,
    "lineage_inputs": 5,
    "extraction": 6,
    "metrics": 6,
    "triggers": 6,
    "snapshot": 7,
    "merge_outputs": 7,
    "task_defaults": 8,
    "source_task": 9,
    "operators": 10,
    "sensors": 10,
    "pipeline": 11,
}


def _rooms() -> set[str]:
    return {_room(p) for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}


def _room(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imported_rooms(path: Path) -> set[str]:
    """The package's rooms a module imports (absolute and relative imports, TYPE_CHECKING ones too)."""
    package_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    rooms = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package_parts[: len(package_parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{alias.name}" for alias in node.names] if base == NAME else [base]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == NAME and len(parts) > 1 and parts[1] in FLOORS:  # not a name of __init__.py
                rooms.add(parts[1])
    return rooms


def test_every_room_has_a_floor() -> None:
    assert _rooms() - {"__init__", "testing"} == set(FLOORS)


def test_rooms_import_only_lower_floors() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        room = _room(path)
        if room in ("__init__", "testing"):
            continue
        for other in sorted(_imported_rooms(path) - {room, "testing"}):
            if FLOORS[other] >= FLOORS[room]:
                upward.append(
                    f"{path.relative_to(PACKAGE)} ({room}, floor {FLOORS[room]}) imports "
                    f"{other} (floor {FLOORS[other]})"
                )
    assert upward == []


def test_the_window_contract_and_the_spark_job_need_no_airflow() -> None:
    """window/ is standard library only (the job imports it on the cluster); spark/ never imports Airflow."""
    for room, allowed in (("window", set()), ("spark", {"pyspark", "py4j"})):
        for path in sorted((PACKAGE / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    tops = {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    tops = {(node.module or "").split(".")[0]}
                else:
                    continue
                third_party = {t for t in tops if t != NAME and t not in _stdlib()} - allowed
                assert not third_party, f"{path.relative_to(PACKAGE)} imports {third_party}"


def _stdlib() -> frozenset[str]:
    import sys

    return frozenset(sys.stdlib_module_names) | {"__future__"}
