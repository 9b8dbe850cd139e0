"""INSERT, UPDATE and DELETE.

Source rows are computed first (so a statement never sees its own changes), then each row is
written through :meth:`~..engine.Engine.write_row`, which waits for other transactions that
hold the row and checks unique constraints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from sqlglot import exp

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator import values as V
from sqlserver_cdc_simulator.errors import (
    SqlError,
    invalid_column,
    invalid_object,
    not_supported,
    null_not_allowed,
    syntax_error,
    truncation,
)
from sqlserver_cdc_simulator.extensions import ResultColumn, Rowset
from sqlserver_cdc_simulator.storage import Column, Table

from . import computed_columns, statement_errors
from .compiler import Compiler
from .context import ExecutionContext
from .dialect import parse_expression
from .expressions import Scope, Source, converter
from .query import FromItem, build_from, compile_query, key_lookup, select_list, top_count

_R = TypeVar("_R")


def default_value(session: ExecutionContext, col: Column) -> Any:
    """The value of a column's DEFAULT expression, converted to the column type."""
    if col.default_sql is None:
        return None
    e = Compiler(session, Scope()).compile(parse_expression(col.default_sql))
    v = e.fn(())
    conv = converter(e.type, col.type)
    return conv(v) if conv and v is not None else v


def _write(
    session: ExecutionContext, xact: Any, db: Any, table: Table, rowid: int | None, compute: Any
) -> str:
    engine = session.engine
    compute = _with_computed_values(session, db, table, compute, "INSERT" if rowid is None else "UPDATE")
    while True:
        status, info = engine.write_row(xact, db, table, rowid, compute)
        if status == "wait":
            engine.locks.wait_for_transaction(xact, info, session.lock_timeout)
            continue
        return status


def _with_computed_values(session: ExecutionContext, db: Any, table: Table, compute: Any, stmt: str) -> Any:
    """``compute`` followed by the table's computed columns' values (``compute`` itself without any)."""
    fill = computed_columns.row_function(session, table, f"{db.name}.{table.schema.name}.{table.name}", stmt)
    if fill is None:
        return compute

    def with_values(current: Any) -> Any:
        values = compute(current)
        return values if values is None or values is ... else fill(values)

    return with_values


def _check_value(table: Table, db: Any, col: Column, value: Any, stmt: str) -> Any:
    if value is None:
        if not col.nullable:
            raise null_not_allowed(
                column=col.name, table=f"{db.name}.{table.schema.name}.{table.name}", statement=stmt
            )
        return None
    if not V.check_fits(value, col.type):
        shown = value if isinstance(value, str) else "0x" + value.hex().upper()
        raise truncation(table=f"{db.name}.{table.schema.name}.{table.name}", column=col.name, value=shown)
    return value


def _assign_converter(src: T.SqlType, col: Column) -> Any:
    """Converter for assigning a value of type *src* to *col* (strings keep full length for the check)."""
    dst = col.type
    if dst.name in T.STRING_TYPES or dst.name in ("varbinary", "binary"):
        wide = (
            T.SqlType(dst.name, length=T.MAX)
            if dst.name in ("varchar", "nvarchar", "varbinary")
            else T.SqlType(
                {
                    "char": "varchar",
                    "nchar": "nvarchar",
                    "binary": "varbinary",
                    "text": "varchar",
                    "ntext": "nvarchar",
                }[dst.name],
                length=T.MAX,
            )
        )
        conv = converter(src, wide)
        if dst.name in ("char", "nchar"):
            n = dst.length

            def pad(v: Any) -> Any:
                v = conv(v) if conv else v
                if v is None:
                    return v
                units = V.text_units(v) if dst.name == "nchar" else len(v)
                return v if units >= n else v + " " * (n - units)

            return pad
        if dst.name == "binary":
            n = dst.length

            def bpad(v: Any) -> Any:
                v = conv(v) if conv else v
                return v if v is None or len(v) >= n else v.ljust(n, b"\0")

            return bpad
        return conv
    return converter(src, dst)


