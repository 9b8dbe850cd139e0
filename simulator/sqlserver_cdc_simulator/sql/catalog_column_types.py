"""The type columns of ``sp_columns`` / ``sp_columns_100`` rows, for ODBC versions 2 and 3.

Sources: sp-columns-transact-sql.md (``@ODBCVer`` 2 or 3, default 2; SQL_DATA_TYPE equals DATA_TYPE
except for datetime and interval types; SQL_DATETIME_SUB only for those; SS_DATA_TYPE the TDS type),
docs/relational-databases/native-client-odbc-date-time/metadata-catalog.md (what SQLColumns returns
for date, time, smalldatetime, datetime, datetime2 and datetimeoffset: DATA_TYPE, COLUMN_SIZE =
PRECISION, BUFFER_LENGTH = LENGTH, DECIMAL_DIGITS = SCALE, SQL_DATA_TYPE, SQL_DATETIME_SUB,
SS_DATA_TYPE) and enhanced-date-and-time-type-behavior-with-previous-sql-server-versions-odbc.md
(clients before SQL Server 2008, which call ``sp_columns`` rather than ``sp_columns_100``, see date,
time, datetime2 and datetimeoffset as ``nvarchar`` of the longest literal). ODBC's codes are those
of sqlext.h (ODBC 2: SQL_DATE 9, SQL_TIMESTAMP 11; ODBC 3: SQL_TYPE_DATE 91, SQL_TYPE_TIMESTAMP 93,
SQL_DATETIME 9 with SQL_CODE_DATE 1 / SQL_CODE_TIMESTAMP 3) and msodbcsql.h (SQL_SS_TIME2 -154,
SQL_SS_TIMESTAMPOFFSET -155).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlserver_cdc_simulator import types as T

SQL_DATETIME = 9
SQL_CODE_DATE = 1
SQL_CODE_TIMESTAMP = 3
SQL_SS_TIME2 = -154
SQL_SS_TIMESTAMPOFFSET = -155
SQL_WVARCHAR = -9


@dataclass(frozen=True)
class _TypeCodes:
    """
    What ``sp_columns`` reports of a type whatever the column's length, precision or scale.

    :param data_type: the ODBC SQL type code (sqlext.h), for the types whose code does not depend on the
        ODBC version (None for the date/time types).
    :param ss_data_type: SS_DATA_TYPE, the TDS type of a NOT NULL column and of a nullable one (the "N"
        types: INTN 38, BITN 104, DECIMALN 106, NUMERICN 108, FLTN 109, MONEYN 110, DATETIMN 111;
        metadata-catalog.md gives 111 for nullable datetime and smalldatetime, 0 for the types of SQL
        Server 2008).
    :param size: (COLUMN_SIZE, BUFFER_LENGTH) of a fixed-size type; of a date/time type
        (metadata-catalog.md), COLUMN_SIZE without fractional seconds.
    """

    data_type: int | None
    ss_data_type: tuple[int, int] = (0, 0)
    size: tuple[int, int] = (0, 0)


_TYPE_CODES = {
    "bit": _TypeCodes(-7, (50, 104), (1, 1)),
    "tinyint": _TypeCodes(-6, (48, 38), (3, 1)),
    "smallint": _TypeCodes(5, (52, 38), (5, 2)),
    "int": _TypeCodes(4, (56, 38), (10, 4)),
    "bigint": _TypeCodes(-5, (63, 38), (19, 8)),
    "decimal": _TypeCodes(3, (55, 106)),
    "numeric": _TypeCodes(2, (63, 108)),
    "money": _TypeCodes(3, (60, 110), (19, 21)),
    "smallmoney": _TypeCodes(3, (122, 110), (10, 12)),
    "float": _TypeCodes(6, (62, 109), (15, 8)),
    "real": _TypeCodes(7, (59, 109), (7, 4)),
    "char": _TypeCodes(1),
    "varchar": _TypeCodes(12),
    "nchar": _TypeCodes(-8),
    "nvarchar": _TypeCodes(-9),
    "text": _TypeCodes(-1),
    "ntext": _TypeCodes(-10),
    "binary": _TypeCodes(-2),
    "varbinary": _TypeCodes(-3),
    "image": _TypeCodes(-4),
    "timestamp": _TypeCodes(-2, size=(8, 8)),
    "uniqueidentifier": _TypeCodes(-11, size=(36, 16)),
    "date": _TypeCodes(None, size=(10, 6)),
    "time": _TypeCodes(None, size=(8, 10)),
    "smalldatetime": _TypeCodes(None, (58, 111), (16, 16)),
    "datetime": _TypeCodes(None, (61, 111), (23, 16)),
    "datetime2": _TypeCodes(None, size=(19, 16)),
    "datetimeoffset": _TypeCodes(None, size=(26, 20)),
}
#: the types of other columns (sql_variant, xml, ...): nvarchar's code, no sizes
_OTHER_TYPE = _TypeCodes(SQL_WVARCHAR)


@dataclass(frozen=True)
class CatalogType:
    """The type columns of one ``sp_columns`` row."""

    data_type: int
    precision: int
    length: int
    scale: int | None
    radix: int | None
    sql_data_type: int
    datetime_sub: int | None
    char_octet_length: int | None
    ss_data_type: int


def _fraction_digits(t: Any) -> int:
    return 7 if t.scale is None else t.scale


def _temporal(name: str, t: Any, odbc_version: int) -> CatalogType:
    """date, time, smalldatetime, datetime, datetime2, datetimeoffset as ``sp_columns_100`` reports them."""
    size, length = _TYPE_CODES[name].size
    scale = {"date": 0, "smalldatetime": 0, "datetime": 3}.get(name)
    if scale is None:
        scale = _fraction_digits(t)
        size += scale + 1 if scale else 0
    if name in ("time", "datetimeoffset"):  # driver-specific types: SQL_DATA_TYPE is DATA_TYPE, no subtype
        code = SQL_SS_TIME2 if name == "time" else SQL_SS_TIMESTAMPOFFSET
        return CatalogType(code, size, length, scale, None, code, None, None, 0)
    if name == "date":
        code, sub = (91 if odbc_version >= 3 else 9), SQL_CODE_DATE
    else:
        code, sub = (93 if odbc_version >= 3 else 11), SQL_CODE_TIMESTAMP
    nullable_ss_data_type = _TYPE_CODES[name].ss_data_type[1]
    return CatalogType(code, size, length, scale, None, SQL_DATETIME, sub, None, nullable_ss_data_type)


def _downlevel_temporal(name: str, t: Any) -> CatalogType:
    """date, time, datetime2, datetimeoffset through ``sp_columns``: nvarchar of the longest literal."""
    size, _ = _TYPE_CODES[name].size
    if name != "date":
        digits = _fraction_digits(t)
        size += digits + 1 if digits else 0
    return CatalogType(SQL_WVARCHAR, size, size * 2, None, None, SQL_WVARCHAR, None, size * 2, 0)


def catalog_type(t: Any, *, nullable: bool, odbc_version: int, procedure_100: bool) -> CatalogType:
    """
    Return the type columns of an ``sp_columns`` (or ``sp_columns_100``) row for a column of type ``t``.

    :param t: the column's SqlType.
    :param nullable: whether the column takes NULL (SS_DATA_TYPE is then the nullable TDS type).
    :param odbc_version: the procedure's ``@ODBCVer`` (2 or 3).
    :param procedure_100: ``sp_columns_100`` (the types of SQL Server 2008 as themselves).
    """
    name = t.name
    if name in ("date", "time", "datetime2", "datetimeoffset") and not procedure_100:
        return _downlevel_temporal(name, t)
    codes = _TYPE_CODES.get(name, _OTHER_TYPE)
    if codes.data_type is None:
        temporal = _temporal(name, t, odbc_version)
        if name in ("datetime", "smalldatetime") and not nullable:
            return CatalogType(**{**temporal.__dict__, "ss_data_type": codes.ss_data_type[0]})
        return temporal
    code = codes.data_type
    ss_data_type = codes.ss_data_type[1 if nullable else 0]
    is_max = getattr(t, "length", None) == T.MAX
    if name in T.STRING_TYPES or (name in T.BINARY_TYPES and name != "timestamp"):
        precision = 0 if is_max else (t.length or 0)
        length = 0 if is_max else (t.length or 0) * (2 if name in T.NCHAR_TYPES else 1)
        return CatalogType(code, precision, length, None, None, code, None, None if is_max else length, 0)
    if name in ("decimal", "numeric"):
        return CatalogType(code, t.precision, t.precision + 2, t.scale, 10, code, None, None, ss_data_type)
    precision, length = codes.size
    scale = 0 if name in T.INTEGER_TYPES else 4 if name in ("money", "smallmoney") else None
    radix = 10 if name in (T.INTEGER_TYPES - {"bit"}) | {"money", "smallmoney"} else None
    radix = 2 if name in T.FLOAT_TYPES else radix
    return CatalogType(code, precision, length, scale, radix, code, None, None, ss_data_type)
