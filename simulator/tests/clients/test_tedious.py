"""tedious 19.2.2 (the Node.js TDS driver, from npm) against the simulator.

``tedious_battery.js`` runs every check in one Node process; each test here asserts one check's
outcome. tedious defaults to ``encrypt: true``; it names transactions in the TDS transaction-manager
request (the name's length in bytes).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from client_battery_support import CLIENTS, BatteryChecks, require_program

NODE_MODULES = CLIENTS / "node" / "node_modules"
BATTERY = Path(__file__).with_name("tedious_battery.js")


# Shaped like test_mssql_jdbc.TestJdbcBattery on purpose: each client states its own expected outcomes, the
# tests are BatteryChecks' (issue 34 item 6).
class TestTediousBattery(BatteryChecks):
    """What tedious's battery prints."""

    OUTCOMES = {
        "login_tls_default": "clientdb 16.0.4120.1",
        # encrypt: false sends ENCRYPT_OFF: SQL Server still encrypts the login packet
        "login_without_tls_request": "1",
        "serverproperty_sql_variant": "Variant,Variant|16.0.4120.1|number:3",
        # named transactions through the transaction-manager request
        "named_transaction": "1|0|1",
        # catalog procedures and table variables
        "metadata_procedures": "items:TABLE|id|id:int,name:nvarchar|3",
    }
    TYPES_EXPECTED = [
        "-2147483648",
        "255",
        "-32768",
        "12345678901234.568",  # tedious returns decimals as JavaScript numbers (doubles)
        "-214748.3648",
        "9999-12-31",
        "\u00e9\U0001f600",
        "00ff",
        "true",
        "6F9619FF-8B86-D011-B42D-00C04FD430C8",
        "",  # NULL
    ]

    ERROR_THEN_USABLE = [
        "208/16/Invalid object name 'dbo.no_such_table'.",
        "2627",
        "3621",  # "The statement has been terminated."
        "42",
    ]

    @classmethod
    def command(cls) -> tuple[list[str], dict[str, str] | None]:
        node = require_program("node")
        if not (NODE_MODULES / "tedious").is_dir():
            pytest.skip(f"tedious is not installed in {NODE_MODULES}: run `make client-deps`")
        return [node, str(BATTERY)], {**os.environ, "NODE_PATH": str(NODE_MODULES), "NODE_NO_WARNINGS": "1"}
