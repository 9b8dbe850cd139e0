"""FROM items: user tables, system catalog views, registered views and table-valued functions.

Catalog views are computed from the engine's metadata when a query reads them:
``sys.databases``, ``sys.schemas``, ``sys.tables``, ``sys.objects``, ``sys.columns``,
``sys.types``, ``sys.indexes``, ``sys.index_columns``, ``sys.key_constraints``,
``sys.database_principals``, ``sys.server_principals``, ``sys.database_role_members``,
``sys.dm_tran_database_transactions``, ``sys.dm_tran_session_transactions``,
``sys.dm_exec_sessions``, ``sys.system_views``, ``INFORMATION_SCHEMA.COLUMNS``,
``INFORMATION_SCHEMA.TABLES``, ``INFORMATION_SCHEMA.TABLE_CONSTRAINTS``,
``INFORMATION_SCHEMA.KEY_COLUMN_USAGE``, ``INFORMATION_SCHEMA.SCHEMATA``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from sqlglot import exp

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.errors import SqlError, invalid_object, not_supported
from sqlserver_cdc_simulator.extensions import (
    ResultColumn,
    Rowset,
    TypedValue,
    result_columns,
)
from sqlserver_cdc_simulator.log import lsn_to_numeric
from sqlserver_cdc_simulator.storage import Database, Table
from sqlserver_cdc_simulator.types import SqlType
from sqlserver_cdc_simulator.values import round_datetime_ticks

from . import computed_columns
from .compiler import Compiler
from .context import ExecutionContext
from .dialect import table_name
from .empty_catalog_views import EMPTY_INFORMATION_SCHEMA_VIEWS, EMPTY_SYS_VIEWS
from .expressions import Scope, Source
from .query import FromItem, cte_item
from .system_object_names import INFORMATION_SCHEMA_VIEWS, SYSTEM_FUNCTIONS, SYSTEM_VIEWS


def table_source(
    session: ExecutionContext, node: exp.Table, alias: str, hints: list[str], outer: Scope | None = None
) -> Any:
    this = node.this
    schema = node.args.get("db").name if node.args.get("db") else None
    catalog = node.args.get("catalog").name if node.args.get("catalog") else None
    if isinstance(this, exp.Anonymous):
        return _table_function(session, node, this, schema, catalog, alias, outer)
    name = table_name(node)
    if schema is None and catalog is None:
        item = cte_item(session, name, alias)
        if item is not None:
            return item
    written = ".".join(p for p in (catalog, schema, name) if p)
    if name.startswith("#"):
        catalog, schema, name = "tempdb", "dbo", session.temp_table_name(name)
    dbname = catalog or session.database
    db = session.engine.databases.get(dbname.lower())
    if db is None:
        raise invalid_object(written)
    # user tables first
    table = None
    if schema is None:
        table = db.table(session.default_schema(), name) or db.table("dbo", name)
    else:
        table = db.table(schema, name)
    if table is not None:
        return FromItem(_table_src(table, alias, name), _table_rows(session, db, table, hints), table)
    # registered views
    reg = session.engine.registry
    for key in (
        [f"{db.name}.{schema}.{name}", f"{schema}.{name}"]
        if schema
        else [f"{db.name}.dbo.{name}", name, f"sys.{name}"]
    ):
        fn = reg.find_view(key)
        if fn is not None:
            return _rowset_item(alias or name, name, lambda fn=fn: fn(session, db))
    # built-in catalogs
    sch = (schema or "").lower()
    view = None
    if sch in ("sys", "") or (sch == "dbo" and name.lower().startswith("sys")):
        view = SYS_VIEWS.get(name.lower())
    elif sch == "information_schema":
        view = INFO_VIEWS.get(name.lower())
    if view is not None:
        return _rowset_item(alias or name, name, lambda: view(session, db))
    if sch in ("sys", "") and name.lower() in SYSTEM_VIEWS:
        raise not_supported(f"the system view sys.{name}")
    if sch == "information_schema" and name.lower() in INFORMATION_SCHEMA_VIEWS:
        raise not_supported(f"the view INFORMATION_SCHEMA.{name.upper()}")
    raise invalid_object(written)


def _table_src(table: Table, alias: str, name: str) -> Source:
    cols = [ResultColumn(c.name, c.type, c.nullable) for c in table.columns]
    return Source((alias or name).lower(), table.name, cols)


def _table_rows(session: ExecutionContext, db: Database, table: Table, hints: list[str]) -> Callable[[], Any]:
    hold = any(
        h in ("HOLDLOCK", "SERIALIZABLE", "REPEATABLEREAD", "UPDLOCK", "XLOCK", "TABLOCKX") for h in hints
    )
    mode = None
    if "TABLOCKX" in hints or "XLOCK" in hints:
        mode = "X"
    elif "UPDLOCK" in hints:
        mode = "U"
    elif any(
        h in ("TABLOCK", "HOLDLOCK", "SERIALIZABLE", "REPEATABLEREAD", "PAGLOCK", "ROWLOCK") for h in hints
    ) and ("TABLOCK" in hints or hold):
        mode = "S"
    unknown = [h for h in hints if h not in _KNOWN_HINTS and not h.startswith("INDEX")]
    if unknown:
        raise SqlError(321, 15, 1, f'"{unknown[0]}" is not a recognized table hints option.')
    if mode is not None:
        session.acquire_table_lock(table, mode, hold)
    read_latest = mode is not None

    def rows() -> Any:
        xact = session.xact
        snap = session.current_snapshot
        if read_latest:
            snap = session.engine.commit_seq
        if (
            xact is not None
            and xact.isolation == "SNAPSHOT"
            and not read_latest
            and xact.snapshot is not None
        ):
            snap = xact.snapshot
        return table.scan(xact, snap)

    return rows


_KNOWN_HINTS = {
    "NOLOCK",
    "READUNCOMMITTED",
    "READCOMMITTED",
    "READCOMMITTEDLOCK",
    "REPEATABLEREAD",
    "SERIALIZABLE",
    "HOLDLOCK",
    "TABLOCK",
    "TABLOCKX",
    "UPDLOCK",
    "XLOCK",
    "ROWLOCK",
    "PAGLOCK",
    "NOWAIT",
    "READPAST",
    "FORCESEEK",
    "FORCESCAN",
    "NOEXPAND",
    "SNAPSHOT",
    "KEEPIDENTITY",
    "KEEPDEFAULTS",
    "IGNORE_CONSTRAINTS",
    "IGNORE_TRIGGERS",
}


def _rowset_item(alias: str, name: str, make: Callable[[], Rowset]) -> Any:
    probe = make()
    cols = probe.columns
    first = [probe]

    def rows() -> Any:
        rs = first.pop() if first else make()
        return rs.rows

    return FromItem(Source(alias.lower(), name, cols), rows)


def _table_function(
    session: ExecutionContext,
    node: exp.Table,
    fn_node: exp.Anonymous,
    schema: str | None,
    catalog: str | None,
    alias: str,
    outer: Scope | None = None,
) -> Any:
    fname = fn_node.name
    full = f"{schema}.{fname}" if schema else fname
    found = session.engine.registry.find_table_function(full)
    if found is None:
        if fname.lower() in SYSTEM_FUNCTIONS:
            raise not_supported(f"the function {fname}")
        raise invalid_object(".".join(p for p in (catalog, schema, fname) if p))
    fn, suffix = found
    args_scope = Scope(outer=outer)
    compiler = Compiler(session, args_scope)
    outer_was_correlated = outer is not None and outer.correlated
    outer_reads = []
    args = []
    for node in fn_node.expressions:
        args_scope.correlated = False
        args.append(compiler.compile(node))
        # an argument that reads an outer row (directly, or through a subquery of its own)
        outer_reads.append(args_scope.correlated)
    if outer is not None and outer.correlated and not outer_was_correlated:
        outer_reads = [True] * len(args)  # reads a row further out: evaluate every argument per row
    saved_db = session.database

    def call(values: list[TypedValue]) -> Rowset:
        if catalog:
            session.database = session.engine.database(catalog).name
        try:
            return fn(session, suffix, values)
        finally:
            session.database = saved_db

    if any(outer_reads):
        # arguments that read the current row of an outer query or of an APPLY's left side: one call per
        # row; the columns come from a call with NULL for those arguments
        placeholders = [
            TypedValue(a.type, None if r else a.fn(())) for a, r in zip(args, outer_reads, strict=True)
        ]
        columns = call(placeholders).columns
        return FromItem(
            Source((alias or fname).lower(), fname, columns),
            lambda: call([TypedValue(a.type, a.fn(())) for a in args]).rows,
            correlated=True,
        )
    values = [TypedValue(a.type, a.fn(())) for a in args]
    rowset = call(values)
    used = [False]

    def rows() -> Any:
        if used[0]:
            return call(values).rows
        used[0] = True
        return rowset.rows

    return FromItem(Source((alias or fname).lower(), fname, rowset.columns), rows)


# ---------------------------------------------------------------- system views


def _ticks(t: int) -> int:
    return round_datetime_ticks(t)


def v_databases(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        name sysname NOT NULL, database_id int NOT NULL, source_database_id int, owner_sid varbinary(85),
        create_date datetime NOT NULL, compatibility_level tinyint NOT NULL, collation_name sysname,
        user_access tinyint, user_access_desc nvarchar(60), is_read_only bit, state tinyint,
        state_desc nvarchar(60), snapshot_isolation_state tinyint,
        snapshot_isolation_state_desc nvarchar(60), is_read_committed_snapshot_on bit,
        recovery_model tinyint, recovery_model_desc nvarchar(60), is_cdc_enabled bit NOT NULL,
        is_broker_enabled bit, log_reuse_wait_desc nvarchar(60)
        """
    )
    rows = []
    for d in sorted(s.engine.databases.values(), key=lambda d: d.database_id):
        rows.append(
            (
                d.name,
                d.database_id,
                None,
                b"\x01",
                _ticks(d.create_ticks),
                160,
                "SQL_Latin1_General_CP1_CI_AS",
                0,
                "MULTI_USER",
                0,
                0,
                "ONLINE",
                1 if d.allow_snapshot_isolation else 0,
                "ON" if d.allow_snapshot_isolation else "OFF",
                1 if d.read_committed_snapshot else 0,
                1,
                "FULL",
                1 if d.flags.get("is_cdc_enabled") else 0,
                0,
                "REPLICATION" if d.flags.get("is_cdc_enabled") else "NOTHING",
            )
        )
    return Rowset(cols, rows)


