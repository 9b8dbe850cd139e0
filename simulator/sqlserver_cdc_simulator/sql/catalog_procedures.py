"""The ODBC/JDBC catalog procedures drivers call for their metadata functions.

``sp_tables``, ``sp_columns`` / ``sp_columns_100``, ``sp_pkeys``, ``sp_fkeys``, ``sp_statistics`` /
``sp_statistics_100`` and ``sp_special_columns`` / ``sp_special_columns_100``, with the result
columns of their reference pages (docs/relational-databases/system-stored-procedures/sp-tables-transact-sql.md,
sp-columns-transact-sql.md, sp-pkeys-transact-sql.md, sp-fkeys-transact-sql.md,
sp-statistics-transact-sql.md, sp-special-columns-transact-sql.md). Name arguments take LIKE
patterns where the pages say so. The simulator has no views or foreign keys: ``sp_tables`` lists
tables (and only ``TABLE``/``SYSTEM TABLE`` types match), ``sp_fkeys`` returns no rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.extensions import (
    ProcedureArgs,
    ProcedureResult,
    ResultColumn,
    Rowset,
    result_columns,
)
from sqlserver_cdc_simulator.storage import Table

from .catalog_column_types import catalog_type
from .compiler import like_regex
from .context import ExecutionContext


def _matches(pattern: Any, value: str) -> bool:
    return pattern is None or like_regex(str(pattern), None).match(value) is not None


def _tables(
    session: ExecutionContext, args: ProcedureArgs, name_at: int, owner_at: int, db_at: int
) -> Iterator[Table]:
    """The tables of the current database matching the name / owner / qualifier arguments."""
    qualifier = args.get("table_qualifier", db_at)
    db = session.current_db()
    if qualifier not in (None, "") and str(qualifier).lower() != db.name.lower():
        return
    name = args.get("table_name", name_at)
    owner = args.get("table_owner", owner_at)
    for table in db.all_tables():
        if _matches(name, table.name) and _matches(owner, table.schema.name):
            yield table


# the first columns of every catalog procedure's result: which table a row is about
_TABLE_ID = result_columns("TABLE_QUALIFIER sysname, TABLE_OWNER sysname, TABLE_NAME sysname")


def sp_tables(session: ExecutionContext, args: ProcedureArgs) -> ProcedureResult:
    """sp_tables [@table_name], [@table_owner], [@table_qualifier], [@table_type]."""
    wanted = args.get("table_type", 3)
    types = {"TABLE"} if not wanted else {w.strip().strip("'\"").upper() for w in str(wanted).split(",")}
    cols = _TABLE_ID + result_columns(
        """
        TABLE_TYPE varchar(32), REMARKS varchar(254)
        """
    )
    db = session.current_db()
    rows = []
    if "TABLE" in types:
        rows = [(db.name, t.schema.name, t.name, "TABLE", None) for t in _tables(session, args, 0, 1, 2)]
    rows.sort(key=lambda r: (r[3], r[0], r[1], r[2]))
    return ProcedureResult([Rowset(cols, rows)])


def _column_row(
    db_name: str, table: Table, ordinal: int, col: Any, *, odbc_version: int, procedure_100: bool
) -> tuple[Any, ...]:
    t = catalog_type(col.type, nullable=col.nullable, odbc_version=odbc_version, procedure_100=procedure_100)
    type_name = col.type.name + (" identity" if col.identity is not None else "")
    return (
        db_name,
        table.schema.name,
        table.name,
        col.name,
        t.data_type,
        type_name,
        t.precision,
        t.length,
        t.scale,
        t.radix,
        1 if col.nullable else 0,
        None,
        f"({col.default_sql})" if col.default_sql else None,
        t.sql_data_type,
        t.datetime_sub,
        t.char_octet_length,
        ordinal,
        "YES" if col.nullable else "NO",
        0,
        0,
        1 if col.computed else 0,
        1 if col.identity is not None else 0,
        None,
        None,
        None,
        None,
        None,
        None,
        t.ss_data_type,
    )


_COLUMNS_100 = _TABLE_ID + result_columns(
    """
    COLUMN_NAME sysname, DATA_TYPE smallint, TYPE_NAME sysname, PRECISION int, LENGTH int,
    SCALE smallint, RADIX smallint, NULLABLE smallint, REMARKS varchar(254),
    COLUMN_DEF nvarchar(4000), SQL_DATA_TYPE smallint, SQL_DATETIME_SUB smallint,
    CHAR_OCTET_LENGTH int, ORDINAL_POSITION int, IS_NULLABLE varchar(254),
    SS_IS_SPARSE smallint, SS_IS_COLUMN_SET smallint, SS_IS_COMPUTED smallint,
    SS_IS_IDENTITY smallint, SS_UDT_CATALOG_NAME nvarchar(128),
    SS_UDT_SCHEMA_NAME nvarchar(128), SS_UDT_ASSEMBLY_TYPE_NAME nvarchar(max),
    SS_XML_SCHEMACOLLECTION_CATALOG_NAME nvarchar(128),
    SS_XML_SCHEMACOLLECTION_SCHEMA_NAME nvarchar(128),
    SS_XML_SCHEMACOLLECTION_NAME nvarchar(128), SS_DATA_TYPE tinyint
    """
)


def sp_columns(session: ExecutionContext, args: ProcedureArgs, extended: bool) -> ProcedureResult:
    """sp_columns / sp_columns_100 @table_name, [@table_owner], [@table_qualifier], [@column_name], [@ODBCVer].

    sp_columns_100 takes ``@NameScope`` before ``@ODBCVer``; both default to ODBC version 2.
    """
    column_pattern = args.get("column_name", 3)
    odbc_version = int(args.get("ODBCVer", 5 if extended else 4) or 2)
    db = session.current_db()
    rows = []
    for table in _tables(session, args, 0, 1, 2):
        for ordinal, col in enumerate(table.columns, start=1):
            if _matches(column_pattern, col.name):
                rows.append(
                    _column_row(
                        db.name, table, ordinal, col, odbc_version=odbc_version, procedure_100=extended
                    )
                )
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[16]))
    cols = _COLUMNS_100 if extended else _COLUMNS_100[:18] + [_COLUMNS_100[-1]]
    if not extended:
        rows = [r[:18] + (r[-1],) for r in rows]
    return ProcedureResult([Rowset(cols, rows)])


def _primary_key_columns(table: Table) -> Iterator[tuple[int, Any, str]]:
    """(position in the key, column, constraint name) of *table*'s primary key columns."""
    for ix in table.indexes:
        if ix.kind == "PRIMARY KEY":
            for seq, cname in enumerate(ix.columns, start=1):
                yield seq, table.columns[table.colmap[cname.lower()]], ix.name


