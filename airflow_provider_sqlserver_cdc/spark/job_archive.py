"""The merge job's ``py_files``: a zip of the pure-Python modules the job imports on the cluster.

Built from the installed package, deterministically (sorted entries, fixed timestamps), and cached
in the temporary directory under a name that carries the package version and a digest of the
content, so every task of a worker reuses one file and a new version never reuses an old one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
PACKAGE = PACKAGE_DIR.name
#: The modules the job imports, relative to the package directory (directories: every ``.py`` in them).
JOB_MODULES = (
    "__init__.py",
    "lsn.py",
    "column_masking.py",
    "window/__init__.py",
    "window/manifest.py",
    "window/lsn_ranges.py",
    "window/net_effect.py",
    "spark/__init__.py",
    "spark/job_archive.py",
    "spark/merge",
    "spark/maintenance",
    "spark/continuous",
    "spark/reconcile",
    "reconcile",
)
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def job_module_files() -> list[Path]:
    """Return the package's files that go into the zip, sorted."""
    files: set[Path] = set()
    for entry in JOB_MODULES:
        path = PACKAGE_DIR / entry
        files.update(path.rglob("*.py") if path.is_dir() else [path])
    return sorted(files)


def merge_job_py_files(directory: str | os.PathLike[str] | None = None) -> str:
    """Build (or reuse) the zip of the job's modules; return its path, for ``py_files``.

    :param directory: where to keep the zip; default the system's temporary directory.
    """
    from airflow_provider_sqlserver_cdc import __version__

    files = job_module_files()
    contents = [
        (f"{PACKAGE}/{path.relative_to(PACKAGE_DIR).as_posix()}", path.read_bytes()) for path in files
    ]
    digest = hashlib.sha256()
    for name, data in contents:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    target = (
        Path(directory or tempfile.gettempdir())
        / f"sqlserver-cdc-merge-{__version__}-{digest.hexdigest()[:16]}.zip"
    )
    if _holds(target, contents):
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp: a fresh file of this user's, never one (or a link) that someone else left there.
    handle, partial = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    with (
        os.fdopen(handle, "wb") as raw,
        zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as archive,
    ):
        for name, data in contents:
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    os.chmod(partial, 0o644)
    os.replace(partial, target)
    return str(target)


def _holds(target: Path, contents: list[tuple[str, bytes]]) -> bool:
    """Whether ``target`` is a zip of exactly ``contents`` (a file left in a shared temp dir is checked)."""
    if target.is_symlink() or not target.is_file():
        return False
    try:
        with zipfile.ZipFile(target) as archive:
            return [(i.filename, archive.read(i)) for i in archive.infolist()] == contents
    except (OSError, zipfile.BadZipFile):
        return False


def with_job_modules(py_files: str | None) -> str:
    """Return ``py_files`` (spark-submit's comma-separated list) with the job's zip added once.

    :param py_files: what the operator was given, or None.
    """
    job_modules = merge_job_py_files()
    files = [f for f in (py_files or "").split(",") if f]
    return ",".join(files if job_modules in files else [*files, job_modules])