def execute(session: ExecutionContext, node: exp.Expression) -> tuple[int, Any]:
    """Run INSERT / UPDATE / DELETE: (row count, OUTPUT rowset or None)."""
    returning = node.args.get("returning")
    if returning is not None:
        if returning.args.get("into"):
            raise not_supported("OUTPUT ... INTO")
        node = node.copy()
        node.set("returning", None)
    xact = session.write_xact()
    mark = len(xact.undo)
    if isinstance(node, exp.Insert):
        n = _insert(session, node)
    elif isinstance(node, exp.Update):
        n = _update(session, node)
    elif isinstance(node, exp.Delete):
        n = _delete(session, node)
    else:
        raise not_supported(type(node).__name__)
    if returning is None:
        return n, None
    target = node.this
    if isinstance(target, exp.Schema):
        target = target.this
    if not isinstance(target, exp.Table) and node.args.get("tables"):
        target = node.args["tables"][0]
    table = session.resolve_table(target, must_exist=False)[1] if isinstance(target, exp.Table) else None
    return n, _output_rows(session, returning, xact.undo[mark:], table)


def _output_rows(
    session: ExecutionContext, returning: exp.Expression, entries: list[Any], table: Table | None
) -> Any:
    """The OUTPUT clause's rows from the statement's row changes (``inserted.*`` / ``deleted.*``)."""
    changes = [e for e in entries if e[0] != "ddl"]
    if changes:
        table = changes[0][0]
    if table is None:
        raise not_supported("OUTPUT on this target")
    cols = [ResultColumn(c.name, c.type, True) for c in table.columns]
    scope = Scope([Source("inserted", "inserted", list(cols)), Source("deleted", "deleted", list(cols))])
    compiler = Compiler(session, scope)
    names, exprs = select_list(list(returning.expressions), scope, compiler)
    width = len(cols)
    nulls = (None,) * width
    rows = []
    for e in changes:
        op = e[5]
        row = (op.after or nulls) + (op.before or nulls)
        rows.append(tuple(x.fn(row) for x in exprs))
    return Rowset([ResultColumn(n, x.type, True) for n, x in zip(names, exprs, strict=True)], rows)


def _target(session: ExecutionContext, tnode: exp.Expression) -> tuple[Any, Table]:
    if not isinstance(tnode, exp.Table) or isinstance(tnode.this, exp.Anonymous):
        raise not_supported("this DML target")
    db, table, schema, name = session.resolve_table(tnode)
    if table is None:
        raise invalid_object(tnode.sql(dialect="tsql"))
    hints = []
    for h in tnode.args.get("hints") or []:
        hints += [e.name.upper() for e in h.expressions]
    mode = "X" if ("TABLOCKX" in hints or "TABLOCK" in hints or "XLOCK" in hints) else "IX"
    session.acquire_table_lock(table, mode, True)
    return db, table