def sp_pkeys(session: ExecutionContext, args: ProcedureArgs) -> ProcedureResult:
    """sp_pkeys @table_name, [@table_owner], [@table_qualifier]."""
    cols = _TABLE_ID + result_columns(
        """
        COLUMN_NAME sysname, KEY_SEQ smallint, PK_NAME sysname
        """
    )
    db = session.current_db()
    rows = [
        (db.name, table.schema.name, table.name, col.name, seq, pk_name)
        for table in _tables(session, args, 0, 1, 2)
        for seq, col, pk_name in _primary_key_columns(table)
    ]
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[4]))
    return ProcedureResult([Rowset(cols, rows)])


def sp_fkeys(session: ExecutionContext, args: ProcedureArgs) -> ProcedureResult:
    """sp_fkeys: the simulator has no FOREIGN KEY constraints, so no rows (with the documented columns)."""
    names = "PKTABLE_QUALIFIER PKTABLE_OWNER PKTABLE_NAME PKCOLUMN_NAME FKTABLE_QUALIFIER FKTABLE_OWNER"
    names += " FKTABLE_NAME FKCOLUMN_NAME KEY_SEQ UPDATE_RULE DELETE_RULE FK_NAME PK_NAME DEFERRABILITY"
    types = {
        "KEY_SEQ": T.SMALLINT,
        "UPDATE_RULE": T.SMALLINT,
        "DELETE_RULE": T.SMALLINT,
        "DEFERRABILITY": T.SMALLINT,
    }
    cols = [ResultColumn(n, types.get(n, T.SYSNAME)) for n in names.split()]
    return ProcedureResult([Rowset(cols, [])])


def sp_statistics(session: ExecutionContext, args: ProcedureArgs) -> ProcedureResult:
    """sp_statistics @table_name, [@table_owner], [@table_qualifier]: a table row, then one per index column."""
    cols = _TABLE_ID + result_columns(
        """
        NON_UNIQUE smallint, INDEX_QUALIFIER sysname, INDEX_NAME sysname, TYPE smallint,
        SEQ_IN_INDEX smallint, COLUMN_NAME sysname, COLLATION char(1), CARDINALITY int,
        PAGES int, FILTER_CONDITION varchar(128)
        """
    )
    db = session.current_db()
    rows: list[tuple[Any, ...]] = []
    for table in _tables(session, args, 0, 1, 2):
        rows.append(
            (db.name, table.schema.name, table.name, None, None, None, 0, None, None, None, None, None, None)
        )
        for ix in table.indexes:
            for seq, cname in enumerate(ix.columns, start=1):
                rows.append(
                    (
                        db.name,
                        table.schema.name,
                        table.name,
                        0 if ix.unique else 1,
                        table.name,
                        ix.name,
                        1 if ix.clustered else 3,
                        seq,
                        table.columns[table.colmap[cname.lower()]].name,
                        "A",
                        None,
                        None,
                        None,
                    )
                )
    return ProcedureResult([Rowset(cols, rows)])


def sp_special_columns(
    session: ExecutionContext, args: ProcedureArgs, procedure_100: bool
) -> ProcedureResult:
    """sp_special_columns @table_name, ..., [@ODBCVer]: the primary key's columns (the best row identifier)."""
    cols = result_columns(
        """
        SCOPE smallint, COLUMN_NAME sysname, DATA_TYPE smallint, TYPE_NAME sysname,
        PRECISION int, LENGTH int, SCALE smallint, PSEUDO_COLUMN smallint
        """
    )
    rows = []
    for table in _tables(session, args, 0, 1, 2):
        for _seq, col, _pk_name in _primary_key_columns(table):
            odbc_version = int(args.get("ODBCVer", 6) or 2)
            full = _column_row("", table, 0, col, odbc_version=odbc_version, procedure_100=procedure_100)
            rows.append((1, col.name, full[4], full[5], full[6], full[7], full[8], 1))
    return ProcedureResult([Rowset(cols, rows)])


CATALOG_PROCEDURES: dict[str, Callable[[Any, ProcedureArgs], Any]] = {
    "sp_tables": sp_tables,
    "sp_columns": lambda s, a: sp_columns(s, a, extended=False),
    "sp_columns_100": lambda s, a: sp_columns(s, a, extended=True),
    "sp_pkeys": sp_pkeys,
    "sp_fkeys": sp_fkeys,
    "sp_statistics": sp_statistics,
    "sp_statistics_100": sp_statistics,
    "sp_special_columns": lambda s, a: sp_special_columns(s, a, procedure_100=False),
    "sp_special_columns_100": lambda s, a: sp_special_columns(s, a, procedure_100=True),
}
