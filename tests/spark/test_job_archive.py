"""The merge job's shipping: the entry file spark-submit runs and the zip of modules given as py_files."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

from airflow_provider_sqlserver_cdc.spark import MERGE_JOB_PATH, merge_job_py_files, with_job_modules

#: What the job's modules may import on the cluster: the standard library, PySpark and themselves.
ALLOWED_IMPORTS = {
    "__future__",
    "abc",
    "argparse",
    "concurrent",
    "hashlib",
    "hmac",  # column_masking (its target comment note is the job's; the hash is the extract's)
    "json",
    "logging",
    "math",
    "os",
    "pathlib",
    "re",
    "secrets",  # the JDBC target: staging table names
    "signal",  # the continuous apply application: stop on SIGTERM
    "socket",  # the continuous apply application: its host in the lock
    "threading",  # the continuous apply application: its heartbeat
    "stat",  # the JDBC target: credentials file mode
    "time",  # the JDBC target: how long the staging load and the apply took
    "urllib",  # the JDBC target: URL checks
    "sys",
    "tempfile",
    "zipfile",
    "base64",  # the reconcile's digests: binary key values in the request
    "bisect",  # the reconcile's digests: a key's leaf
    "decimal",  # the reconcile's digests: decimal values
    "collections",
    "contextlib",
    "dataclasses",
    "datetime",
    "functools",
    "typing",
    "uuid",
    "pyspark",
    "py4j",  # ships with pyspark
    "airflow_provider_sqlserver_cdc",
}


def test_application_path_is_the_shipped_file() -> None:
    assert Path(MERGE_JOB_PATH).is_file()
    assert Path(MERGE_JOB_PATH).name == "merge_job.py"


def _imports(source: str) -> tuple[set[str], set[str]]:
    """Return the top-level names a module imports, and the package modules it imports at run time.

    Parsed, not matched by pattern: a docstring line that starts with "from the…" is no import.
    Imports under ``if TYPE_CHECKING:`` count as imports but need not be in the zip.
    """
    tree = ast.parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    type_checking = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
        for child in ast.walk(node)
    }
    packaged = {
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and id(node) not in type_checking
        and node.module
        and node.module.startswith("airflow_provider_sqlserver_cdc")
    }
    return names, packaged


def test_merge_job_imports_only_stdlib_and_pyspark(tmp_path: Path) -> None:
    archive = zipfile.ZipFile(merge_job_py_files(tmp_path))
    sources = {name: archive.read(name).decode() for name in archive.namelist()}
    sources[MERGE_JOB_PATH] = Path(MERGE_JOB_PATH).read_text()
    for name, source in sources.items():
        imported, packaged = _imports(source)
        assert imported <= ALLOWED_IMPORTS, name
        # Module-level imports of the package must be in the zip.
        for module in packaged - {"airflow_provider_sqlserver_cdc"}:
            path = module.replace(".", "/")
            assert f"{path}.py" in sources or f"{path}/__init__.py" in sources, (name, module)


def test_import_reader_ignores_docstrings_and_sees_nested_imports() -> None:
    source = (
        '"""Rows\nfrom the target, read\nimport nothing."""\n'
        "from typing import TYPE_CHECKING\n"
        "from airflow_provider_sqlserver_cdc.window import lsn_ranges\n"
        "if TYPE_CHECKING:\n    from airflow_provider_sqlserver_cdc.hooks import x\n"
        "def f():\n    import requests\n"
    )
    names, packaged = _imports(source)
    assert names == {"typing", "airflow_provider_sqlserver_cdc", "requests"}
    assert packaged == {"airflow_provider_sqlserver_cdc.window"}


def test_zip_is_deterministic_and_reused(tmp_path: Path) -> None:
    first = merge_job_py_files(tmp_path / "a")
    second = merge_job_py_files(tmp_path / "b")
    assert Path(first).name == Path(second).name and Path(first).read_bytes() == Path(second).read_bytes()
    assert merge_job_py_files(tmp_path / "a") == first
    assert Path(first).name.startswith("sqlserver-cdc-merge-0.1.0-")
    assert [p.name for p in (tmp_path / "a").iterdir()] == [Path(first).name]  # no temporary left


def test_a_zip_someone_else_left_under_the_name_is_replaced(tmp_path: Path) -> None:
    """The temp dir is shared: a file under the cached name is reused only when it holds the job's modules."""
    path = Path(merge_job_py_files(tmp_path))
    genuine = path.read_bytes()
    with zipfile.ZipFile(path, "w") as forged:
        forged.writestr("airflow_provider_sqlserver_cdc/spark/merge/job.py", "raise SystemExit('forged')")
    assert merge_job_py_files(tmp_path) == str(path)
    assert path.read_bytes() == genuine
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.zip")
    merge_job_py_files(tmp_path)
    assert not path.is_symlink() and path.read_bytes() == genuine
    assert not (tmp_path / "elsewhere.zip").exists()


def test_entry_file_runs_from_the_zip_alone(tmp_path: Path) -> None:
    """With only the zip on the path (no installed provider), the entry file parses its arguments."""
    archive = merge_job_py_files(tmp_path)
    completed = subprocess.run(
        [sys.executable, "-S", "-c", "import sys; sys.argv[0] = 'merge_job.py'; exec(open(sys.argv[1]).read())",
         MERGE_JOB_PATH, "--help"],
        env={"PYTHONPATH": archive},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert "--manifest" in completed.stdout


def test_the_operators_add_the_job_zip_to_py_files_once() -> None:
    """The spark-submit operators share ``with_job_modules``: the user's files first, the job's zip once."""
    job_zip = merge_job_py_files()
    assert with_job_modules(None) == job_zip
    assert with_job_modules("/x/a.zip,/x/b.py") == f"/x/a.zip,/x/b.py,{job_zip}"
    assert with_job_modules(f"/x/a.zip,{job_zip}") == f"/x/a.zip,{job_zip}"
