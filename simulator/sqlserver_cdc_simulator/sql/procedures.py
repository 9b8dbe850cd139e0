"""Built-in system stored procedures (those drivers call, and a few catalog helpers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.errors import SqlError
from sqlserver_cdc_simulator.extensions import (
    ProcedureArgs,
    ProcedureResult,
    ResultColumn,
    Rowset,
)
from sqlserver_cdc_simulator.version import BUILD, MAJOR, MINOR, VERSION_TEXT

from .catalog_procedures import CATALOG_PROCEDURES
from .context import ExecutionContext

_TYPEINFO_COLUMNS = [
    ResultColumn("TYPE_NAME", T.SYSNAME, False),
    ResultColumn("DATA_TYPE", T.SMALLINT, False),
    ResultColumn("PRECISION", T.INT),
    ResultColumn("LITERAL_PREFIX", T.varchar(32)),
    ResultColumn("LITERAL_SUFFIX", T.varchar(32)),
    ResultColumn("CREATE_PARAMS", T.varchar(32)),
    ResultColumn("NULLABLE", T.SMALLINT, False),
    ResultColumn("CASE_SENSITIVE", T.SMALLINT, False),
    ResultColumn("SEARCHABLE", T.SMALLINT, False),
    ResultColumn("UNSIGNED_ATTRIBUTE", T.SMALLINT),
    ResultColumn("MONEY", T.SMALLINT, False),
    ResultColumn("AUTO_INCREMENT", T.SMALLINT),
    ResultColumn("LOCAL_TYPE_NAME", T.SYSNAME),
    ResultColumn("MINIMUM_SCALE", T.SMALLINT),
    ResultColumn("MAXIMUM_SCALE", T.SMALLINT),
    ResultColumn("SQL_DATA_TYPE", T.SMALLINT, False),
    ResultColumn("SQL_DATETIME_SUB", T.SMALLINT),
    ResultColumn("NUM_PREC_RADIX", T.INT),
    ResultColumn("INTERVAL_PRECISION", T.SMALLINT),
    ResultColumn("USERTYPE", T.SMALLINT),
]

# (TYPE_NAME, DATA_TYPE, PRECISION, prefix, suffix, create_params, case_sensitive, unsigned, money, auto_inc, min_scale, max_scale, sql_data_type, datetime_sub, radix, usertype)
_TYPEINFO = [
    ("sql_variant", -150, 8000, None, None, None, 0, None, 0, None, 0, 0, -150, None, 10, 0),
    ("uniqueidentifier", -11, 36, "'", "'", None, 0, None, 0, None, None, None, -11, None, None, 0),
    ("ntext", -10, 1073741823, "N'", "'", None, 0, None, 0, None, None, None, -10, None, None, 0),
    ("xml", -152, 0, "N'", "'", None, 1, None, 0, None, None, None, -152, None, None, 0),
    ("nvarchar", -9, 4000, "N'", "'", "max length", 0, None, 0, None, None, None, -9, None, None, 0),
    ("sysname", -9, 128, "N'", "'", None, 0, None, 0, None, None, None, -9, None, None, 18),
    ("nchar", -8, 4000, "N'", "'", "length", 0, None, 0, None, None, None, -8, None, None, 0),
    ("bit", -7, 1, None, None, None, 0, None, 0, None, 0, 0, -7, None, None, 16),
    ("tinyint", -6, 3, None, None, None, 0, 1, 0, 0, 0, 0, -6, None, 10, 5),
    ("tinyint identity", -6, 3, None, None, None, 0, 1, 0, 1, 0, 0, -6, None, 10, 5),
    ("bigint", -5, 19, None, None, None, 0, 0, 0, 0, 0, 0, -5, None, 10, 0),
    ("bigint identity", -5, 19, None, None, None, 0, 0, 0, 1, 0, 0, -5, None, 10, 0),
    ("image", -4, 2147483647, "0x", None, None, 0, None, 0, None, None, None, -4, None, None, 20),
    ("varbinary", -3, 8000, "0x", None, "max length", 0, None, 0, None, None, None, -3, None, None, 4),
    ("binary", -2, 8000, "0x", None, "length", 0, None, 0, None, None, None, -2, None, None, 3),
    ("timestamp", -2, 8, "0x", None, None, 0, None, 0, None, None, None, -2, None, None, 80),
    ("text", -1, 2147483647, "'", "'", None, 0, None, 0, None, None, None, -1, None, None, 19),
    ("char", 1, 8000, "'", "'", "length", 0, None, 0, None, None, None, 1, None, None, 1),
    ("numeric", 2, 38, None, None, "precision,scale", 0, 0, 0, 0, 0, 38, 2, None, 10, 10),
    ("numeric() identity", 2, 38, None, None, "precision", 0, 0, 0, 1, 0, 0, 2, None, 10, 10),
    ("decimal", 3, 38, None, None, "precision,scale", 0, 0, 0, 0, 0, 38, 3, None, 10, 24),
    ("money", 3, 19, "$", None, None, 0, 0, 1, 0, 4, 4, 3, None, 10, 11),
    ("smallmoney", 3, 10, "$", None, None, 0, 0, 1, 0, 4, 4, 3, None, 10, 21),
    ("decimal() identity", 3, 38, None, None, "precision", 0, 0, 0, 1, 0, 0, 3, None, 10, 24),
    ("int", 4, 10, None, None, None, 0, 0, 0, 0, 0, 0, 4, None, 10, 7),
    ("int identity", 4, 10, None, None, None, 0, 0, 0, 1, 0, 0, 4, None, 10, 7),
    ("smallint", 5, 5, None, None, None, 0, 0, 0, 0, 0, 0, 5, None, 10, 6),
    ("smallint identity", 5, 5, None, None, None, 0, 0, 0, 1, 0, 0, 5, None, 10, 6),
    ("float", 6, 53, None, None, None, 0, 0, 0, 0, None, None, 6, None, 2, 8),
    ("real", 7, 24, None, None, None, 0, 0, 0, 0, None, None, 7, None, 2, 23),
    ("varchar", 12, 8000, "'", "'", "max length", 0, None, 0, None, None, None, 12, None, None, 2),
    ("date", 91, 10, "'", "'", None, 0, None, 0, None, None, None, 9, 1, None, 0),
    ("time", 92, 16, "'", "'", "scale", 0, None, 0, None, 0, 7, -154, 0, None, 0),
    ("datetime2", 93, 27, "'", "'", "scale", 0, None, 0, None, 0, 7, 9, 3, None, 0),
    ("datetime", 93, 23, "'", "'", None, 0, None, 0, None, 3, 3, 9, 3, None, 12),
    ("smalldatetime", 93, 16, "'", "'", None, 0, None, 0, None, 0, 0, 9, 3, None, 22),
    ("datetimeoffset", -155, 34, "'", "'", "scale", 0, None, 0, None, 0, 7, -155, 0, None, 0),
]


def sp_datatype_info(session: ExecutionContext, args: ProcedureArgs) -> ProcedureResult:
    """Type information for ODBC drivers (``sp_datatype_info_100 @data_type, @ODBCVer``)."""
    wanted = args.get("data_type", 0)
    rows = []
    for r in _TYPEINFO:
        name, dt, prec, pre, suf, cp, cs, uns, money, auto, mins, maxs, sqldt, sub, radix, ut = r
        if wanted not in (None, 0) and dt != wanted:
            continue
        rows.append(
            (
                name,
                dt,
                prec,
                pre,
                suf,
                cp,
                1,
                cs,
                3,
                uns,
                money,
                auto,
                name,
                mins,
                maxs,
                sqldt,
                sub,
                radix,
                None,
                ut,
            )
        )
    return ProcedureResult([Rowset(list(_TYPEINFO_COLUMNS), rows)])


def sp_server_info(session: ExecutionContext, args: ProcedureArgs) -> ProcedureResult:
    cols = [
        ResultColumn("attribute_id", T.INT, False),
        ResultColumn("attribute_name", T.varchar(60), False),
        ResultColumn("attribute_value", T.varchar(255)),
    ]
    rows = [
        (1, "DBMS_NAME", "Microsoft SQL Server"),
        (2, "DBMS_VER", f"Microsoft SQL Server 2022 - {VERSION_TEXT}"),
        (500, "SYS_SPROC_VERSION", f"{MAJOR}.{MINOR:02d}.{BUILD}"),
    ]
    return ProcedureResult([Rowset(cols, rows)])


def sp_addrolemember(session: ExecutionContext, args: ProcedureArgs) -> Any:
    role = args.get("rolename", 0)
    member = args.get("membername", 1)
    return session.nested_batch(f"ALTER ROLE [{role}] ADD MEMBER [{member}]")


def sp_getapplock(session: ExecutionContext, args: ProcedureArgs) -> ProcedureResult:
    raise SqlError(40517, 16, 1, "The SQL Server simulator does not support sp_getapplock.")


BUILTIN: dict[str, Callable[[Any, ProcedureArgs], Any]] = {
    "sp_datatype_info_100": sp_datatype_info,
    "sp_datatype_info_90": sp_datatype_info,
    "sp_datatype_info": sp_datatype_info,
    "sp_server_info": sp_server_info,
    "sp_getapplock": sp_getapplock,
}


def _wrap_nested(fn: Callable[[Any, ProcedureArgs], Any]) -> Callable[[Any, ProcedureArgs], Any]:
    def call(session: ExecutionContext, args: ProcedureArgs) -> Any:
        def gen() -> Any:
            yield from fn(session, args)
            return ProcedureResult()

        return gen()

    return call


BUILTIN["sp_addrolemember"] = _wrap_nested(sp_addrolemember)
BUILTIN.update(CATALOG_PROCEDURES)