def _insert(session: ExecutionContext, node: exp.Insert) -> int:
    target = node.this
    columns_given = None
    if isinstance(target, exp.Schema):
        columns_given = [i.name for i in target.expressions]
        target = target.this
    xact = session.write_xact()
    db, table = _target(session, target)
    engine = session.engine
    snap = engine.begin_read(xact)
    session.current_snapshot = snap
    try:
        # column list
        if columns_given is None:
            cols = [
                i
                for i, c in enumerate(table.columns)
                if c.identity is None and c.type.name != "timestamp" and not c.computed
            ]
            if table.identity_column is not None and table.object_id in session.options.identity_insert:
                raise statement_errors.identity_insert_needs_column_list(table.name)
        else:
            cols = []
            for n in columns_given:
                i = table.column_index(n)
                if i is None:
                    raise invalid_column(n)
                if i in cols:
                    raise statement_errors.column_listed_twice(n)
                if table.columns[i].computed:
                    raise computed_columns.cannot_modify(table.columns[i].name)
                if table.columns[i].type.name == "timestamp":
                    raise statement_errors.timestamp_insert()
                if (
                    table.columns[i].identity is not None
                    and table.object_id not in session.options.identity_insert
                ):
                    raise statement_errors.identity_insert_off(table.name)
                cols.append(i)
        # source rows with their types
        source = node.args.get("expression")
        rows: list[tuple[Any, ...]]
        src_types: list[list[T.SqlType]] | list[T.SqlType]
        per_row_types = False
        if node.args.get("default"):
            rows = [()]
            cols = []
            src_types = []
        elif isinstance(source, exp.Values):
            compiler = Compiler(session, Scope())
            rows = []
            row_types = []
            for tup in source.expressions:
                items = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
                if len(items) != len(cols):
                    if len(items) > len(cols):
                        raise statement_errors.more_values_than_columns()
                    raise statement_errors.fewer_values_than_columns()
                vals = []
                types = []
                for it in items:
                    if (
                        isinstance(it, exp.Var)
                        and it.name.upper() == "DEFAULT"
                        or (isinstance(it, exp.Column) and it.name.upper() == "DEFAULT" and not it.table)
                    ):
                        vals.append(...)
                        types.append(T.INT)
                        continue
                    e = compiler.compile(it)
                    vals.append(e.fn(()))
                    types.append(e.type)
                rows.append(tuple(vals))
                row_types.append(types)
            src_types = row_types
            per_row_types = True
        elif source is not None:
            q = compile_query(session, source)
            if len(q.columns) != len(cols):
                if len(q.columns) > len(cols):
                    raise statement_errors.more_selected_than_columns()
                raise statement_errors.fewer_selected_than_columns()
            rows = list(q.run())
            src_types = [c.type for c in q.columns]
        elif getattr(session, "insert_exec_source", None) is not None:  # INSERT ... EXEC
            rows, exec_types = session.insert_exec_source
            if exec_types is not None and len(exec_types) != len(cols):
                raise statement_errors.exec_columns_mismatch()
            src_types = exec_types or []
        else:
            raise not_supported("this INSERT form")
    finally:
        engine.end_read(snap)
    # converters, built once per column (and per value type for VALUES rows)
    convs_cache: dict[tuple[int, T.SqlType], Any] = {}

    def conv_for(pos: int, t: T.SqlType) -> Any:
        key = (pos, t)
        if key not in convs_cache:
            convs_cache[key] = _assign_converter(t, table.columns[cols[pos]])
        return convs_cache[key]

    fixed_convs = None if per_row_types else [conv_for(pos, src_types[pos]) for pos in range(len(cols))]
    columns = table.columns
    ncols = len(columns)
    ident = table.identity_column
    rv_cols = [i for i, c in enumerate(columns) if c.type.name == "timestamp"]
    default_cols = [
        i
        for i, c in enumerate(columns)
        if c.identity is None and c.type.name != "timestamp" and c.default_sql is not None
    ]
    checked = [
        (i, c)
        for i, c in enumerate(columns)
        if c.identity is None
        and c.type.name != "timestamp"
        and not c.computed
        and (not c.nullable or c.type.length > 0)
    ]
    value_checked = (
        [(i, c) for i, c in enumerate(columns) if not c.computed]
        if session.engine.registry.value_checks
        else []
    )
    defaults: dict[int, Any] = {}
    count = 0
    stmt = "INSERT"
    all_given = [True] * len(cols)
    for r_i, r in enumerate(rows):
        full: list[Any] = [None] * ncols
        given = [False] * ncols
        convs = (
            fixed_convs
            if fixed_convs is not None
            else [conv_for(pos, t) for pos, t in enumerate(src_types[r_i])]
        )
        for pos, ci in enumerate(cols):
            v = r[pos]
            if v is ...:
                all_given[pos] = False
                continue
            c = convs[pos]
            full[ci] = c(v) if c is not None and v is not None else v
            given[ci] = True
        for i in default_cols:
            if given[i]:
                continue
            if i not in defaults or not _is_constant(columns[i].default_sql):
                defaults[i] = default_value(session, columns[i])
            full[i] = defaults[i]
        for i, col in checked:
            _check_value(table, db, col, full[i], stmt)
        for i, col in value_checked:
            session.engine.registry.check_written_value(session.engine, table, col, full[i])

        def compute(_current: Any, full: list[Any] = full, given: list[bool] = given) -> Any:
            if ident is not None:
                if given[ident]:
                    v = full[ident]
                    if v is None:
                        raise null_not_allowed(
                            column=columns[ident].name,
                            table=f"{db.name}.{table.schema.name}.{table.name}",
                            statement=stmt,
                        )
                    if table.identity_current is None or v > table.identity_current:
                        table.identity_current = v
                else:
                    seed, inc = columns[ident].identity
                    table.identity_current = (
                        seed if table.identity_current is None else table.identity_current + inc
                    )
                    full[ident] = V.convert(table.identity_current, T.BIGINT, columns[ident].type)
                    session.last_identity = table.identity_current
            for i in rv_cols:
                full[i] = engine.next_rowversion(db)
            return tuple(full)

        _write(session, xact, db, table, None, compute)
        count += 1
    return count


