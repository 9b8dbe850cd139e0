"""
The ODBC drivers the test suite runs with: FreeTDS (Debian's ``tdsodbc``) and Microsoft's ODBC Driver 18.

``make client-deps`` unpacks Driver 18 from the PyPI wheel ``mssql-python-odbc`` into
``.cache/clients/msodbcsql18/driver``. :func:`register_test_drivers` writes an ``odbcinst.ini`` that
holds the system's drivers plus that one and points ``ODBCSYSINI`` at it, for this process and the
processes it starts only (nothing is installed system-wide)::

    register_test_drivers(repo / ".cache/clients/msodbcsql18/driver", home / "odbc")
"""

from __future__ import annotations

import configparser
import io
import os
import subprocess
from pathlib import Path

from sqlserver_cdc_simulator.connections import FREETDS_DRIVER, MS_ODBC_DRIVER

TEST_DRIVERS = (FREETDS_DRIVER, MS_ODBC_DRIVER)
"""The ODBC drivers the suite's driver-parametrised tests run with, FreeTDS first."""

SYSTEM_ODBCINST = Path("/etc/odbcinst.ini")


def driver_library(driver_dir: Path) -> Path | None:
    """
    Return Driver 18's shared library under ``driver_dir`` (``lib/libmsodbcsql-18.*.so.*``), or None.

    :param driver_dir: the unpacked driver (``lib/`` and ``share/resources/`` side by side).
    """
    found = sorted(driver_dir.glob("lib/libmsodbcsql-18.*.so*"))
    return found[-1] if found else None


def _system_drivers_ini() -> str:
    """The text of the odbcinst.ini unixODBC would read without ``ODBCSYSINI`` (empty when none)."""
    current = os.environ.get("ODBCSYSINI")
    path = Path(current) / "odbcinst.ini" if current else SYSTEM_ODBCINST
    if not current:
        try:
            out = subprocess.run(["odbcinst", "-j"], capture_output=True, text=True, check=False).stdout
            for line in out.splitlines():
                if line.startswith("DRIVERS"):
                    path = Path(line.split(":", 1)[1].strip())
        except OSError:
            pass
    try:
        return path.read_text()
    except OSError:
        return ""


def register_test_drivers(driver_dir: Path, ini_dir: Path) -> str | None:
    """
    Register Driver 18 from ``driver_dir`` beside the system's drivers, for this process and its children.

    Writes ``ini_dir/odbcinst.ini`` (the system's sections, then ``[ODBC Driver 18 for SQL Server]``)
    and sets ``ODBCSYSINI``. Returns why Driver 18 is not registered, or None when it is.

    :param driver_dir: the unpacked driver (``make client-deps``).
    :param ini_dir: a directory of this test run for the generated ``odbcinst.ini``.
    """
    library = driver_library(driver_dir)
    if library is None:
        return (
            f"Microsoft's ODBC Driver 18 is not unpacked in {driver_dir} (make client-deps downloads the "
            "wheel mssql-python-odbc; it exists for Linux x86_64 only)"
        )
    ini = configparser.ConfigParser(interpolation=None, strict=False)
    ini.optionxform = str  # keep the keys' case, as unixODBC writes them
    ini.read_string(_system_drivers_ini())
    if ini.has_section(MS_ODBC_DRIVER):
        ini.remove_section(MS_ODBC_DRIVER)
    ini[MS_ODBC_DRIVER] = {
        "Description": "Microsoft ODBC Driver 18 for SQL Server (wheel mssql-python-odbc, tests only)",
        "Driver": str(library.resolve()),
        "UsageCount": "1",
    }
    text = io.StringIO()
    ini.write(text)
    ini_dir.mkdir(parents=True, exist_ok=True)
    target = ini_dir / "odbcinst.ini"
    scratch = ini_dir / f".odbcinst.ini.{os.getpid()}"
    scratch.write_text(text.getvalue())
    scratch.replace(target)
    os.environ["ODBCSYSINI"] = str(ini_dir)
    return None