def v_schemas(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns("name sysname NOT NULL, schema_id int NOT NULL, principal_id int")
    return Rowset(
        cols,
        [
            (x.name, x.schema_id, x.principal_id)
            for x in sorted(db.schemas.values(), key=lambda x: x.schema_id)
        ],
    )


_OBJ_COLS = result_columns(
    """
    name sysname NOT NULL, object_id int NOT NULL, principal_id int, schema_id int NOT NULL,
    parent_object_id int NOT NULL, type char(2), type_desc nvarchar(60), create_date datetime NOT NULL,
    modify_date datetime NOT NULL, is_ms_shipped bit NOT NULL, is_published bit NOT NULL,
    is_schema_published bit NOT NULL
    """
)


def v_tables(s: ExecutionContext, db: Database) -> Rowset:
    cols = _OBJ_COLS + result_columns(
        """
        lob_data_space_id int, max_column_id_used int, uses_ansi_nulls bit, is_replicated bit,
        has_replication_filter bit, is_merge_published bit, is_tracked_by_cdc bit, temporal_type tinyint,
        temporal_type_desc nvarchar(60), is_memory_optimized bit, is_external bit
        """
    )
    rows = []
    for t in db.all_tables():
        rows.append(
            _table_object_row(t)
            + (
                0,
                max((c.column_id for c in t.columns), default=0),
                1,
                0,
                0,
                0,
                1 if t.flags.get("is_tracked_by_cdc") else 0,
                0,
                "NON_TEMPORAL_TABLE",
                0,
                0,
            )
        )
    return Rowset(cols, rows)


def _object_row(
    t: Table, name: str, object_id: int, parent_object_id: int, typ: str, desc: str, modify_ticks: int
) -> tuple:
    """Build a sys.objects row for table ``t`` or an object that belongs to it."""
    ms = 1 if t.flags.get("is_ms_shipped") else 0
    return (
        name,
        object_id,
        None,
        t.schema.schema_id,
        parent_object_id,
        typ,
        desc,
        _ticks(t.create_ticks),
        _ticks(modify_ticks),
        ms,
        0,
        0,
    )


def _table_object_row(t: Table) -> tuple:
    """Build the sys.objects row of user table ``t``."""
    return _object_row(t, t.name, t.object_id, 0, "U ", "USER_TABLE", t.modify_ticks)


def v_objects(s: ExecutionContext, db: Database) -> Rowset:
    rows = []
    for t in db.all_tables():
        rows.append(_table_object_row(t))
        for ix in t.indexes:
            if ix.kind in ("PRIMARY KEY", "UNIQUE"):
                typ, desc = (
                    ("PK", "PRIMARY_KEY_CONSTRAINT") if ix.is_primary_key else ("UQ", "UNIQUE_CONSTRAINT")
                )
                rows.append(_object_row(t, ix.name, ix.object_id, t.object_id, typ, desc, t.create_ticks))
        for c in t.columns:
            if c.default_name:
                rows.append(
                    _object_row(
                        t,
                        c.default_name,
                        c.default_object_id,
                        t.object_id,
                        "D ",
                        "DEFAULT_CONSTRAINT",
                        t.create_ticks,
                    )
                )
    return Rowset(list(_OBJ_COLS), rows)


def v_columns(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        object_id int NOT NULL, name sysname, column_id int NOT NULL, system_type_id tinyint NOT NULL,
        user_type_id int NOT NULL, max_length smallint NOT NULL, precision tinyint NOT NULL,
        scale tinyint NOT NULL, collation_name sysname, is_nullable bit, is_ansi_padded bit NOT NULL,
        is_rowguidcol bit NOT NULL, is_identity bit NOT NULL, is_computed bit NOT NULL,
        is_filestream bit NOT NULL, is_replicated bit, is_non_sql_subscribed bit, is_merge_published bit,
        is_dts_replicated bit, is_xml_document bit NOT NULL, xml_collection_id int NOT NULL,
        default_object_id int NOT NULL, rule_object_id int NOT NULL, is_sparse bit, is_column_set bit,
        generated_always_type tinyint, is_hidden bit, is_masked bit
        """
    )
    rows = []
    for t in db.all_tables():
        for c in t.columns:
            ty = c.type
            coll = "SQL_Latin1_General_CP1_CI_AS" if ty.name in T.STRING_TYPES else None
            rows.append(
                (
                    t.object_id,
                    c.name,
                    c.column_id,
                    ty.type_id,
                    ty.type_id,
                    ty.max_length,
                    ty.catalog_precision,
                    ty.catalog_scale,
                    coll,
                    1 if c.nullable else 0,
                    1 if ty.name in T.STRING_TYPES or ty.name in T.BINARY_TYPES else 0,
                    0,
                    1 if c.identity else 0,
                    1 if c.computed else 0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    c.default_object_id,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                )
            )
    return Rowset(cols, rows)


def v_computed_columns(s: ExecutionContext, db: Database) -> Rowset:
    """sys.computed_columns: the sys.columns rows of computed columns, with definition and is_persisted."""
    base = v_columns(s, db)
    extra = result_columns("definition nvarchar(max), uses_database_collation bit, is_persisted bit NOT NULL")
    computed = {(t.object_id, c.column_id): c for t in db.all_tables() for c in t.columns if c.computed}
    rows = []
    for row in base.rows:
        c = computed.get((row[0], row[2]))
        if c is not None:
            uses_collation = 1 if c.type.name in T.STRING_TYPES else 0
            rows.append(
                (
                    *row,
                    computed_columns.definition_text(c.computed_sql or ""),
                    uses_collation,
                    int(c.persisted),
                )
            )
    return Rowset(base.columns + extra, rows)


_TYPE_ROWS = [
    # name, max_length, precision, scale, collation
    ("image", 16, 0, 0, False),
    ("text", 16, 0, 0, True),
    ("uniqueidentifier", 16, 0, 0, False),
    ("date", 3, 10, 0, False),
    ("time", 5, 16, 7, False),
    ("datetime2", 8, 27, 7, False),
    ("datetimeoffset", 10, 34, 7, False),
    ("tinyint", 1, 3, 0, False),
    ("smallint", 2, 5, 0, False),
    ("int", 4, 10, 0, False),
    ("smalldatetime", 4, 16, 0, False),
    ("real", 4, 24, 0, False),
    ("money", 8, 19, 4, False),
    ("datetime", 8, 23, 3, False),
    ("float", 8, 53, 0, False),
    ("sql_variant", 8016, 0, 0, False),
    ("ntext", 16, 0, 0, True),
    ("bit", 1, 1, 0, False),
    ("decimal", 17, 38, 38, False),
    ("numeric", 17, 38, 38, False),
    ("smallmoney", 4, 10, 4, False),
    ("bigint", 8, 19, 0, False),
    ("varbinary", 8000, 0, 0, False),
    ("varchar", 8000, 0, 0, True),
    ("binary", 8000, 0, 0, False),
    ("char", 8000, 0, 0, True),
    ("timestamp", 8, 0, 0, False),
    ("nvarchar", 8000, 0, 0, True),
    ("nchar", 8000, 0, 0, True),
    ("xml", -1, 0, 0, False),
    ("sysname", 256, 0, 0, True),
]


def v_types(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        name sysname NOT NULL, system_type_id tinyint NOT NULL, user_type_id int NOT NULL,
        schema_id int NOT NULL, principal_id int, max_length smallint NOT NULL,
        precision tinyint NOT NULL, scale tinyint NOT NULL, collation_name sysname, is_nullable bit,
        is_user_defined bit NOT NULL, is_assembly_type bit NOT NULL, default_object_id int NOT NULL,
        rule_object_id int NOT NULL, is_table_type bit NOT NULL
        """
    )
    rows = []
    for name, ml, p, sc, coll in _TYPE_ROWS:
        tid = T.TYPE_IDS[name]
        uid = 256 if name == "sysname" else tid
        rows.append(
            (
                name,
                tid,
                uid,
                4,
                None,
                ml,
                p,
                sc,
                "SQL_Latin1_General_CP1_CI_AS" if coll else None,
                1 if name != "sysname" else 0,
                0,
                0,
                0,
                0,
                0,
            )
        )
    return Rowset(cols, rows)


def v_indexes(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        object_id int NOT NULL, name sysname, index_id int NOT NULL, type tinyint NOT NULL,
        type_desc nvarchar(60), is_unique bit, data_space_id int, ignore_dup_key bit, is_primary_key bit,
        is_unique_constraint bit, fill_factor tinyint NOT NULL, is_padded bit, is_disabled bit,
        is_hypothetical bit, allow_row_locks bit, allow_page_locks bit, has_filter bit,
        filter_definition nvarchar(max)
        """
    )
    rows = []
    for t in db.all_tables():
        if not any(ix.clustered for ix in t.indexes):
            rows.append((t.object_id, None, 0, 0, "HEAP", 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, None))
        for ix in t.indexes:
            typ, desc = (1, "CLUSTERED") if ix.clustered else (2, "NONCLUSTERED")
            rows.append(
                (
                    t.object_id,
                    ix.name,
                    ix.index_id,
                    typ,
                    desc,
                    1 if ix.unique else 0,
                    1,
                    0,
                    1 if ix.is_primary_key else 0,
                    1 if ix.kind == "UNIQUE" else 0,
                    0,
                    0,
                    0,
                    0,
                    1,
                    1,
                    0,
                    None,
                )
            )
    return Rowset(cols, rows)


def v_index_columns(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        object_id int NOT NULL, index_id int NOT NULL, index_column_id int NOT NULL,
        column_id int NOT NULL, key_ordinal tinyint NOT NULL, partition_ordinal tinyint NOT NULL,
        is_descending_key bit, is_included_column bit
        """
    )
    rows = []
    for t in db.all_tables():
        for ix in t.indexes:
            for k, cname in enumerate(ix.columns, start=1):
                col = t.columns[t.colmap[cname.lower()]]
                desc = ix.descending[k - 1] if k - 1 < len(ix.descending) else False
                rows.append((t.object_id, ix.index_id, k, col.column_id, k, 0, 1 if desc else 0, 0))
    return Rowset(cols, rows)


def v_key_constraints(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        name sysname NOT NULL, object_id int NOT NULL, principal_id int, schema_id int NOT NULL,
        parent_object_id int NOT NULL, type char(2), type_desc nvarchar(60), unique_index_id int,
        is_system_named bit NOT NULL
        """
    )
    rows = []
    for t in db.all_tables():
        for ix in t.indexes:
            if ix.kind in ("PRIMARY KEY", "UNIQUE"):
                typ, desc = (
                    ("PK", "PRIMARY_KEY_CONSTRAINT") if ix.is_primary_key else ("UQ", "UNIQUE_CONSTRAINT")
                )
                rows.append(
                    (ix.name, ix.object_id, None, t.schema.schema_id, t.object_id, typ, desc, ix.index_id, 0)
                )
    return Rowset(cols, rows)


def v_database_principals(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        name sysname NOT NULL, principal_id int NOT NULL, type char(1) NOT NULL, type_desc nvarchar(60),
        default_schema_name sysname, owning_principal_id int, sid varbinary(85), is_fixed_role bit NOT NULL
        """
    )
    rows = []
    for p in db.principals.values():
        rows.append(
            (
                p.name,
                p.principal_id,
                p.type,
                "DATABASE_ROLE" if p.type == "R" else "SQL_USER",
                p.default_schema if p.type != "R" else None,
                # a role's owner (dbo's for the fixed roles and a role created without AUTHORIZATION)
                (p.owning_principal_id or 1) if p.type == "R" else None,
                None,
                1 if p.name in ("db_owner", "public") else 0,
            )
        )
    return Rowset(cols, rows)


def v_database_role_members(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns("role_principal_id int NOT NULL, member_principal_id int NOT NULL")
    rows = []
    for r in db.principals.values():
        if r.type == "R":
            for m in r.members:
                member = db.principals.get(m)
                if member:
                    rows.append((r.principal_id, member.principal_id))
    return Rowset(cols, rows)


def v_server_principals(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        name sysname NOT NULL, principal_id int NOT NULL, sid varbinary(85), type char(1) NOT NULL,
        type_desc nvarchar(60), is_disabled bit, default_database_name sysname
        """
    )
    rows = [
        (lg.name, lg.principal_id, lg.sid, "S", "SQL_LOGIN", 1 if lg.disabled else 0, lg.default_database)
        for lg in s.engine.logins.values()
    ]
    rows.append(("sysadmin", 3, b"\x03", "R", "SERVER_ROLE", 0, None))
    rows.append(("public", 2, b"\x02", "R", "SERVER_ROLE", 0, None))
    return Rowset(cols, rows)


def v_dm_tran_database_transactions(s: ExecutionContext, db: Database) -> Rowset:
    s.require_server_permission("VIEW SERVER STATE")
    cols = result_columns(
        """
        transaction_id bigint NOT NULL, database_id int NOT NULL,
        database_transaction_begin_time datetime, database_transaction_type int NOT NULL,
        database_transaction_state int NOT NULL, database_transaction_log_record_count bigint NOT NULL,
        database_transaction_begin_lsn decimal(25,0), database_transaction_last_lsn decimal(25,0),
        database_transaction_commit_lsn decimal(25,0)
        """
    )
    rows = []
    for sess in list(s.engine.sessions.values()):
        x = sess.xact
        if x is None:
            continue
        for dbname, begin in list(x.begin_lsn.items()):
            d = s.engine.databases.get(dbname.lower())
            if d is None:
                continue
            ops = x.ops.get(dbname, [])
            last = ops[-1].lsn if ops else begin
            rows.append(
                (
                    x.xid,
                    d.database_id,
                    _ticks(x.begin_ticks.get(dbname, 0)),
                    1,
                    4,
                    len(ops) + 1,
                    Decimal(lsn_to_numeric(begin)),
                    Decimal(lsn_to_numeric(last)),
                    None,
                )
            )
    return Rowset(cols, rows)


def v_dm_tran_session_transactions(s: ExecutionContext, db: Database) -> Rowset:
    s.require_server_permission("VIEW SERVER STATE")
    cols = result_columns(
        """
        session_id int NOT NULL, transaction_id bigint NOT NULL, is_user_transaction bit NOT NULL,
        is_local bit NOT NULL
        """
    )
    rows = [
        (sess.spid, sess.xact.xid, 1 if sess.xact.explicit else 0, 1)
        for sess in list(s.engine.sessions.values())
        if sess.xact is not None
    ]
    return Rowset(cols, rows)


def v_dm_exec_sessions(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        session_id smallint NOT NULL, login_name sysname NOT NULL, database_id smallint,
        transaction_isolation_level smallint, status nvarchar(30), program_name nvarchar(128),
        host_name nvarchar(128), is_user_process bit NOT NULL, open_transaction_count int
        """
    )
    iso = {"READ COMMITTED": 2, "SNAPSHOT": 5}
    rows = []
    all_sessions = s.login.has_server_permission("VIEW SERVER STATE")
    for sess in list(s.engine.sessions.values()):
        if not all_sessions and sess is not s:
            continue  # without VIEW SERVER STATE a login sees its own session only
        d = s.engine.databases.get(sess.database.lower())
        rows.append(
            (
                sess.spid,
                sess.login.name,
                d.database_id if d else None,
                {"READ UNCOMMITTED": 1, "REPEATABLE READ": 3, "SERIALIZABLE": 4}.get(
                    getattr(sess, "declared_isolation", ""), iso.get(sess.isolation, 2)
                ),
                "running" if sess is s else "sleeping",
                sess.app_name,
                sess.host_name,
                1,
                sess.trancount,
            )
        )
    return Rowset(cols, rows)


def v_dm_server_services(s: ExecutionContext, db: Database) -> Rowset:
    """sys.dm_server_services: the Database Engine and SQL Server Agent, both running (what tools check)."""
    s.require_server_permission("VIEW SERVER STATE")
    cols = result_columns(
        """
        servicename nvarchar(256) NOT NULL, startup_type int, startup_type_desc nvarchar(256) NOT NULL,
        status int, status_desc nvarchar(256) NOT NULL, process_id int, last_startup_time datetimeoffset(7),
        service_account nvarchar(256) NOT NULL, filename nvarchar(256) NOT NULL, is_clustered nvarchar(1) NOT NULL,
        cluster_nodename nvarchar(256), instant_file_initialization_enabled nvarchar(1) NOT NULL
        """
    )
    started = s.engine.clock.now_dto()
    rows = [
        (name, 2, "Automatic", 4, "Running", pid, started, "NT Service\\MSSQLSERVER", path, "N", None, "Y")
        for name, pid, path in (
            ("SQL Server (MSSQLSERVER)", 1, "/opt/mssql/bin/sqlservr"),
            ("SQL Server Agent (MSSQLSERVER)", 2, "/opt/mssql/bin/sqlagent"),
        )
    ]
    return Rowset(cols, rows)


def v_system_views(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        name sysname NOT NULL, object_id int NOT NULL, schema_id int NOT NULL, type char(2)
        """
    )
    rows = [(name, -100 - i, 4, "V ") for i, name in enumerate(sorted(SYS_VIEWS))]
    return Rowset(cols, rows)


def v_extended_properties(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        class tinyint NOT NULL, major_id int NOT NULL, minor_id int NOT NULL, name sysname NOT NULL,
        value nvarchar(4000)
        """
    )
    return Rowset(cols, [])


SYS_VIEWS: dict[str, Callable[[Any, Any], Rowset]] = {
    "databases": v_databases,
    "schemas": v_schemas,
    "tables": v_tables,
    "objects": v_objects,
    "all_objects": v_objects,
    "columns": v_columns,
    "all_columns": v_columns,
    "computed_columns": v_computed_columns,
    "types": v_types,
    "indexes": v_indexes,
    "index_columns": v_index_columns,
    "key_constraints": v_key_constraints,
    "database_principals": v_database_principals,
    "database_role_members": v_database_role_members,
    "server_principals": v_server_principals,
    "sql_logins": v_server_principals,
    "dm_tran_database_transactions": v_dm_tran_database_transactions,
    "dm_tran_session_transactions": v_dm_tran_session_transactions,
    "dm_exec_sessions": v_dm_exec_sessions,
    "dm_server_services": v_dm_server_services,
    "system_views": v_system_views,
    "extended_properties": v_extended_properties,
}
SYS_VIEWS.update(EMPTY_SYS_VIEWS)


# ---------------------------------------------------------------- INFORMATION_SCHEMA


def _data_type_row(t: SqlType) -> tuple[Any, Any, Any, Any, Any, Any]:
    """(CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION, NUMERIC_PRECISION_RADIX, NUMERIC_SCALE, DATETIME_PRECISION)."""
    n = t.name
    if n in T.STRING_TYPES or n in T.BINARY_TYPES and n != "timestamp":
        if t.length == T.MAX or n in ("text", "ntext", "image"):
            return (
                -1 if t.length == T.MAX else 2147483647,
                -1 if t.length == T.MAX else 2147483647,
                None,
                None,
                None,
                None,
            )
        octets = t.length * 2 if n in T.NCHAR_TYPES else t.length
        return t.length, octets, None, None, None, None
    if n in ("tinyint", "smallint", "int", "bigint", "decimal", "numeric", "money", "smallmoney"):
        return None, None, t.catalog_precision, 10, t.catalog_scale, None
    if n in ("real", "float"):
        return None, None, t.catalog_precision, 2, None, None
    if n in ("date",):
        return None, None, None, None, None, 0
    if n in ("datetime",):
        return None, None, None, None, None, 3
    if n == "smalldatetime":
        return None, None, None, None, None, 0
    if n in ("time", "datetime2", "datetimeoffset"):
        return None, None, None, None, None, t.scale
    return None, None, None, None, None, None


def i_columns(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME nvarchar(128) NOT NULL,
        COLUMN_NAME nvarchar(128), ORDINAL_POSITION int, COLUMN_DEFAULT nvarchar(4000),
        IS_NULLABLE varchar(3), DATA_TYPE nvarchar(128), CHARACTER_MAXIMUM_LENGTH int,
        CHARACTER_OCTET_LENGTH int, NUMERIC_PRECISION tinyint, NUMERIC_PRECISION_RADIX smallint,
        NUMERIC_SCALE int, DATETIME_PRECISION smallint, CHARACTER_SET_CATALOG nvarchar(128),
        CHARACTER_SET_SCHEMA nvarchar(128), CHARACTER_SET_NAME nvarchar(128),
        COLLATION_CATALOG nvarchar(128), COLLATION_SCHEMA nvarchar(128), COLLATION_NAME nvarchar(128),
        DOMAIN_CATALOG nvarchar(128), DOMAIN_SCHEMA nvarchar(128), DOMAIN_NAME nvarchar(128)
        """
    )
    rows = []
    for t in db.all_tables():
        for c in t.columns:
            ty = c.type
            is_str = ty.name in T.STRING_TYPES
            rows.append(
                (
                    db.name,
                    t.schema.name,
                    t.name,
                    c.name,
                    c.column_id,
                    f"({c.default_sql})" if c.default_sql else None,
                    "YES" if c.nullable else "NO",
                    ty.name,
                    *_data_type_row(ty),
                    None,
                    None,
                    ("UNICODE" if ty.name in T.NCHAR_TYPES else "iso_1") if is_str else None,
                    None,
                    None,
                    "SQL_Latin1_General_CP1_CI_AS" if is_str else None,
                    None,
                    None,
                    None,
                )
            )
    return Rowset(cols, rows)


def i_tables(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME sysname NOT NULL,
        TABLE_TYPE varchar(10)
        """
    )
    return Rowset(cols, [(db.name, t.schema.name, t.name, "BASE TABLE") for t in db.all_tables()])


def i_table_constraints(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        CONSTRAINT_CATALOG nvarchar(128), CONSTRAINT_SCHEMA nvarchar(128),
        CONSTRAINT_NAME sysname NOT NULL, TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128),
        TABLE_NAME sysname NOT NULL, CONSTRAINT_TYPE varchar(11), IS_DEFERRABLE varchar(2) NOT NULL,
        INITIALLY_DEFERRED varchar(2) NOT NULL
        """
    )
    rows = []
    for t in db.all_tables():
        for ix in t.indexes:
            if ix.kind in ("PRIMARY KEY", "UNIQUE"):
                rows.append(
                    (db.name, t.schema.name, ix.name, db.name, t.schema.name, t.name, ix.kind, "NO", "NO")
                )
    return Rowset(cols, rows)


def i_key_column_usage(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        CONSTRAINT_CATALOG nvarchar(128), CONSTRAINT_SCHEMA nvarchar(128),
        CONSTRAINT_NAME sysname NOT NULL, TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128),
        TABLE_NAME sysname NOT NULL, COLUMN_NAME nvarchar(128), ORDINAL_POSITION int NOT NULL
        """
    )
    rows = []
    for t in db.all_tables():
        for ix in t.indexes:
            if ix.kind in ("PRIMARY KEY", "UNIQUE"):
                for k, cname in enumerate(ix.columns, start=1):
                    col = t.columns[t.colmap[cname.lower()]]
                    rows.append(
                        (db.name, t.schema.name, ix.name, db.name, t.schema.name, t.name, col.name, k)
                    )
    return Rowset(cols, rows)


def i_constraint_column_usage(s: ExecutionContext, db: Database) -> Rowset:
    """INFORMATION_SCHEMA.CONSTRAINT_COLUMN_USAGE: the columns of PRIMARY KEY and UNIQUE constraints."""
    cols = result_columns(
        """
        TABLE_CATALOG nvarchar(128), TABLE_SCHEMA nvarchar(128), TABLE_NAME sysname NOT NULL,
        COLUMN_NAME nvarchar(128), CONSTRAINT_CATALOG nvarchar(128), CONSTRAINT_SCHEMA nvarchar(128),
        CONSTRAINT_NAME sysname NOT NULL
        """
    )
    rows = [(r[3], r[4], r[5], r[6], r[0], r[1], r[2]) for r in i_key_column_usage(s, db).rows]
    return Rowset(cols, rows)


def i_schemata(s: ExecutionContext, db: Database) -> Rowset:
    cols = result_columns(
        """
        CATALOG_NAME nvarchar(128), SCHEMA_NAME nvarchar(128) NOT NULL, SCHEMA_OWNER nvarchar(128),
        DEFAULT_CHARACTER_SET_CATALOG varchar(6), DEFAULT_CHARACTER_SET_SCHEMA varchar(3),
        DEFAULT_CHARACTER_SET_NAME nvarchar(128)
        """
    )
    owners = {p.principal_id: p.name for p in db.principals.values()}
    return Rowset(
        cols,
        [
            (db.name, x.name, owners.get(x.principal_id, "dbo"), None, None, "iso_1")
            for x in db.schemas.values()
        ],
    )


INFO_VIEWS: dict[str, Callable[[Any, Any], Rowset]] = {
    "columns": i_columns,
    "tables": i_tables,
    "table_constraints": i_table_constraints,
    "key_column_usage": i_key_column_usage,
    "constraint_column_usage": i_constraint_column_usage,
    "schemata": i_schemata,
}
INFO_VIEWS.update(EMPTY_INFORMATION_SCHEMA_VIEWS)


def iter_rows(rowset: Rowset) -> Iterator[tuple[Any, ...]]:
    return iter(rowset.rows)
