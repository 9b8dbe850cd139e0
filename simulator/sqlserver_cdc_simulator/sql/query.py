"""SELECT: compile a query once into a pipeline of generators over row tuples.

The pipeline is FROM (table scans, views, table-valued functions, derived tables, joins: hash
join on equality conditions, nested loops otherwise) -> WHERE -> GROUP BY / aggregates ->
HAVING -> select list -> DISTINCT -> ORDER BY -> TOP / OFFSET-FETCH. A plain column
projection of one table without WHERE / ORDER BY streams straight from the table scan.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator import values as V
from sqlserver_cdc_simulator.collation import ci_key
from sqlserver_cdc_simulator.errors import (
    SqlError,
    arithmetic_overflow,
    must_declare,
    not_supported,
    syntax_error,
)
from sqlserver_cdc_simulator.extensions import ResultColumn

from .compiler import Compiler
from .context import ExecutionContext
from .expressions import (
    AGGREGATES,
    AggContext,
    Expr,
    Scope,
    Source,
    apply_conversion,
    comparison_type,
    converter,
    result_type,
)


@dataclass
class CompiledQuery:
    """A compiled query: its result columns and a function producing the rows."""

    columns: list[ResultColumn]
    producer: Callable[[], Iterable[tuple[Any, ...]]]
    correlated: bool = False
    assignments: list[Any] = field(default_factory=list)

    def run(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.producer())


def row_function(exprs: list[Expr]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """
    One function that builds a result row from a source row, without a per-row loop.

    It is generated as ``lambda r: (r[3], f1(r), ...)`` (plain columns indexed directly, other
    expressions called), the way ``dataclasses`` generates methods: the source text holds only
    integers and fixed names, never anything from the query.
    """
    namespace: dict[str, Any] = {}
    parts = []
    for k, e in enumerate(exprs):
        if e.index >= 0:
            parts.append(f"r[{e.index}]")
        else:
            namespace[f"f{k}"] = e.fn
            parts.append(f"f{k}(r)")
    body = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return eval("lambda r: " + body, namespace)


def _from_clause(node: exp.Expression) -> exp.From | None:
    return node.args.get("from_") or node.args.get("from")


def compile_query(
    session: ExecutionContext, node: exp.Expression, outer: Scope | None = None
) -> CompiledQuery:
    """Compile a SELECT / UNION / subquery."""
    if isinstance(node, exp.Subquery):
        return compile_query(session, node.this, outer)
    if isinstance(node, (exp.Union, exp.Except, exp.Intersect)):
        return _compile_setop(session, node, outer)
    if isinstance(node, exp.Select):
        clause = node.args.get("for_")
        if clause is not None:  # FOR XML / FOR JSON turn the rows into one document
            raise not_supported(f"FOR {clause.args.get('kind') or 'XML'} (the rows as a document)")
        return compile_select(session, node, outer)
    raise not_supported(f"the query form {type(node).__name__}")


# ---------------------------------------------------------------- FROM


@dataclass
class FromItem:
    source: Source
    rows: Callable[[], Iterable[tuple[Any, ...]]]
    table: Any = None
    #: its rows depend on the current row of the enclosing scope (a table function's outer arguments)
    correlated: bool = False


def _table_hints(node: exp.Table) -> list[str]:
    hints = []
    for h in node.args.get("hints") or []:
        for e in h.expressions:
            hints.append(e.name.upper() if hasattr(e, "name") else str(e).upper())
    return hints


def _from_item(session: ExecutionContext, node: exp.Expression, outer: Scope | None) -> FromItem:
    if isinstance(node, exp.Subquery):
        q = compile_query(session, node.this, outer)
        alias = node.alias_or_name
        if not alias:
            raise syntax_error(")")
        return FromItem(Source(alias.lower(), alias, q.columns), q.run)
    if isinstance(node, exp.Select):
        raise SqlError(156, 15, 1, "Incorrect syntax near the keyword 'FROM'.")
    if isinstance(node, exp.Table):
        alias = node.alias
        hints = _table_hints(node)
        return session.table_source(node, alias, hints, outer)
    raise not_supported(f"the FROM item {node.sql(dialect='tsql')[:60]!r}")


def _columns_of(node: exp.Expression, scope: Scope) -> set[int] | None:
    """Row indexes an expression reads, or None if it reads something else (outer columns, ...)."""
    out: set[int] = set()
    for col in node.find_all(exp.Column):
        if isinstance(col.this, exp.Star):
            return None
        try:
            found = scope.resolve(col.name, col.table or None)
        except SqlError:
            return None
        if found is None:
            return None
        out.add(found[0])
    return out


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


def build_from(
    session: ExecutionContext,
    select: exp.Select,
    outer: Scope | None,
    adjust: Callable[[FromItem], FromItem] | None = None,
) -> tuple[Scope, Callable[[], Iterable[tuple[Any, ...]]], list[FromItem]]:
    frm = _from_clause(select)
    scope = Scope(outer=outer)
    if frm is None:
        return scope, lambda: ((),), []
    if adjust is None:

        def adjust(item: FromItem) -> FromItem:
            return item

    items = [adjust(_from_item(session, frm.this, outer))]
    scope.add(items[0].source)
    producer: Callable[[], Iterable[tuple[Any, ...]]] = items[0].rows
    for join in select.args.get("joins") or []:
        if isinstance(join.this, exp.Lateral):
            item, producer = _apply(session, join.this, scope, producer)
            items.append(adjust(item))
            continue
        item = adjust(_from_item(session, join.this, outer))
        left_width = scope.width
        scope.add(item.source)
        items.append(item)
        side = (join.side or "").upper()
        kind = (join.kind or "").upper()
        on = join.args.get("on")
        if join.args.get("using"):
            raise not_supported("JOIN ... USING")
        if kind in ("CROSS",) and join.this and isinstance(join.this, exp.Table) and False:
            pass
        compiler = Compiler(session, scope)
        # equality conditions between the two sides -> hash join
        left_keys: list[Callable[[Any], Any]] = []
        right_keys: list[Callable[[Any], Any]] = []
        residual: list[exp.Expression] = []
        for cj in _conjuncts(on):
            if isinstance(cj, exp.EQ):
                lc = _columns_of(cj.this, scope)
                rc = _columns_of(cj.expression, scope)
                if lc and rc:
                    if max(lc) < left_width <= min(rc):
                        lhs, rhs = cj.this, cj.expression
                    elif max(rc) < left_width <= min(lc):
                        lhs, rhs = cj.expression, cj.this
                    else:
                        residual.append(cj)
                        continue
                    le = compiler.compile(lhs)
                    re_ = compiler.compile(rhs)
                    ct = _key_type(le, re_)
                    lf = apply_conversion(converter(le.type, ct), le.fn)
                    rf = apply_conversion(converter(re_.type, ct), re_.fn)
                    left_keys.append(lf)
                    pad = (None,) * left_width
                    right_keys.append(_shifted(rf, pad))
                    continue
            residual.append(cj)
        cond = None
        if residual:
            node = residual[0]
            for r in residual[1:]:
                node = exp.And(this=node, expression=r)
            cond = compiler.predicate(node)
        producer = _join(
            producer, item.rows, side, left_width, len(item.source.columns), left_keys, right_keys, cond, kind
        )
    if any(item.correlated for item in items):
        scope.correlated = True
    return scope, producer, items


def _apply(
    session: ExecutionContext,
    lateral: exp.Lateral,
    scope: Scope,
    left: Callable[[], Iterable[tuple[Any, ...]]],
) -> tuple[FromItem, Callable[[], Iterable[tuple[Any, ...]]]]:
    """
    CROSS APPLY / OUTER APPLY (from-transact-sql.md): the right side, a table-valued function or a derived
    table, runs once per left row and reads that row's columns; OUTER APPLY keeps left rows it returns nothing for.
    """
    alias = lateral.alias
    body = lateral.this
    if isinstance(body, exp.Subquery):
        if not alias:
            raise syntax_error(")")
        q = compile_query(session, body.this, scope)
        item = FromItem(Source(alias.lower(), alias, q.columns), q.run)
    else:
        fn = body.expression if isinstance(body, exp.Dot) else body
        if not isinstance(fn, exp.Anonymous):
            raise not_supported(f"APPLY of {body.sql(dialect='tsql')[:60]!r}")
        schema = exp.to_identifier(body.this.name) if isinstance(body, exp.Dot) else None
        item = session.table_source(exp.Table(this=fn.copy(), db=schema), alias, [], scope)
        item.correlated = False  # correlated with the left side, which this join feeds row by row
    missing = (None,) * len(item.source.columns)
    scope.add(item.source)
    cell = scope.outer_cell
    keep_unmatched = not lateral.args.get("cross_apply")

    def rows() -> Iterator[tuple[Any, ...]]:
        for lrow in left():
            cell[0] = lrow  # the right side's references to the left side read it
            right = [tuple(r) for r in item.rows()]
            if not right and keep_unmatched:
                yield lrow + missing
            for r in right:
                yield lrow + r

    return item, rows


def _key_type(a: Expr, b: Expr) -> T.SqlType:
    return comparison_type(a.type, b.type)


def _shifted(fn: Callable[[Any], Any], pad: tuple[Any, ...]) -> Callable[[Any], Any]:
    return lambda r: fn(pad + r)


def _join(
    left: Callable[[], Iterable[tuple[Any, ...]]],
    right: Callable[[], Iterable[tuple[Any, ...]]],
    side: str,
    left_width: int,
    right_width: int,
    left_keys: list[Callable[[Any], Any]],
    right_keys: list[Callable[[Any], Any]],
    cond: Callable[[Any], Any] | None,
    kind: str,
) -> Callable[[], Iterable[tuple[Any, ...]]]:
    def gen() -> Iterator[tuple[Any, ...]]:
        right_rows = list(right())
        null_right = (None,) * right_width
        null_left = (None,) * left_width
        matched_right: set[int] = set()

        def probe(lrow: tuple[Any, ...], candidates: Iterable[int]) -> Iterator[tuple[Any, ...]]:
            """The joined rows of *lrow* with the right rows at *candidates* that meet the condition."""
            hit = False
            for i in candidates:
                row = lrow + right_rows[i]
                if cond is None or cond(row) is True:
                    hit = True
                    matched_right.add(i)
                    yield row
            if not hit and side in ("LEFT", "FULL"):
                yield lrow + null_right

        if left_keys:
            table: dict[Any, list[int]] = {}
            for i, r in enumerate(right_rows):
                k = tuple(ci_key(f(r)) for f in right_keys)
                if None in k:
                    continue
                table.setdefault(k, []).append(i)
            for lrow in left():
                k = tuple(ci_key(f(lrow)) for f in left_keys)
                yield from probe(lrow, () if None in k else table.get(k, ()))
        else:
            every = range(len(right_rows))
            for lrow in left():
                yield from probe(lrow, every)
        if side in ("RIGHT", "FULL"):
            for i, r in enumerate(right_rows):
                if i not in matched_right:
                    yield null_left + r

    return gen


# ---------------------------------------------------------------- SELECT


def _has_aggregate(node: exp.Expression) -> bool:
    """True if *node* calls an aggregate of this query level (not inside a subquery or an OVER clause)."""
    for n in node.walk():
        if isinstance(n, exp.GroupConcat) or (isinstance(n, exp.Anonymous) and n.name.upper() in AGGREGATES):
            if n is node:
                return True
            p = n.parent
            inside = False
            while p is not None:
                if isinstance(p, exp.Window) or (p is not node and isinstance(p, (exp.Subquery, exp.Select))):
                    inside = True
                    break
                if p is node:
                    break
                p = p.parent
            if not inside:
                return True
    return False


def expand_star(item: exp.Expression, scope: Scope) -> list[tuple[str, Expr]] | None:
    if isinstance(item, exp.Star):
        sources = scope.sources
    elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
        q = item.table.lower()
        sources = [s for s in scope.sources if s.alias == q or s.name.lower().split(".")[-1] == q]
        if not sources:
            raise SqlError(4104, 16, 1, f'The multi-part identifier "{item.table}" could not be bound.')
    else:
        return None
    if not sources:
        raise SqlError(263, 16, 1, "Must specify table to select from.")
    out = []
    for s in sources:
        for i, c in enumerate(s.columns):
            idx = s.offset + i
            out.append((c.name, Expr(operator.itemgetter(idx), c.type, c.nullable, c.name, False, idx)))
    return out


def select_list(
    items: list[exp.Expression], scope: Scope, compiler: Compiler, stars_allowed: bool = True
) -> tuple[list[str], list[Expr]]:
    """The column names and compiled expressions of a select list, ``*`` and ``t.*`` expanded.

    :param scope: the FROM sources a star expands to.
    :param compiler: compiles the other items (against the groups, in an aggregate query).
    :param stars_allowed: False in an aggregate query, where a star is error 8120.
    """
    names: list[str] = []
    exprs: list[Expr] = []
    for item in items:
        stars = expand_star(item, scope)
        if stars is not None:
            if not stars_allowed:
                raise SqlError(
                    8120,
                    16,
                    1,
                    "Column is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause.",
                )
            for name, e in stars:
                names.append(name)
                exprs.append(e)
            continue
        e = compiler.compile(item)
        exprs.append(e)
        names.append(output_name(item, e))
    return names, exprs


def output_name(item: exp.Expression, e: Expr) -> str:
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    return ""


def top_count(session: ExecutionContext, node: exp.Expression | None) -> tuple[int | None, bool, bool]:
    """``TOP`` of a statement as (count or percentage, PERCENT given, WITH TIES given); ``None`` without TOP."""
    if node is None:
        return None, False, False
    opts = node.args.get("limit_options")
    percent = bool(opts and opts.args.get("percent"))
    ties = bool(opts and opts.args.get("with_ties"))
    value_node = node.args.get("expression") or node.args.get("count")
    c = Compiler(session, Scope())
    v = c.compile(value_node).fn(None)
    if v is None or (not percent and int(v) < 0):
        raise SqlError(1060, 15, 1, "The number of rows in the TOP clause must be an integer.")
    return (int(v) if not percent else v), percent, ties


def compile_select(
    session: ExecutionContext, select: exp.Select, outer: Scope | None = None
) -> CompiledQuery:
    """Compile one SELECT."""
    with_ = select.args.get("with_") or select.args.get("with")
    if with_ is not None:
        return _with_ctes(session, select, with_, outer)
    if select.args.get("into"):
        raise not_supported("SELECT ... INTO")
    if not select.expressions:
        raise syntax_error("SELECT")
    scope, producer, items = build_from(session, select, outer)
    compiler = Compiler(session, scope)
    where = select.args.get("where")
    where_fn = compiler.predicate(where.this) if where is not None else None

    # variable assignment: SELECT @x = expr, ...
    sel_items = list(select.expressions)
    if sel_items and all(isinstance(i, exp.EQ) and isinstance(i.this, exp.Parameter) for i in sel_items):
        return _assignment_select(session, select, scope, compiler, producer, where_fn)

    group = select.args.get("group")
    having = select.args.get("having")
    is_agg = group is not None or having is not None or any(_has_aggregate(i) for i in sel_items)

    agg: AggContext | None = None
    if is_agg:
        group_nodes = list(group.expressions) if group is not None else []
        group_exprs = [compiler.compile(g) for g in group_nodes]
        agg = AggContext(group_nodes, group_exprs)
        agg_scope = Scope(outer=outer)
        out_compiler = Compiler(session, agg_scope, agg=agg, source_compiler=compiler)
    else:
        out_compiler = compiler
    windows = _window_nodes(select)
    window_specs: list[_WindowSpec] = []
    if windows:
        if is_agg:
            raise not_supported("window functions in a query with GROUP BY or aggregates")
        window_specs = [_compile_window(compiler, w, scope.width + k) for k, w in enumerate(windows)]
        compiler.window_slots = [
            (w, spec.slot, spec.type) for w, spec in zip(windows, window_specs, strict=True)
        ]
    names, out_exprs = select_list(sel_items, scope, out_compiler, stars_allowed=not is_agg)
    having_fn = out_compiler.predicate(having.this) if having is not None else None

    # ORDER BY keys: ordinal, output alias, or an expression over the source row
    order = select.args.get("order")
    # (where, output position or source-row function, DESC, type)
    order_keys: list[tuple[str, int | Callable[[Any], Any], bool, T.SqlType]] = []
    lower_names = [n.lower() for n in names]
    if order is not None:
        for o in order.expressions:
            desc = bool(o.args.get("desc"))
            target = o.this
            if isinstance(target, exp.Literal) and not target.is_string:
                pos = int(target.this) - 1
                if not 0 <= pos < len(out_exprs):
                    raise SqlError(
                        108,
                        15,
                        1,
                        f"The ORDER BY position number {pos + 1} is out of range of the number of items in the select list.",
                    )
                order_keys.append(("out", pos, desc, out_exprs[pos].type))
                continue
            if isinstance(target, exp.Column) and not target.table and target.name.lower() in lower_names:
                alias_matches = [
                    i
                    for i, it in enumerate(sel_items)
                    if isinstance(it, exp.Alias) and it.alias.lower() == target.name.lower()
                ]
                pos = alias_matches[0] if alias_matches else lower_names.index(target.name.lower())
                order_keys.append(("out", pos, desc, out_exprs[pos].type))
                continue
            matched = [
                i
                for i, it in enumerate(sel_items)
                if (it.this if isinstance(it, exp.Alias) else it) == target
            ]
            if matched and len(out_exprs) == len(sel_items):
                order_keys.append(("out", matched[0], desc, out_exprs[matched[0]].type))
                continue
            if select.args.get("distinct"):
                raise SqlError(
                    145,
                    15,
                    1,
                    "ORDER BY items must appear in the select list if SELECT DISTINCT is specified.",
                )
            key_expr = out_compiler.compile(target)
            order_keys.append(("src", key_expr.fn, desc, key_expr.type))
    order_desc = [k[2] for k in order_keys]
    # output values have the column's declared type (the TDS encoder relies on it); expressions
    # only used for sorting always get the collation key
    order_text = [k[0] == "src" or may_hold_text(k[3]) for k in order_keys]

    top, top_percent, top_ties = top_count(session, select.args.get("limit"))
    offset_node = select.args.get("offset")
    offset = (
        int(Compiler(session, Scope()).compile(offset_node.expression).fn(None))
        if offset_node is not None
        else 0
    )
    distinct = select.args.get("distinct") is not None
    if top_ties:
        raise not_supported("TOP ... WITH TIES")

    columns = [ResultColumn(n, e.type, e.nullable) for n, e in zip(names, out_exprs, strict=True)]
    if len(items) == 1 and items[0].table is not None and where is not None and not select.args.get("joins"):
        lookup = key_lookup(session, items[0].table, where.this, scope)
        if lookup is not None:
            base_table = items[0].table

            def point_rows(lookup: Callable[[], set[int]] = lookup) -> Iterator[tuple[Any, ...]]:
                xact = session.xact
                snap = session.current_snapshot
                for rid in sorted(lookup()):
                    vals = base_table.visible(rid, xact, snap)
                    if vals is not None:
                        yield vals

            producer = point_rows
    build_row = row_function(out_exprs)
    src_key_fns = [k[1] for k in order_keys if k[0] == "src"]
    build_src_keys = row_function([Expr(f, T.INT) for f in src_key_fns])  # type: ignore[arg-type]
    # When every ORDER BY key is a plain column of the result or an expression over the source
    # row, rows are sorted before the select list is computed: result rows are then built (and
    # their CASTs and function calls run) while they stream, not all before the first is sent.
    # A computed result column used as a key (it may be non-deterministic, e.g. NEWID()) and
    # DISTINCT (which needs the result rows) sort the result rows instead.
    source_keys: list[Callable[[Any], Any]] | None = None
    if order_keys and not distinct and all(k[0] == "src" or out_exprs[k[1]].index >= 0 for k in order_keys):
        source_keys = [
            operator.itemgetter(out_exprs[k[1]].index) if k[0] == "out" else k[1]  # type: ignore[index,misc]
            for k in order_keys
        ]
    correlated = scope.correlated

    # -- fast path: plain column projection of one source
    simple_cols = None
    plain = (
        not is_agg
        and where_fn is None
        and not order_keys
        and not distinct
        and len(items) == 1
        and not windows
    )
    if plain and all(e.index >= 0 for e in out_exprs):
        simple_cols = [e.index for e in out_exprs]

    def project(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        if simple_cols is not None:
            width = len(items[0].source.columns) if items else 0
            if simple_cols == list(range(width)):
                return iter(rows)
            if len(simple_cols) == 1:
                i0 = simple_cols[0]
                return ((r[i0],) for r in rows)
            return map(operator.itemgetter(*simple_cols), rows)
        return map(build_row, rows)

    def produce() -> Iterable[tuple[Any, ...]]:
        rows: Iterable[tuple[Any, ...]] = producer()
        if where_fn is not None:
            rows = (r for r in rows if where_fn(r) is True)
        if window_specs:
            rows = _apply_windows(list(rows), window_specs)
        if is_agg:
            rows = _aggregate(rows, agg)
            if having_fn is not None:
                rows = (r for r in rows if having_fn(r) is True)
        if source_keys is not None:
            # sort the source rows, then build result rows while streaming (as a table scan does)
            source = list(rows)
            key_columns = [list(map(f, source)) for f in source_keys]
            order_rows = sort_order(key_columns, order_desc, order_text)
            result: Iterable[tuple[Any, ...]] = map(build_row, map(source.__getitem__, order_rows))
        elif order_keys:
            if src_key_fns:
                # SELECT DISTINCT allows no such key (error 145), so no DISTINCT here
                outs = []
                srcs = []
                for r in rows:
                    outs.append(build_row(r))
                    srcs.append(build_src_keys(r))
            else:
                outs = list(map(build_row, rows))
                if distinct:
                    outs = list(_distinct(outs))
            key_columns = []
            si = 0
            for k in order_keys:
                if k[0] == "out":
                    pos = k[1]
                    key_columns.append([o[pos] for o in outs])
                else:
                    key_columns.append([v[si] for v in srcs])
                    si += 1
            result = map(outs.__getitem__, sort_order(key_columns, order_desc, order_text))
        else:
            result = project(rows)
            if distinct:
                result = _distinct(result)
        if offset:
            result = itertools.islice(result, offset, None)
        if top is not None:
            if top_percent:
                materialized = list(result)
                n = math.ceil(len(materialized) * float(top) / 100)
                result = materialized[:n]
            else:
                result = itertools.islice(result, top)
        return result

    return CompiledQuery(columns, produce, correlated)


def _with_ctes(
    session: ExecutionContext, select: exp.Select, with_: exp.With, outer: Scope | None
) -> CompiledQuery:
    """Compile a SELECT with common table expressions (non-recursive): each CTE is a named derived table."""
    if with_.args.get("recursive"):
        raise not_supported("recursive common table expressions")
    ctes = session.ctes
    saved = dict(ctes)
    try:
        for cte in with_.expressions:
            name = cte.alias.lower()
            cols = [c.name for c in cte.args["alias"].columns] if cte.args.get("alias") is not None else []
            ctes[name] = (cte.this, cols)
        inner = select.copy()
        inner.set("with_", None)
        inner.set("with", None)
        return compile_select(session, inner, outer)
    finally:
        ctes.clear()
        ctes.update(saved)


def cte_item(session: ExecutionContext, name: str, alias: str) -> FromItem | None:
    """A FROM item for a common table expression named *name*, if one is in scope."""
    entry = session.ctes.get(name.lower())
    if entry is None:
        return None
    node, cols = entry
    compiling = session.ctes_compiling
    if name.lower() in compiling:
        raise not_supported("recursive common table expressions")
    compiling.add(name.lower())
    try:
        q = compile_query(session, node)
    finally:
        compiling.discard(name.lower())
    columns = q.columns
    if cols:
        if len(cols) != len(columns):
            raise SqlError(8158, 16, 1, f"'{name}' has more columns than were specified in the column list.")
        columns = [ResultColumn(n, c.type, c.nullable) for n, c in zip(cols, columns, strict=True)]
    return FromItem(Source((alias or name).lower(), name, columns), q.run)


def key_lookup(
    session: ExecutionContext, table: Any, where: exp.Expression | None, scope: Scope
) -> Callable[[], set[int]] | None:
    """Row ids a WHERE clause can match, when it fixes every column of a unique index to a value.

    Returns a function giving the candidate row ids (current and older versions' keys), or None
    when no unique index applies; callers still check visibility and the full WHERE clause.
    """
    if where is None or not table.indexes:
        return None
    compiler = Compiler(session, scope)
    width = len(table.columns)
    values: dict[int, Expr] = {}
    for cj in _conjuncts(where):
        if not isinstance(cj, exp.EQ):
            continue
        for col_side, val_side in ((cj.this, cj.expression), (cj.expression, cj.this)):
            if not isinstance(col_side, exp.Column) or isinstance(col_side.this, exp.Star):
                continue
            if val_side.find(exp.Column) is not None or val_side.find(exp.Select) is not None:
                continue
            try:
                found = scope.resolve(col_side.name, col_side.table or None)
            except SqlError:
                continue
            if found is None or found[0] >= width:
                continue
            values[found[0]] = compiler.compile(val_side)
            break
    for ix in table.indexes:
        if not ix.unique or not ix.positions or not all(p in values for p in ix.positions):
            continue
        fns = [
            apply_conversion(converter(values[p].type, table.columns[p].type), values[p].fn)
            for p in ix.positions
        ]

        def lookup(ix: Any = ix, fns: list[Callable[[Any], Any]] = fns) -> set[int]:
            try:
                key = tuple(ci_key(f(())) for f in fns)
            except SqlError:
                return set(table.rows)  # let the full scan raise the conversion error
            found: set[int] = set(ix.old_keys.get(key, ()))
            rid = ix.keys.get(key)
            if rid is not None:
                found.add(rid)
            return found

        return lookup
    return None


@dataclass
class _WindowSpec:
    kind: str
    partition: list[Callable[[Any], Any]]
    order: list[tuple[Callable[[Any], Any], bool]]
    arg: Callable[[Any], Any] | None
    type: T.SqlType
    slot: int


_RANKING = {"ROW_NUMBER", "RANK", "DENSE_RANK"}
_WINDOW_AGGREGATES = {"SUM", "COUNT", "COUNT_BIG", "MIN", "MAX", "AVG"}


def _window_nodes(select: exp.Select) -> list[exp.Window]:
    found: list[exp.Window] = []
    for item in list(select.expressions) + (
        list(select.args["order"].expressions) if select.args.get("order") else []
    ):
        for w in item.find_all(exp.Window):
            p = w.parent if w is not item else None
            nested = False
            while p is not None and p is not item:
                if isinstance(p, (exp.Select, exp.Subquery)):
                    nested = True
                    break
                p = p.parent
            if not nested and not any(w == f for f in found):
                found.append(w)
    return found


def _compile_window(compiler: Compiler, node: exp.Window, slot: int) -> _WindowSpec:
    fn = node.this
    name = fn.name.upper() if isinstance(fn, exp.Anonymous) else type(fn).__name__.upper()
    if node.args.get("spec") is not None:
        raise not_supported("window frames (ROWS / RANGE)")
    partition = [compiler.compile(p).fn for p in node.args.get("partition_by") or []]
    order_node = node.args.get("order")
    order = [
        (compiler.compile(o.this).fn, bool(o.args.get("desc")))
        for o in (order_node.expressions if order_node else [])
    ]
    arg = None
    if name in _RANKING:
        if not order:
            raise SqlError(4112, 16, 1, f"The function '{name}' must have an OVER clause with ORDER BY.")
        t = T.BIGINT
    elif name in _WINDOW_AGGREGATES:
        args = list(fn.expressions)
        if args and isinstance(args[0], exp.Distinct):
            raise not_supported("DISTINCT in windowed aggregates")
        if args and not isinstance(args[0], exp.Star):
            e = compiler.compile(args[0])
            arg = e.fn
            at = e.type
        else:
            at = T.INT
        if name in ("COUNT", "COUNT_BIG"):
            t = T.INT if name == "COUNT" else T.BIGINT
        elif name in ("MIN", "MAX"):
            t = at
        elif at.name in ("decimal", "numeric"):
            t = T.SqlType("decimal", precision=38, scale=at.scale if name == "SUM" else max(6, at.scale))
        elif at.name in T.INTEGER_TYPES:
            t = T.BIGINT if at.name == "bigint" else T.INT
        elif at.name in ("money", "smallmoney"):
            t = T.MONEY
        else:
            t = T.FLOAT
    else:
        raise not_supported(f"the window function {name}")
    return _WindowSpec(name, partition, order, arg, t, slot)


def _apply_windows(rows: list[tuple[Any, ...]], specs: list[_WindowSpec]) -> list[tuple[Any, ...]]:
    columns: list[list[Any]] = []
    for spec in specs:
        values: list[Any] = [None] * len(rows)
        groups: dict[Any, list[int]] = {}
        for i, r in enumerate(rows):
            groups.setdefault(tuple(ci_key(f(r)) for f in spec.partition), []).append(i)
        order_desc = [desc for _f, desc in spec.order]
        for idxs in groups.values():
            keyed = [((tuple(f(rows[i]) for f, _d in spec.order),), i) for i in idxs]
            if spec.order:
                key_columns = [[p[0][0][k] for p in keyed] for k in range(len(spec.order))]
                order_text = [True] * len(spec.order)
                keyed = [keyed[j] for j in sort_order(key_columns, order_desc, order_text)]
            if spec.kind in _RANKING:
                rank = dense = 0
                prev = object()
                for n, (key, i) in enumerate(keyed, start=1):
                    k = tuple(ci_key(v) for v in key[0])
                    if k != prev:
                        rank = n
                        dense += 1
                        prev = k
                    values[i] = n if spec.kind == "ROW_NUMBER" else (rank if spec.kind == "RANK" else dense)
                continue
            # aggregates: whole partition without ORDER BY, running (peers together) with it
            peers: list[list[int]] = []
            prev = object()
            for key, i in keyed:
                k = tuple(ci_key(v) for v in key[0]) if spec.order else None
                if not peers or k != prev or not spec.order:
                    if spec.order or not peers:
                        peers.append([])
                    prev = k
                peers[-1].append(i)
            acc: list[Any] = []
            for group in peers:
                for i in group:
                    v = spec.arg(rows[i]) if spec.arg is not None else 1
                    if v is not None:
                        acc.append(v)
                result = _window_value(spec, acc)
                for i in group:
                    values[i] = result
        columns.append(values)
    return [r + tuple(col[i] for col in columns) for i, r in enumerate(rows)]


def _window_value(spec: _WindowSpec, acc: list[Any]) -> Any:
    kind = spec.kind
    if kind in ("COUNT", "COUNT_BIG"):
        return len(acc)
    if not acc:
        return None
    if kind == "MIN":
        return min(acc, key=ci_key)
    if kind == "MAX":
        return max(acc, key=ci_key)
    total = sum(acc[1:], acc[0])
    if kind == "SUM":
        return V.quantize(total, spec.type.scale) if spec.type.name == "decimal" else total
    if spec.type.name in T.INTEGER_TYPES:
        q = abs(total) // len(acc)
        return q if total >= 0 else -q
    if spec.type.name == "float":
        return float(total) / len(acc)
    return V.quantize(V.DECIMAL_CONTEXT.divide(total, len(acc)), spec.type.scale)


_NEVER_TEXT_TYPES = (
    T.INTEGER_TYPES
    | T.EXACT_TYPES
    | T.FLOAT_TYPES
    | T.BINARY_TYPES
    | T.TEMPORAL_TYPES
    | frozenset({"uniqueidentifier"})
)


def may_hold_text(t: T.SqlType | None) -> bool:
    """True unless values of type *t* are certainly not strings (strings need their collation key)."""
    return t is None or t.name not in _NEVER_TEXT_TYPES


def sort_order(columns: list[list[Any]], descending: list[bool], text: list[bool]) -> list[int]:
    """
    Row positions in ORDER BY order, computed with key functions (no Python comparison function).

    NULLs sort first ascending and last descending, strings compare with ``ci_key`` (the engine's
    case- and trailing-space-insensitive collation), ties keep their input order. Runs of keys
    with the same direction are sorted in one pass; passes go from the last run to the first
    (Python's sort is stable, also with ``reverse=True``), which orders mixed ASC / DESC keys
    exactly as a lexicographic comparison would.

    :param columns: one list of values per ORDER BY key, each as long as the rows.
    :param descending: per key, True for DESC.
    :param text: per key, False when its values are certainly not strings (skips ``ci_key``).
    """
    keys: list[list[Any]] = []
    for values, may_be_text in zip(columns, text, strict=True):
        if may_be_text:
            values = [ci_key(v) for v in values]
        if None in values:
            values = [(False, None) if v is None else (True, v) for v in values]
        keys.append(values)
    order = list(range(len(columns[0]) if columns else 0))
    end = len(keys)
    while end > 0:
        start = end - 1
        while start > 0 and descending[start - 1] == descending[end - 1]:
            start -= 1
        run = keys[start:end]
        key = run[0] if len(run) == 1 else list(zip(*run, strict=True))
        order.sort(key=key.__getitem__, reverse=descending[end - 1])
        end = start
    return order


def _distinct(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    seen = set()
    for r in rows:
        k = tuple(ci_key(v) for v in r)
        if k not in seen:
            seen.add(k)
            yield r


def _aggregate(rows: Iterable[tuple[Any, ...]], agg: AggContext) -> Iterator[tuple[Any, ...]]:
    gfns = [g.fn for g in agg.group_exprs]
    specs = agg.aggs
    groups: dict[Any, list[Any]] = {}
    firsts: dict[Any, tuple[Any, ...]] = {}
    for r in rows:
        gvals = tuple(f(r) for f in gfns)
        key = tuple(ci_key(v) for v in gvals)
        states = groups.get(key)
        if states is None:
            states = [_init(s) for s in specs]
            groups[key] = states
            firsts[key] = gvals
        for i, s in enumerate(specs):
            _step(s, states, i, r)
    if not groups and not gfns:
        groups[()] = [_init(s) for s in specs]
        firsts[()] = ()
    for key, states in groups.items():
        yield firsts[key] + tuple(_final(s, states[i]) for i, s in enumerate(specs))


def _init(spec: Any) -> Any:
    if spec.distinct:
        return set()
    if spec.kind in ("COUNT", "COUNT_BIG"):
        return 0
    if spec.kind == "AVG":
        return [None, 0]
    if spec.kind == "STRING_AGG":
        return []
    return None


def _step(spec: Any, states: list[Any], i: int, row: tuple[Any, ...]) -> None:
    kind = spec.kind
    if spec.arg is None:  # COUNT(*)
        states[i] += 1
        return
    v = spec.arg.fn(row)
    if v is None:
        return
    if spec.distinct:
        states[i].add(v)
        return
    cur = states[i]
    if kind in ("COUNT", "COUNT_BIG"):
        states[i] = cur + 1
    elif kind == "SUM":
        states[i] = v if cur is None else cur + v
    elif kind == "MIN":
        if cur is None or ci_key(v) < ci_key(cur):
            states[i] = v
    elif kind == "MAX":
        if cur is None or ci_key(v) > ci_key(cur):
            states[i] = v
    elif kind == "AVG":
        cur[0] = v if cur[0] is None else cur[0] + v
        cur[1] += 1
    elif kind == "STRING_AGG":
        cur.append(v)


def _final(spec: Any, state: Any) -> Any:
    kind = spec.kind
    if spec.distinct:
        vals = list(state)
        if kind in ("COUNT", "COUNT_BIG"):
            return len(vals)
        if not vals:
            return None
        if kind == "SUM":
            state = sum(vals[1:], vals[0])
        elif kind == "MIN":
            return min(vals, key=ci_key)
        elif kind == "MAX":
            return max(vals, key=ci_key)
        elif kind == "AVG":
            state = [sum(vals[1:], vals[0]), len(vals)]
    if kind == "AVG":
        total, n = state
        if total is None:
            return None
        if spec.type.name in T.INTEGER_TYPES:
            q = abs(total) // n
            return q if total >= 0 else -q
        if spec.type.name == "float":
            return float(total) / n
        return (
            V.quantize(V.DECIMAL_CONTEXT.divide(total, n), spec.type.scale)
            if spec.type.name != "money"
            else V.quantize(V.DECIMAL_CONTEXT.divide(total, n), 4)
        )
    if kind == "SUM" and state is not None:
        if spec.type.name == "int" and not -(2**31) <= state < 2**31:
            raise arithmetic_overflow("int")
        if spec.type.name in ("decimal", "numeric"):
            return V.quantize(state, spec.type.scale)
    if kind == "STRING_AGG":
        return None if not state else spec.extra.join(state)
    return state


def _assignment_select(
    session: ExecutionContext,
    select: exp.Select,
    scope: Scope,
    compiler: Compiler,
    producer: Any,
    where_fn: Any,
) -> CompiledQuery:
    targets = []
    is_agg = any(_has_aggregate(i) for i in select.expressions)
    if is_agg or select.args.get("group"):
        agg = AggContext([], [])
        out_compiler = Compiler(session, Scope(outer=scope.outer), agg=agg, source_compiler=compiler)
    else:
        agg = None
        out_compiler = compiler
    for item in select.expressions:
        name = "@" + item.this.name
        var = session.variables.get(name.lower())
        if var is None:
            raise must_declare(name)
        e = out_compiler.compile(item.expression)
        targets.append((var, apply_conversion(converter(e.type, var.type), e.fn)))

    def produce() -> Iterable[tuple[Any, ...]]:
        rows: Iterable[tuple[Any, ...]] = producer()
        if where_fn is not None:
            rows = (r for r in rows if where_fn(r) is True)
        if agg is not None:
            rows = _aggregate(rows, agg)
        n = 0
        for r in rows:
            n += 1
            for var, f in targets:
                var.value = f(r)
        session.last_rowcount = n
        return iter(())

    return CompiledQuery([], produce, False, assignments=targets)


def _compile_setop(session: ExecutionContext, node: exp.Expression, outer: Scope | None) -> CompiledQuery:
    left = compile_query(session, node.this, outer)
    right = compile_query(session, node.expression, outer)
    if len(left.columns) != len(right.columns):
        raise SqlError(
            205,
            16,
            1,
            "All queries combined using a UNION, INTERSECT or EXCEPT operator must have an equal number of expressions in their target lists.",
        )
    types = []
    for a, b in zip(left.columns, right.columns, strict=True):
        types.append(result_type([Expr(lambda r: None, a.type), Expr(lambda r: None, b.type)]))
    lconv = [converter(a.type, t) for a, t in zip(left.columns, types, strict=True)]
    rconv = [converter(b.type, t) for b, t in zip(right.columns, types, strict=True)]
    columns = [
        ResultColumn(a.name, t, a.nullable or b.nullable)
        for a, b, t in zip(left.columns, right.columns, types, strict=True)
    ]
    distinct = node.args.get("distinct") is not False
    kind = type(node).__name__

    def conv(rows: Iterable[tuple[Any, ...]], convs: list[Any]) -> Iterator[tuple[Any, ...]]:
        if all(c is None for c in convs):
            return iter(rows)
        return (
            tuple(v if c is None or v is None else c(v) for v, c in zip(r, convs, strict=True)) for r in rows
        )

    def produce() -> Iterable[tuple[Any, ...]]:
        if kind == "Union":
            rows: Iterable[tuple[Any, ...]] = itertools.chain(
                conv(left.run(), lconv), conv(right.run(), rconv)
            )
            if distinct:
                rows = _distinct(rows)
        else:
            rkeys = {tuple(ci_key(v) for v in r) for r in conv(right.run(), rconv)}
            if kind == "Except":
                rows = _distinct(
                    r for r in conv(left.run(), lconv) if tuple(ci_key(v) for v in r) not in rkeys
                )
            else:
                rows = _distinct(r for r in conv(left.run(), lconv) if tuple(ci_key(v) for v in r) in rkeys)
        order = node.args.get("order")
        if order is not None:
            specs = []
            names = [c.name.lower() for c in columns]
            for o in order.expressions:
                t = o.this
                if isinstance(t, exp.Literal):
                    pos = int(t.this) - 1
                elif isinstance(t, exp.Column) and t.name.lower() in names:
                    pos = names.index(t.name.lower())
                else:
                    raise SqlError(
                        104,
                        16,
                        1,
                        "ORDER BY items must appear in the select list if the statement contains a UNION, INTERSECT or EXCEPT operator.",
                    )
                specs.append((pos, bool(o.args.get("desc"))))
            materialized = list(rows)
            key_columns = [[r[pos] for r in materialized] for pos, _desc in specs]
            order_text = [may_hold_text(columns[pos].type) for pos, _desc in specs]
            order = sort_order(key_columns, [desc for _pos, desc in specs], order_text)
            rows = [materialized[i] for i in order]
        limit = node.args.get("limit")
        if limit is not None:
            n, _, _ = top_count(session, limit)
            rows = itertools.islice(rows, n)
        return rows

    return CompiledQuery(columns, produce, left.correlated or right.correlated)
