"""
The type columns of sp_columns / sp_columns_100 rows, for ODBC versions 2 and 3, as Microsoft documents them.

Sources: docs/relational-databases/system-stored-procedures/sp-columns-transact-sql.md (@ODBCVer 2 or 3,
default 2; SQL_DATA_TYPE equals DATA_TYPE except for datetime types; SQL_DATETIME_SUB only for those),
docs/relational-databases/native-client-odbc-date-time/metadata-catalog.md (SQLColumns' DATA_TYPE,
COLUMN_SIZE, BUFFER_LENGTH, DECIMAL_DIGITS, SQL_DATA_TYPE, SQL_DATETIME_SUB and SS_DATA_TYPE of the date and
time types) and enhanced-date-and-time-type-behavior-with-previous-sql-server-versions-odbc.md (clients
before SQL Server 2008 call sp_columns and see date/time/datetime2/datetimeoffset as nvarchar).
"""

from __future__ import annotations

from typing import Any

import pytest

TYPES = (
    "c_date date NULL, c_time time(7) NULL, c_time0 time(0) NULL, c_sdt smalldatetime NULL, c_dt datetime NULL, "
    "c_dt_nn datetime NOT NULL, c_dt2 datetime2(7) NULL, c_dt2_3 datetime2(3) NULL, c_dto datetimeoffset(7) NULL, "
    "c_int int NOT NULL, c_int_n int NULL, c_dec decimal(12,3) NULL, c_nv nvarchar(20) NULL, c_guid uniqueidentifier NULL"
)
FIELDS = (
    "DATA_TYPE",
    "TYPE_NAME",
    "PRECISION",
    "LENGTH",
    "SCALE",
    "SQL_DATA_TYPE",
    "SQL_DATETIME_SUB",
    "SS_DATA_TYPE",
)

# metadata-catalog.md, SQLColumns (ODBC 3): SQL_TYPE_DATE 91, SQL_SS_TIME2 -154, SQL_TYPE_TIMESTAMP 93,
# SQL_SS_TIMESTAMPOFFSET -155; SQL_DATETIME 9 with SQL_CODE_DATE 1 / SQL_CODE_TIMESTAMP 3.
ODBC3 = {
    "c_date": (91, "date", 10, 6, 0, 9, 1, 0),
    "c_time": (-154, "time", 16, 10, 7, -154, None, 0),
    "c_time0": (-154, "time", 8, 10, 0, -154, None, 0),
    "c_sdt": (93, "smalldatetime", 16, 16, 0, 9, 3, 111),
    "c_dt": (93, "datetime", 23, 16, 3, 9, 3, 111),
    "c_dt_nn": (93, "datetime", 23, 16, 3, 9, 3, 61),  # NOT NULL: the TDS type DATETIME, not DATETIMN
    "c_dt2": (93, "datetime2", 27, 16, 7, 9, 3, 0),
    "c_dt2_3": (93, "datetime2", 23, 16, 3, 9, 3, 0),
    "c_dto": (-155, "datetimeoffset", 34, 20, 7, -155, None, 0),
    "c_int": (4, "int", 10, 4, 0, 4, None, 56),
    "c_int_n": (4, "int", 10, 4, 0, 4, None, 38),
    "c_dec": (3, "decimal", 12, 14, 3, 3, None, 106),
    "c_nv": (-9, "nvarchar", 20, 40, None, -9, None, 0),
    "c_guid": (-11, "uniqueidentifier", 36, 16, None, -11, None, 0),
}
# ODBC 2 (the default): SQL_DATE 9 and SQL_TIMESTAMP 11 instead of the ODBC 3 codes; the rest as ODBC 3.
ODBC2 = {
    **ODBC3,
    "c_date": (9, *ODBC3["c_date"][1:]),
    **{c: (11, *ODBC3[c][1:]) for c in ("c_sdt", "c_dt", "c_dt_nn", "c_dt2", "c_dt2_3")},
}
# sp_columns (what clients before SQL Server 2008 call): the new types as nvarchar of the longest literal.
DOWNLEVEL = {
    **ODBC2,
    "c_date": (-9, "date", 10, 20, None, -9, None, 0),
    "c_time": (-9, "time", 16, 32, None, -9, None, 0),
    "c_time0": (-9, "time", 8, 16, None, -9, None, 0),
    "c_dt2": (-9, "datetime2", 27, 54, None, -9, None, 0),
    "c_dt2_3": (-9, "datetime2", 23, 46, None, -9, None, 0),
    "c_dto": (-9, "datetimeoffset", 34, 68, None, -9, None, 0),
}


@pytest.fixture
def cursor(sqlserver_simulator: Any) -> Any:
    sqlserver_simulator.execute("CREATE DATABASE cat")
    sqlserver_simulator.execute(f"CREATE TABLE dbo.typed ({TYPES})", database="cat")
    return sqlserver_simulator.connect("cat").cursor()


def _rows(cursor: Any, sql: str) -> dict[str, tuple[Any, ...]]:
    return {r.COLUMN_NAME: tuple(getattr(r, f) for f in FIELDS) for r in cursor.execute(sql).fetchall()}


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("EXEC sp_columns_100 @table_name = N'typed', @ODBCVer = 3", ODBC3),
        ("EXEC sp_columns_100 N'typed', N'dbo', NULL, NULL, 0, 3", ODBC3),  # @NameScope before @ODBCVer
        ("EXEC sp_columns_100 @table_name = N'typed'", ODBC2),
        ("EXEC sp_columns_100 @table_name = N'typed', @ODBCVer = 2", ODBC2),
        ("EXEC sp_columns @table_name = N'typed'", DOWNLEVEL),
        (
            "EXEC sp_columns @table_name = N'typed', @ODBCVer = 3",
            {**DOWNLEVEL, **{c: (93, *ODBC3[c][1:]) for c in ("c_sdt", "c_dt", "c_dt_nn")}},
        ),
    ],
    ids=["100-odbc3", "100-odbc3-positional", "100-default", "100-odbc2", "sp_columns", "sp_columns-odbc3"],
)
def test_every_type_row_matches_the_documentation(cursor: Any, sql: str, expected: dict) -> None:
    assert _rows(cursor, sql) == expected