def _is_constant(sql: str) -> bool:
    return "(" not in sql.strip("()") and not sql.strip("()").upper().startswith(
        ("GETDATE", "SYSDATETIME", "NEWID", "CURRENT_")
    )


def _table_scope(table: Table, alias: str | None) -> Scope:
    cols = [ResultColumn(c.name, c.type, c.nullable) for c in table.columns]
    return Scope([Source((alias or table.name).lower(), table.name, cols)])


def _top_rows(session: ExecutionContext, node: exp.Expression, rows: list[_R]) -> list[_R]:
    """The first rows of ``rows`` that UPDATE/DELETE ``TOP (n) [PERCENT]`` allows (all without TOP).

    SQL Server picks the rows arbitrarily; here they are the first candidates in scan order.
    """
    top, percent, _ = top_count(session, node.args.get("limit"))
    if top is None:
        return rows
    if percent:
        share = float(top)
        if not 0 <= share <= 100:
            raise SqlError(1031, 15, 1, "Percent values must be between 0 and 100.")
        return rows[: math.ceil(len(rows) * share / 100)]
    return rows[:top]


def _candidates(
    session: ExecutionContext, table: Table, where: Any, tnode: Any, xact: Any, snap: int, where_fn: Any
) -> list[int]:
    """Row ids the statement changes: by unique-key lookup when WHERE fixes a key, else by a scan."""
    lookup = (
        key_lookup(session, table, where.this, _table_scope(table, tnode.alias or None))
        if where is not None
        else None
    )
    if lookup is not None:
        out = []
        for rowid in sorted(lookup()):
            vals = table.visible(rowid, xact, snap)
            if vals is not None and where_fn(vals) is True:
                out.append(rowid)
        return out
    return [
        rowid for rowid, vals in table.scan_with_ids(xact, snap) if where_fn is None or where_fn(vals) is True
    ]


def _joined_rows(
    session: ExecutionContext,
    target: exp.Table,
    frm: exp.Expression,
    extra_joins: list[Any],
    where: Any,
    xact: Any,
) -> tuple[Any, Table, Any, int, Any, dict[int, tuple[Any, ...]]]:
    """For UPDATE/DELETE ... FROM: (db, table, scope, target offset, where_fn, rowid -> first matching joined row)."""
    base = frm.copy()
    joins = list(base.args.get("joins") or []) + list(extra_joins)
    base.set("joins", None)
    target_name = target.name.lower()
    target_db, target_table, _, _ = session.resolve_table(target, must_exist=False)
    by_alias, references = _target_references(session, target, target_table, [base, *(j.this for j in joins)])
    found: list[FromItem] = []

    def binds(item: FromItem, t: Table) -> bool:
        """update-transact-sql.md: the target names a FROM alias; else it is the one reference to its
        table in FROM (aliased or not); else, of several, the one without an alias."""
        if by_alias:
            return item.source.alias == target_name
        return t is target_table and (references == 1 or item.source.alias == t.name.lower())

    def adjust(item: FromItem) -> FromItem:
        t = item.table
        if t is None or found:
            return item
        if binds(item, t):
            cols = item.source.columns + [ResultColumn("__$rowid", T.BIGINT, False)]

            def rows(t: Table = t) -> Any:
                return ((*vals, rid) for rid, vals in t.scan_with_ids(session.xact, session.current_snapshot))

            found.append(item)
            return FromItem(Source(item.source.alias, item.source.name, cols), rows, t)
        return item

    select = exp.Select(**{"from_": exp.From(this=base), "joins": joins or None})
    scope, producer, items = build_from(session, select, None, adjust)
    if not found:
        # UPDATE dbo.t SET ... FROM dbo.s WHERE s.id = t.id: the target joins the FROM list
        select = exp.Select(**{"from_": exp.From(this=target.copy()), "joins": [exp.Join(this=base)] + joins})
        scope, producer, items = build_from(session, select, None, adjust)
    item = found[0]
    table = item.table
    db = session.engine.database_by_id(_database_id_of(session, table))
    offset = next(
        src.offset
        for src in scope.sources
        if src.alias == item.source.alias and src.columns[-1].name == "__$rowid"
    )
    compiler = Compiler(session, scope)
    where_fn = compiler.predicate(where.this) if where is not None else None
    width = len(table.columns)
    matches: dict[int, tuple[Any, ...]] = {}
    for row in producer():
        if where_fn is None or where_fn(row) is True:
            matches.setdefault(row[offset + width], row)
    return db, table, (scope, compiler), offset, where_fn, matches


def _target_references(
    session: ExecutionContext, target: exp.Table, target_table: Table | None, items: list[Any]
) -> tuple[bool, int]:
    """
    How the target of UPDATE/DELETE ... FROM binds to the FROM clause's tables ``items``.

    Returns whether an item's alias is the target's (unqualified) name, and how many items name the
    target's table. Several references of which none or more than one lack an alias are ambiguous
    (error 8154), as in SQL Server.
    """
    qualified = bool(target.args.get("db") or target.args.get("catalog"))
    name = target.name.lower()
    by_alias = False
    same: list[bool] = []  # per reference to the target's table: whether it has an alias
    for node in items:
        if not isinstance(node, exp.Table):
            if not qualified and node.alias and node.alias.lower() == name:
                by_alias = True
            continue
        if not qualified and node.alias and node.alias.lower() == name:
            by_alias = True
        try:
            _, table, _, _ = session.resolve_table(node, must_exist=False)
        except SqlError:
            continue
        if table is not None and table is target_table:
            same.append(bool(node.alias))
    if not by_alias and len(same) > 1 and same.count(False) != 1:
        raise SqlError(8154, 16, 1, f"The table '{target.name}' is ambiguous.")
    return by_alias, len(same)


def _database_id_of(session: ExecutionContext, table: Table) -> int:
    for db in session.engine.databases.values():
        if any(t is table for t in db.all_tables()):
            return db.database_id
    raise invalid_object(table.name)


def _joined_write(
    session: ExecutionContext,
    node: exp.Expression,
    target: exp.Table,
    frm: Any,
    joins: list[Any],
    sets: list[Any] | None,
) -> int:
    """UPDATE (sets given) or DELETE (sets None) with a FROM clause joining other tables."""
    xact = session.write_xact()
    engine = session.engine
    snap = engine.begin_read(xact)
    session.current_snapshot = snap
    try:
        db, table, (scope, compiler), offset, where_fn, matches = _joined_rows(
            session, target, frm, joins, node.args.get("where"), xact
        )
        session.acquire_table_lock(table, "IX", True)
        width = len(table.columns)
        assignments = []
        for eq in sets or []:
            ci = table.column_index(eq.this.name)
            if ci is None:
                raise invalid_column(eq.this.name)
            col = table.columns[ci]
            if col.identity is not None:
                raise SqlError(8102, 16, 1, f"Cannot update identity column '{col.name}'.")
            if col.computed:
                raise computed_columns.cannot_modify(col.name)
            e = compiler.compile(eq.expression)
            assignments.append((ci, col, e.fn, _assign_converter(e.type, col)))
    finally:
        engine.end_read(snap)
    rv_cols = [i for i, c in enumerate(table.columns) if c.type.name == "timestamp"]
    count = 0
    for rowid, row in _top_rows(session, node, list(matches.items())):

        def compute(current: Any, row: tuple[Any, ...] = row, rowid: int = rowid) -> Any:
            joined = row[:offset] + tuple(current) + (rowid,) + row[offset + width + 1 :]
            if where_fn is not None and where_fn(joined) is not True:
                return ...
            if sets is None:
                return None
            return _updated_row(session, db, table, current, joined, assignments, rv_cols)

        if _write(session, xact, db, table, rowid, compute) == "done":
            count += 1
    return count


def _updated_row(
    session: ExecutionContext,
    db: Any,
    table: Table,
    current: Any,
    source: Any,
    assignments: list[Any],
    rv_cols: list[int],
) -> tuple[Any, ...]:
    """Apply UPDATE's SET ``assignments`` to ``current`` and give its rowversion columns new values.

    :param source: the row the SET expressions read (``current``, or the joined row of UPDATE ... FROM).
    """
    values = list(current)
    for ci, col, fn, conv in assignments:
        v = fn(source)
        if conv is not None and v is not None:
            v = conv(v)
        values[ci] = _check_value(table, db, col, v, "UPDATE")
        session.engine.registry.check_written_value(session.engine, table, col, v)
    for i in rv_cols:
        values[i] = session.engine.next_rowversion(db)
    return tuple(values)


def _update(session: ExecutionContext, node: exp.Update) -> int:
    if not node.expressions:
        raise syntax_error(node.this.name if node.this else "UPDATE")
    frm = node.args.get("from_") or node.args.get("from")
    if frm is not None:
        return _joined_write(
            session,
            node,
            node.this,
            frm.this,
            list(frm.args.get("joins") or []),
            list(node.expressions),
        )
    xact = session.write_xact()
    tnode = node.this
    db, table = _target(session, tnode)
    scope = _table_scope(table, tnode.alias or None)
    compiler = Compiler(session, scope)
    where = node.args.get("where")
    where_fn = compiler.predicate(where.this) if where is not None else None
    sets = []
    for eq in node.expressions:
        if not isinstance(eq, exp.EQ):
            raise not_supported("this SET form")
        target = eq.this
        if isinstance(target, exp.Parameter):
            raise not_supported("SET @variable = column in UPDATE")
        ci = table.column_index(target.name)
        if ci is None:
            raise invalid_column(target.name)
        col = table.columns[ci]
        if col.identity is not None:
            raise SqlError(8102, 16, 1, f"Cannot update identity column '{col.name}'.")
        if col.computed:
            raise computed_columns.cannot_modify(col.name)
        if col.type.name == "timestamp":
            raise SqlError(272, 16, 1, "Cannot update a timestamp column.")
        val = eq.expression
        if (
            isinstance(val, (exp.Var, exp.Column))
            and val.name.upper() == "DEFAULT"
            and not getattr(val, "table", None)
        ):

            def fn(row, col=col):
                return default_value(session, col)

            sets.append((ci, col, fn, None))
            continue
        e = compiler.compile(val)
        sets.append((ci, col, e.fn, _assign_converter(e.type, col)))
    rv_cols = [i for i, c in enumerate(table.columns) if c.type.name == "timestamp"]
    return _write_where(
        session,
        node,
        xact,
        db,
        table,
        tnode,
        where,
        where_fn,
        lambda current: _updated_row(session, db, table, current, current, sets, rv_cols),
    )


def _delete(session: ExecutionContext, node: exp.Delete) -> int:
    tnode = node.this
    tables = node.args.get("tables") or []
    if tables and not isinstance(tnode, exp.Expression):
        tnode = tables[0]
    elif tables:
        # DELETE t FROM dbo.t AS t JOIN ... : the target is named first, the FROM clause follows
        return _joined_write(session, node, tables[0], tnode, [], None)
    if node.args.get("using"):
        raise not_supported("DELETE ... FROM with joins")
    xact = session.write_xact()
    db, table = _target(session, tnode)
    compiler = Compiler(session, _table_scope(table, tnode.alias or None))
    where = node.args.get("where")
    where_fn = compiler.predicate(where.this) if where is not None else None
    return _write_where(session, node, xact, db, table, tnode, where, where_fn, lambda current: None)


def _write_where(
    session: ExecutionContext,
    node: exp.Expression,
    xact: Any,
    db: Any,
    table: Table,
    tnode: Any,
    where: Any,
    where_fn: Any,
    new_row: Callable[[Any], Any],
) -> int:
    """Write ``new_row(current)`` over each row the WHERE clause selects (``None`` deletes it); return the count.

    :param node: the UPDATE or DELETE statement (its ``TOP`` limits the rows).
    """
    engine = session.engine
    snap = engine.begin_read(xact)
    session.current_snapshot = snap
    try:
        candidates = _candidates(session, table, where, tnode, xact, snap, where_fn)
    finally:
        engine.end_read(snap)
    candidates = _top_rows(session, node, candidates)
    count = 0
    for rowid in candidates:

        def compute(current: Any) -> Any:
            if where_fn is not None and where_fn(current) is not True:
                return ...
            return new_row(current)

        if _write(session, xact, db, table, rowid, compute) == "done":
            count += 1
    return count
