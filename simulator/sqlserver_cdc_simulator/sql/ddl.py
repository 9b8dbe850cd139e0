"""DDL: databases, schemas, tables, columns, constraints, indexes, logins, users and roles.

CREATE TABLE and ALTER TABLE are parsed here from tokens (T-SQL's column and constraint
grammar); simpler statements use sqlglot's tree. Every change to a database is recorded in
the session's transaction with an undo action, so ROLLBACK undoes DDL too, and in the
database's transaction log as a :class:`~..log.DdlOperation`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.collation import ci_key
from sqlserver_cdc_simulator.column_conversion import convert_column_value
from sqlserver_cdc_simulator.errors import (
    SqlError,
    cannot_drop,
    fixed_principal,
    invalid_object,
    missing_principal,
    not_supported,
    null_not_allowed,
    object_exists,
    owns_schema,
    role_has_members,
    syntax_error,
)
from sqlserver_cdc_simulator.events import StatementDone
from sqlserver_cdc_simulator.extensions import DdlEvent
from sqlserver_cdc_simulator.log import SchemaChange
from sqlserver_cdc_simulator.storage import Column, Index, Principal, Schema, Table

from . import computed_columns, statement_errors
from .context import ExecutionContext
from .dialect import RawStatement, parse_expression
from .dml import default_value


class _Cursor:
    def __init__(self, raw: RawStatement, pos: int = 0) -> None:
        self.raw = raw
        self.toks = _split_multiword(raw.tokens)
        self.pos = pos

    def peek(self, k: int = 0) -> Token | None:
        i = self.pos + k
        return self.toks[i] if i < len(self.toks) else None

    def word(self, k: int = 0) -> str:
        t = self.peek(k)
        if t is None:
            return ""
        if t.token_type in (TokenType.IDENTIFIER, TokenType.STRING, TokenType.NATIONAL_STRING):
            return "\0" + t.text
        return t.text.upper()

    def take(self) -> Token:
        t = self.peek()
        if t is None:
            last = self.toks[-1].text if self.toks else ""
            raise syntax_error(last)
        self.pos += 1
        return t

    def accept(self, *words: str) -> bool:
        if self.word() in words:
            self.pos += 1
            return True
        return False

    def constraint_name(self) -> str | None:
        """Consume ``CONSTRAINT name`` if it comes next; the name, or None."""
        return self.name() if self.accept("CONSTRAINT") else None

    def if_exists(self) -> bool:
        """Consume ``IF EXISTS`` if it comes next; whether it did."""
        if self.accept("IF"):
            self.expect("EXISTS")
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            t = self.peek()
            raise syntax_error(t.text if t else (self.toks[-1].text if self.toks else ""))

    def name(self) -> str:
        t = self.take()
        if t.token_type in (TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA):
            raise syntax_error(t.text)
        if t.text in ("#", "##"):  # temporary table: '#' is a token of its own
            return t.text + self.take().text
        return t.text

    def dotted(self) -> list[str]:
        parts = [self.name()]
        while self.peek() is not None and self.peek().token_type == TokenType.DOT:
            self.pos += 1
            parts.append(self.name())
        return parts

    def balanced_text(self) -> str:
        """The text of a parenthesised group (cursor on '('), without the outer parentheses."""
        start = self.take()
        depth = 1
        first = None
        last = start
        while depth:
            t = self.take()
            if t.token_type == TokenType.L_PAREN:
                depth += 1
            elif t.token_type == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    break
            if first is None:
                first = t
            last = t
        if first is None:
            return ""
        base = self.toks[0].start
        return self.raw.text[first.start - base : last.end - base + 1]

    def text_between(self, a: Token, b: Token) -> str:
        base = self.toks[0].start
        return self.raw.text[a.start - base : b.end - base + 1]

    def at_end(self) -> bool:
        return self.pos >= len(self.toks)


def _split_multiword(tokens: list[Token]) -> list[Token]:
    """sqlglot makes one token of keyword pairs such as ``PRIMARY KEY``: split them."""
    out = []
    for t in tokens:
        if (
            t.token_type not in (TokenType.IDENTIFIER, TokenType.STRING, TokenType.NATIONAL_STRING)
            and " " in t.text.strip()
        ):
            offset = 0
            for part in t.text.split():
                i = t.text.index(part, offset)
                offset = i + len(part)
                out.append(
                    Token(TokenType.VAR, part, t.line, t.col, t.start + i, t.start + i + len(part) - 1)
                )
        else:
            out.append(t)
    return out


def _parse_type(c: _Cursor) -> T.SqlType:
    parts = c.dotted()
    tname = parts[-1]
    args: list[str] = []
    if c.peek() is not None and c.peek().token_type == TokenType.L_PAREN:
        args = [a.strip() for a in c.balanced_text().split(",")]
    return T.make_type(tname, args)


# words that start a column constraint (a computed column's expression also ends at them)
_CONSTRAINT_START = {"CONSTRAINT", "PRIMARY", "UNIQUE", "NOT", "NULL", "CHECK", "REFERENCES", "FOREIGN"}
_COLUMN_STOP = _CONSTRAINT_START | {
    "IDENTITY",
    "DEFAULT",
    "COLLATE",
    "ROWGUIDCOL",
    "CLUSTERED",
    "NONCLUSTERED",
    "SPARSE",
}


def _default_text(c: _Cursor) -> str:
    t = c.peek()
    if t is None:
        raise syntax_error("DEFAULT")
    if t.token_type == TokenType.L_PAREN:
        return c.balanced_text()
    first = c.take()
    last = first
    if first.text == "-" or first.text == "+":
        last = c.take()
    if c.peek() is not None and c.peek().token_type == TokenType.L_PAREN:
        c.balanced_text()
        last = c.toks[c.pos - 1]
    return c.text_between(first, last)


def _index_columns(c: _Cursor) -> tuple[list[str], list[bool]]:
    if c.peek() is None or c.peek().token_type != TokenType.L_PAREN:
        raise syntax_error(c.peek().text if c.peek() else "")
    c.take()
    cols, desc = [], []
    while True:
        cols.append(c.name())
        d = False
        if c.accept("ASC"):
            d = False
        elif c.accept("DESC"):
            d = True
        desc.append(d)
        t = c.take()
        if t.token_type == TokenType.R_PAREN:
            break
        if t.token_type != TokenType.COMMA:
            raise syntax_error(t.text)
    return cols, desc


def _clustered_option(c: _Cursor) -> bool | None:
    """Read an optional CLUSTERED (True) or NONCLUSTERED (False); None when neither is given."""
    if c.accept("CLUSTERED"):
        return True
    if c.accept("NONCLUSTERED"):
        return False
    return None


def _skip_index_options(c: _Cursor) -> None:
    while True:
        if c.accept("WITH"):
            if c.peek() is not None and c.peek().token_type == TokenType.L_PAREN:
                c.balanced_text()
            continue
        if c.word() == "ON" and c.peek(1) is not None:
            c.pos += 2
            continue
        break


class _ColumnSpec:
    def __init__(self) -> None:
        self.column: Column | None = None
        self.constraints: list[tuple[str | None, str, bool | None, list[str], list[bool]]] = []


# words that end a computed column's expression written without parentheses
_COMPUTED_STOP = _CONSTRAINT_START | {"PERSISTED"}


def _computed_expression(c: _Cursor) -> str:
    """The text of ``expression`` in ``name AS expression``, up to the column's end or its options."""
    first = c.peek()
    depth = case_depth = 0
    last = None
    while not c.at_end():
        t = c.peek()
        w = c.word()
        if depth == 0 and (
            t.token_type in (TokenType.COMMA, TokenType.R_PAREN) or (case_depth == 0 and w in _COMPUTED_STOP)
        ):
            break
        depth += t.token_type == TokenType.L_PAREN
        depth -= t.token_type == TokenType.R_PAREN
        case_depth += w == "CASE"
        case_depth -= w == "END"
        last = c.take()
    if first is None or last is None:
        raise syntax_error(first.text if first is not None else "AS")
    return c.text_between(first, last)


def _parse_column(c: _Cursor, table_name: str) -> _ColumnSpec:
    spec = _ColumnSpec()
    name = c.name()
    if c.accept("AS"):  # a computed column: its type comes from the expression (computed_columns.resolve)
        t = T.INT
        col = Column(name, t, nullable=True, computed=True, computed_sql=_computed_expression(c))
        col.persisted = c.accept("PERSISTED")
    else:
        t = _parse_type(c)
        col = Column(name, t, nullable=True)
    explicit_null = None
    while (
        not c.at_end() and c.peek().token_type != TokenType.COMMA and c.peek().token_type != TokenType.R_PAREN
    ):
        cname = c.constraint_name()
        w = c.word()
        if col.computed and w in ("IDENTITY", "DEFAULT", "COLLATE", "ROWGUIDCOL", "SPARSE"):
            raise syntax_error(c.peek().text)
        if w == "IDENTITY":
            c.take()
            seed, inc = 1, 1
            if c.peek() is not None and c.peek().token_type == TokenType.L_PAREN:
                a = [x.strip() for x in c.balanced_text().split(",")]
                seed, inc = int(a[0]), int(a[1]) if len(a) > 1 else 1
            if t.name not in ("int", "bigint", "smallint", "tinyint", "decimal", "numeric"):
                raise SqlError(
                    2749,
                    16,
                    2,
                    f"Identity column '{name}' must be of data type int, bigint, smallint, tinyint, or decimal or numeric with a scale of 0, and constrained to be nonnullable.",
                )
            col.identity = (seed, inc)
            col.nullable = False
        elif w == "NOT":
            c.take()
            c.expect("NULL")
            explicit_null = False
        elif w == "NULL":
            c.take()
            explicit_null = True
        elif w == "PRIMARY":
            c.take()
            c.expect("KEY")
            clustered = _clustered_option(c)
            _skip_index_options(c)
            spec.constraints.append((cname, "PRIMARY KEY", clustered, [name], [False]))
        elif w == "UNIQUE":
            c.take()
            clustered = _clustered_option(c)
            _skip_index_options(c)
            spec.constraints.append((cname, "UNIQUE", clustered, [name], [False]))
        elif w == "DEFAULT":
            c.take()
            col.default_sql = _default_text(c)
            col.default_name = cname
        elif w == "ROWGUIDCOL" or w == "SPARSE":
            c.take()
        elif w == "COLLATE":
            c.take()
            coll = c.name()
            if not coll.upper().startswith("SQL_LATIN1_GENERAL_CP1_CI_AS") and not coll.upper().startswith(
                "DATABASE_DEFAULT"
            ):
                raise not_supported(f"the collation {coll}")
        elif w in ("CHECK", "REFERENCES", "FOREIGN"):
            raise not_supported(f"{w} constraints")
        else:
            raise syntax_error(c.peek().text)
    if explicit_null is not None:
        col.nullable = explicit_null and col.identity is None
    if any(k == "PRIMARY KEY" for _, k, *_ in spec.constraints) and not col.computed:
        if explicit_null:
            raise SqlError(
                8111,
                16,
                1,
                f"Cannot define PRIMARY KEY constraint on nullable column in table '{table_name}'.",
            )
        col.nullable = False
    if t.name == "timestamp":
        col.nullable = False
    spec.column = col
    return spec


def _parse_table_constraint(c: _Cursor) -> tuple[str | None, str, bool | None, list[str], list[bool]]:
    cname = c.constraint_name()
    w = c.word()
    if w == "PRIMARY":
        c.take()
        c.expect("KEY")
        kind = "PRIMARY KEY"
    elif w == "UNIQUE":
        c.take()
        kind = "UNIQUE"
    elif w in ("FOREIGN", "CHECK"):
        raise not_supported(f"{w} constraints")
    else:
        raise syntax_error(c.peek().text if c.peek() else "")
    clustered = _clustered_option(c)
    cols, desc = _index_columns(c)
    _skip_index_options(c)
    return cname, kind, clustered, cols, desc


def _add_constraint(
    session: ExecutionContext,
    db: Any,
    table: Table,
    cname: str | None,
    kind: str,
    clustered: bool | None,
    cols: list[str],
    desc: list[bool],
) -> Index:
    for cn in cols:
        if table.column_index(cn) is None:
            raise SqlError(1911, 16, 1, f"Column name '{cn}' does not exist in the target table or view.")
    if kind == "PRIMARY KEY":
        if table.primary_key is not None:
            raise SqlError(1779, 16, 0, f"Table '{table.name}' already has a primary key defined on it.")
        for cn in cols:
            col = table.columns[table.column_index(cn)]
            if col.computed and (col.nullable or not col.persisted):
                raise SqlError(
                    1711,
                    16,
                    0,
                    f"Cannot define PRIMARY KEY constraint on column '{col.name}' in table '{table.name}'. "
                    "The computed column has to be persisted and not nullable.",
                )
            if col.nullable:
                raise SqlError(
                    8111,
                    16,
                    1,
                    f"Cannot define PRIMARY KEY constraint on nullable column in table '{table.name}'.",
                )
    suffix = format(table.object_id & 0xFFFFFFFF, "X")
    if cname is None:
        prefix = "PK" if kind == "PRIMARY KEY" else "UQ"
        cname = f"{prefix}__{table.name[:8]}__{suffix}{len(table.indexes) + 1:04X}"
    if any(o.name.lower() == cname.lower() for t in db.all_tables() for o in t.indexes if o.kind != "INDEX"):
        raise object_exists(cname)
    if clustered is None:
        clustered = kind == "PRIMARY KEY" and not any(ix.clustered for ix in table.indexes)
    if clustered and any(ix.clustered for ix in table.indexes):
        raise SqlError(
            1902,
            16,
            3,
            f"Cannot create more than one clustered index on table '{table.qualified_name}'. Drop the existing clustered index before creating another.",
        )
    ix = Index(
        cname,
        1 if clustered else max([ix.index_id for ix in table.indexes] + [1]) + 1,
        [table.columns[table.column_index(cn)].name for cn in cols],
        kind,
        True,
        clustered,
        db.new_object_id(),
        desc,
    )
    table.indexes.append(ix)
    table._rebuild_colmap()
    _rebuild_index(session, table, ix)
    return ix


def _rebuild_index(session: ExecutionContext, table: Table, ix: Index) -> None:
    ix.keys = {}
    for rowid, v in table.rows.items():
        if v.values is None:
            continue
        key = tuple(ci_key(v.values[p]) for p in ix.positions)
        if key in ix.keys and ix.unique:
            table.indexes.remove(ix)
            shown = ", ".join(str(v.values[p]) for p in ix.positions)
            raise SqlError(
                1505,
                16,
                1,
                f"The CREATE UNIQUE INDEX statement terminated because a duplicate key was found for the object name '{table.qualified_name}' and the index name '{ix.name}'. The duplicate key value is ({shown}).",
            )
        ix.keys[key] = rowid


def _fire(
    session: ExecutionContext,
    phase: str,
    kind: str,
    db: Any,
    table: Table | None,
    schema: str,
    name: str,
    columns: tuple[str, ...],
    text: str,
) -> None:
    session.engine.registry.fire_ddl(
        session,
        DdlEvent(
            phase,
            kind,
            db.name,
            table.schema.name if table else schema,
            table.name if table else name,
            table.object_id if table else 0,
            columns,
            text,
        ),
    )


def _target_db(session: ExecutionContext, parts: list[str]) -> tuple[Any, str, str]:
    if len(parts) == 1:
        return session.current_db(), session.default_schema(), parts[0]
    if len(parts) == 2:
        return session.current_db(), parts[0], parts[1]
    if len(parts) == 3:
        return session.engine.database(parts[0] or session.database), parts[1] or "dbo", parts[2]
    raise SqlError(
        117,
        15,
        1,
        f"The object name '{'.'.join(parts)}' contains more than the maximum number of prefixes. The maximum is 2.",
    )


# ---------------------------------------------------------------- CREATE TABLE


def create_table(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    parts = c.dotted()
    db, schema_name, name = _target_db(session, parts)
    if name.startswith("#"):
        db, schema_name, name = session.engine.database("tempdb"), "dbo", session.temp_table_name(name)
        session.temp_tables.add(name)
    schema = db.schema(schema_name)
    if schema is None:
        raise SqlError(
            2760,
            16,
            1,
            f'The specified schema name "{schema_name}" either does not exist or you do not have permission to use it.',
        )
    if schema.tables.get(name.lower()) is not None:
        raise object_exists(name)
    if c.peek() is None or c.peek().token_type != TokenType.L_PAREN:
        raise syntax_error(c.peek().text if c.peek() else name)
    c.take()
    specs: list[_ColumnSpec] = []
    table_constraints = []
    while True:
        if c.word() in ("CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            table_constraints.append(_parse_table_constraint(c))
        else:
            specs.append(_parse_column(c, name))
        t = c.take()
        if t.token_type == TokenType.R_PAREN:
            break
        if t.token_type != TokenType.COMMA:
            raise syntax_error(t.text)
    _skip_index_options(c)
    if c.accept("TEXTIMAGE_ON"):
        c.take()
    if not c.at_end():
        raise syntax_error(c.peek().text)
    seen = set()
    for sp in specs:
        if sp.column.name.lower() in seen:
            raise SqlError(
                2705,
                16,
                3,
                f"Column names in each table must be unique. Column name '{sp.column.name}' in table '{name}' is specified more than once.",
            )
        seen.add(sp.column.name.lower())
    for sp in specs:
        if sp.column.computed:
            computed_columns.resolve(session, name, [s.column for s in specs], sp.column)
    if sum(1 for sp in specs if sp.column.identity) > 1:
        raise SqlError(
            2744,
            16,
            2,
            f"Multiple identity columns specified for table '{name}'. Only one identity column per table is allowed.",
        )
    engine = session.engine
    xact = session.write_xact()
    _fire(
        session,
        "before",
        "create_table",
        db,
        None,
        schema.name,
        name,
        tuple(sp.column.name for sp in specs),
        raw.text,
    )
    with engine.mutex:
        table = Table(
            db.new_object_id(), schema, name, [sp.column for sp in specs], engine.clock.local_ticks()
        )
        for col in table.columns:
            if col.default_sql is not None:
                if col.default_name is None:
                    col.default_name = f"DF__{name[:9]}__{col.name[:5]}__{format(table.object_id & 0xFFFF, 'X')}{col.column_id:04X}"
                col.default_object_id = db.new_object_id()
                parse_expression(col.default_sql)  # validate now
        for sp in specs:
            for cname, kind, clustered, cols, desc in sp.constraints:
                for pk_col in cols:
                    if kind == "PRIMARY KEY" and not table.columns[table.column_index(pk_col)].computed:
                        table.columns[table.column_index(pk_col)].nullable = False
                _add_constraint(session, db, table, cname, kind, clustered, cols, desc)
        for cname, kind, clustered, cols, desc in table_constraints:
            if kind == "PRIMARY KEY":
                for pk_col in cols:
                    i = table.column_index(pk_col)
                    if i is not None and not table.columns[i].computed:
                        table.columns[i].nullable = False
            _add_constraint(session, db, table, cname, kind, clustered, cols, desc)
        schema.tables[name.lower()] = table

    def undo() -> None:
        if schema.tables.get(name.lower()) is table:
            del schema.tables[name.lower()]

    engine.log_ddl(
        xact,
        db,
        table,
        SchemaChange("create_table", raw.text, undo, tuple(col.name for col in table.columns)),
    )
    _fire(
        session,
        "after",
        "create_table",
        db,
        table,
        schema.name,
        name,
        tuple(col.name for col in table.columns),
        raw.text,
    )
    yield _done()


def _done() -> Any:
    return StatementDone(None)


# ---------------------------------------------------------------- ALTER TABLE


def alter_table(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    parts = c.dotted()
    db, schema_name, name = _target_db(session, parts)
    table = db.table(schema_name, name) or (db.table("dbo", name) if len(parts) == 1 else None)
    if table is None:
        raise invalid_object(".".join(parts))
    engine = session.engine
    xact = session.write_xact()
    session.acquire_table_lock(table, "X", True)
    if c.accept("ADD"):
        if c.word() in ("CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            items = []
            while True:
                items.append(_parse_table_constraint(c))
                if not c.accept(","):
                    break
            saved = list(table.indexes)

            def undo_ix() -> None:
                table.indexes[:] = saved

            with engine.mutex:
                for cname, kind, clustered, cols, desc in items:
                    _add_constraint(session, db, table, cname, kind, clustered, cols, desc)
            engine.log_ddl(xact, db, table, SchemaChange("add_constraint", raw.text, undo_ix))
            yield _done()
            return
        specs = []
        while True:
            specs.append(_parse_column(c, name))
            if not c.accept(","):
                break
        if not c.at_end():
            raise syntax_error(c.peek().text)
        cols = tuple(sp.column.name for sp in specs)
        _fire(session, "before", "add_column", db, table, "", "", cols, raw.text)
        for sp in specs:
            if table.column_index(sp.column.name) is not None:
                raise SqlError(
                    2705,
                    16,
                    4,
                    f"Column names in each table must be unique. Column name '{sp.column.name}' in table '{table.name}' is specified more than once.",
                )
            if (
                not sp.column.nullable
                and not sp.column.computed
                and sp.column.default_sql is None
                and sp.column.identity is None
                and sp.column.type.name != "timestamp"
                and any(v.values is not None for v in table.rows.values())
            ):
                raise SqlError(
                    4901,
                    16,
                    1,
                    f"ALTER TABLE only allows columns to be added that can contain nulls, or have a DEFAULT definition specified, or the column being added is an identity or timestamp column, or alternatively if none of the previous conditions are satisfied the table must be empty to allow addition of this column. Column '{sp.column.name}' cannot be added to non-empty table '{table.name}' because it does not satisfy these conditions.",
                )
        for i, sp in enumerate(specs):
            if sp.column.computed:
                visible = [
                    *table.columns,
                    *(other.column for other in specs[:i] if not other.column.computed),
                ]
                computed_columns.resolve(session, table.name, visible, sp.column)
        state = _snapshot_table(table)
        with engine.mutex:
            for sp in specs:
                col = sp.column
                if col.computed:
                    _add_computed_column(session, db, table, col, state)
                    for cname, kind, clustered, cols_, desc in sp.constraints:
                        _add_constraint(session, db, table, cname, kind, clustered, cols_, desc)
                    continue
                fill: Any = None
                if col.default_sql is not None:
                    if col.default_name is None:
                        col.default_name = f"DF__{table.name[:9]}__{col.name[:5]}__{format(db.new_object_id() & 0xFFFF, 'X')}"
                    col.default_object_id = db.new_object_id()
                    if not col.nullable:
                        fill = default_value(session, col)
                table.add_column(col)
                _extend_rows(
                    table, lambda values, f=fill, col=col: values + (_fill_value(engine, db, table, col, f),)
                )
                for cname, kind, clustered, cols_, desc in sp.constraints:
                    _add_constraint(session, db, table, cname, kind, clustered, cols_, desc)
            table.schema_version += 1
            table.modify_ticks = engine.clock.local_ticks()
        engine.log_ddl(
            xact, db, table, SchemaChange("add_column", raw.text, lambda: _restore_table(table, state), cols)
        )
        _fire(session, "after", "add_column", db, table, "", "", cols, raw.text)
        yield _done()
        return
    if c.accept("DROP"):
        if c.accept("CONSTRAINT"):
            c.accept("IF") and c.accept("EXISTS")
            cname = c.name()
            ix = next((i for i in table.indexes if i.name.lower() == cname.lower()), None)
            dcol = next(
                (col for col in table.columns if (col.default_name or "").lower() == cname.lower()), None
            )
            if ix is None and dcol is None:
                raise SqlError(3728, 16, 1, f"'{cname}' is not a constraint.")
            if ix is not None and ix.is_primary_key:
                _fire(session, "before", "drop_primary_key", db, table, "", "", (ix.name,), raw.text)
            state = _snapshot_table(table)
            with engine.mutex:
                if ix is not None:
                    table.indexes.remove(ix)
                else:
                    dcol.default_sql = None
                    dcol.default_name = None
                    dcol.default_object_id = 0
            engine.log_ddl(
                xact,
                db,
                table,
                SchemaChange("drop_constraint", raw.text, lambda: _restore_table(table, state)),
            )
            yield _done()
            return
        c.expect("COLUMN")
        c.if_exists()
        names = [c.name()]
        while c.accept(","):
            c.accept("COLUMN")
            names.append(c.name())
        cols = []
        for n in names:
            i = table.column_index(n)
            if i is None:
                raise SqlError(
                    4924,
                    16,
                    1,
                    f"ALTER TABLE DROP COLUMN failed because column '{n}' does not exist in table '{table.name}'.",
                )
            cols.append(table.columns[i].name)
            for ix in table.indexes:
                if n.lower() in (x.lower() for x in ix.columns):
                    raise SqlError(
                        5074,
                        16,
                        1,
                        f"The object '{ix.name}' is dependent on column '{table.columns[i].name}'.",
                    )
            _refuse_computed_dependency(table, table.columns[i].name)
            if table.columns[i].default_name:
                raise SqlError(
                    5074,
                    16,
                    1,
                    f"The object '{table.columns[i].default_name}' is dependent on column '{table.columns[i].name}'.",
                )
        _fire(session, "before", "drop_column", db, table, "", "", tuple(cols), raw.text)
        state = _snapshot_table(table)
        with engine.mutex:
            for n in cols:
                i = table.column_index(n)
                del table.columns[i]
                table._rebuild_colmap()
                _extend_rows(table, lambda values, i=i: values[:i] + values[i + 1 :])
            table.schema_version += 1
            table.modify_ticks = engine.clock.local_ticks()
        engine.log_ddl(
            xact,
            db,
            table,
            SchemaChange("drop_column", raw.text, lambda: _restore_table(table, state), tuple(cols)),
        )
        _fire(session, "after", "drop_column", db, table, "", "", tuple(cols), raw.text)
        yield _done()
        return
    if c.accept("ALTER"):
        c.expect("COLUMN")
        cname = c.name()
        i = table.column_index(cname)
        if i is None:
            raise statement_errors.alter_column_missing(column=cname, table=table.name)
        if table.columns[i].computed:
            raise statement_errors.alter_computed_column(table.columns[i].name)
        _refuse_computed_dependency(table, table.columns[i].name)
        new_type = _parse_type(c)
        nullable = table.columns[i].nullable
        if c.accept("NOT"):
            c.expect("NULL")
            nullable = False
        elif c.accept("NULL"):
            nullable = True
        old = table.columns[i]
        _fire(session, "before", "alter_column", db, table, "", "", (old.name,), raw.text)
        state = _snapshot_table(table)
        qualified = f"{db.name}.{table.schema.name}.{table.name}"
        with engine.mutex:
            for v in list(table.rows.values()):
                cur = v
                while cur is not None:
                    if cur.values is not None:
                        try:
                            val = convert_column_value(
                                cur.values[i], old.type, new_type, table=qualified, column=old.name
                            )
                        except SqlError:
                            _restore_table(table, state)
                            raise
                        if val is None and not nullable:
                            _restore_table(table, state)
                            raise null_not_allowed(
                                column=old.name,
                                table=f"{db.name}.{table.schema.name}.{table.name}",
                                statement="UPDATE",
                            )
                        cur.values = cur.values[:i] + (val,) + cur.values[i + 1 :]
                    cur = cur.prev
            table.columns[i] = Column(
                old.name,
                new_type,
                nullable,
                old.column_id,
                old.identity,
                old.default_sql,
                old.default_name,
                old.default_object_id,
            )
            table.schema_version += 1
        change = SchemaChange(
            "alter_column",
            raw.text,
            lambda: _restore_table(table, state),
            (old.name,),
            column_types=(new_type,),
        )
        engine.log_ddl(xact, db, table, change)
        _fire(session, "after", "alter_column", db, table, "", "", (old.name,), raw.text)
        yield _done()
        return
    raise not_supported(f"ALTER TABLE {c.word() or ''}".strip())


def _add_computed_column(
    session: ExecutionContext, db: Any, table: Table, col: Column, state: dict[str, Any]
) -> None:
    """ALTER TABLE ADD of a computed column: add it and compute its value in every row version."""
    value_of = computed_columns.added_column_values(session, table.name, list(table.columns), col)
    label = f"{db.name}.{table.schema.name}.{table.name}"

    def extended(values: tuple[Any, ...]) -> tuple[Any, ...]:
        value = value_of(values)
        if value is None and not col.nullable:
            raise null_not_allowed(column=col.name, table=label, statement="ALTER TABLE")
        return (*values, value)

    table.add_column(col)
    try:
        _extend_rows(table, extended)
    except SqlError:
        _restore_table(table, state)
        raise


def _refuse_computed_dependency(table: Table, name: str) -> None:
    """Msg 5074: a column that a computed column reads cannot be dropped or altered."""
    for dependent in computed_columns.dependents(table, name):
        if dependent.lower() != name.lower():
            raise SqlError(5074, 16, 1, f"The column '{dependent}' is dependent on column '{name}'.")


def _fill_value(engine: Any, db: Any, table: Table, col: Column, fill: Any) -> Any:
    if col.type.name == "timestamp":
        return engine.next_rowversion(db)
    if col.identity is not None:
        seed, inc = col.identity
        table.identity_current = seed if table.identity_current is None else table.identity_current + inc
        return table.identity_current
    return fill


def _extend_rows(table: Table, fn: Any) -> None:
    for v in list(table.rows.values()):
        cur = v
        while cur is not None:
            if cur.values is not None:
                cur.values = fn(cur.values)
            cur = cur.prev


def _snapshot_table(table: Table) -> dict[str, Any]:
    versions = []
    for v in table.rows.values():
        cur = v
        while cur is not None:
            versions.append((cur, cur.values))
            cur = cur.prev
    return {
        "columns": list(table.columns),
        "indexes": list(table.indexes),
        "versions": versions,
        "schema_version": table.schema_version,
    }


def _restore_table(table: Table, state: dict[str, Any]) -> None:
    table.columns[:] = state["columns"]
    table.indexes[:] = state["indexes"]
    for v, values in state["versions"]:
        v.values = values
    table.schema_version = state["schema_version"]
    table._rebuild_colmap()


# ---------------------------------------------------------------- sqlglot-parsed DDL


def execute(session: ExecutionContext, node: exp.Expression, text: str) -> Iterator[Any]:
    engine = session.engine
    if isinstance(node, exp.TruncateTable):
        for tnode in node.expressions:
            db, table, schema, name = session.resolve_table(tnode)
            if table is None:
                raise SqlError(
                    4701,
                    16,
                    1,
                    f'Cannot find the object "{tnode.sql(dialect="tsql")}" because it does not exist or you do not have permissions.',
                )
            _fire(session, "before", "truncate_table", db, table, "", "", (), text)
            xact = session.write_xact()
            session.acquire_table_lock(table, "X", True)
            saved_rows = dict(table.rows)
            saved_keys = [dict(ix.keys) for ix in table.indexes]
            saved_ident = table.identity_current
            with engine.mutex:
                table.rows = {}
                for ix in table.indexes:
                    ix.keys = {}
                if table.identity_column is not None:
                    table.identity_current = None

            def undo(
                table: Table = table,
                saved_rows: dict = saved_rows,
                saved_keys: list = saved_keys,
                saved_ident: Any = saved_ident,
            ) -> None:
                table.rows = saved_rows
                for ix, k in zip(table.indexes, saved_keys, strict=False):
                    ix.keys = k
                table.identity_current = saved_ident

            engine.log_ddl(xact, db, table, SchemaChange("truncate_table", text, undo))
            _fire(session, "after", "truncate_table", db, table, "", "", (), text)
        yield _done()
        return
    if isinstance(node, exp.Create):
        kind = (node.args.get("kind") or "").upper()
        if "INDEX" in kind:
            yield from _create_index(session, node, text, kind)
            return
        if kind == "TABLE":
            raise not_supported("this CREATE TABLE form")
        if kind in ("VIEW", "PROCEDURE", "FUNCTION", "TRIGGER", "TYPE", "SEQUENCE", "SYNONYM"):
            raise not_supported(f"CREATE {kind}")
        raise not_supported(f"CREATE {kind}")
    if isinstance(node, exp.Drop):
        kind = (node.args.get("kind") or "").upper()
        if kind == "TABLE":
            for tnode in node.args.get("tables") or []:
                db, table, schema, name = session.resolve_table(tnode, must_exist=False)
                if table is None:
                    if node.args.get("exists"):
                        continue
                    raise cannot_drop(kind="table", name=tnode.sql(dialect="tsql"), state=5)
                _fire(session, "before", "drop_table", db, table, "", "", (), text)
                xact = session.write_xact()
                session.acquire_table_lock(table, "X", True)
                sch = table.schema
                with engine.mutex:
                    del sch.tables[table.name.lower()]

                def undo(sch: Schema = sch, table: Table = table) -> None:
                    sch.tables[table.name.lower()] = table

                engine.log_ddl(xact, db, table, SchemaChange("drop_table", text, undo))
                _fire(session, "after", "drop_table", db, table, "", "", (), text)
            yield _done()
            return
        if kind == "INDEX":
            on = node.args.get("cluster")
            tnode = on.this if on is not None else None
            if tnode is None:
                raise not_supported("DROP INDEX without ON table")
            db, table, _, _ = session.resolve_table(tnode)
            if table is None:
                raise invalid_object(tnode.sql(dialect="tsql"))
            ixname = node.args["tables"][0].name
            ix = next(
                (i for i in table.indexes if i.name.lower() == ixname.lower() and i.kind == "INDEX"), None
            )
            if ix is None:
                raise cannot_drop(kind="index", name=f"{table.name}.{ixname}", state=7)
            xact = session.write_xact()
            table.indexes.remove(ix)
            engine.log_ddl(
                xact, db, table, SchemaChange("drop_index", text, lambda: table.indexes.append(ix))
            )
            yield _done()
            return
        raise not_supported(f"DROP {kind}")
    if isinstance(node, exp.Alter):
        raise not_supported("this ALTER form")
    raise not_supported(type(node).__name__)


def _create_index(session: ExecutionContext, node: exp.Create, text: str, kind: str) -> Iterator[Any]:
    idx = node.this
    tnode = idx.args.get("table")
    db, table, _, _ = session.resolve_table(tnode)
    if table is None:
        raise invalid_object(tnode.sql(dialect="tsql"))
    name = idx.name
    params = idx.args.get("params")
    cols = []
    desc = []
    for o in params.args.get("columns") or []:
        col = o.this if isinstance(o, exp.Ordered) else o
        if table.column_index(col.name) is None:
            raise SqlError(
                1911, 16, 1, f"Column name '{col.name}' does not exist in the target table or view."
            )
        cols.append(table.columns[table.column_index(col.name)].name)
        desc.append(bool(isinstance(o, exp.Ordered) and o.args.get("desc")))
    if any(i.name.lower() == name.lower() for i in table.indexes):
        raise SqlError(
            1913,
            16,
            1,
            f"The operation failed because an index or statistics with name '{name}' already exists on table '{table.qualified_name}'.",
        )
    clustered = "NONCLUSTERED" not in kind and "CLUSTERED" in kind
    if clustered and any(i.clustered for i in table.indexes):
        raise SqlError(
            1902,
            16,
            3,
            f"Cannot create more than one clustered index on table '{table.qualified_name}'. Drop the existing clustered index before creating another.",
        )
    unique = bool(node.args.get("unique"))
    xact = session.write_xact()
    ix = Index(
        name,
        1 if clustered else max([i.index_id for i in table.indexes] + [1]) + 1,
        cols,
        "INDEX",
        unique,
        clustered,
        0,
        desc,
    )
    with session.engine.mutex:
        table.indexes.append(ix)
        table._rebuild_colmap()
        _rebuild_index(session, table, ix)

    def undo() -> None:
        if ix in table.indexes:
            table.indexes.remove(ix)

    session.engine.log_ddl(xact, db, table, SchemaChange("create_index", text, undo))
    yield _done()


# ---------------------------------------------------------------- statements recognised from tokens


def try_special_ddl(session: ExecutionContext, raw: RawStatement) -> Iterator[Any] | None:
    """Handle DDL parsed from tokens; None if the statement is not one of them."""
    words = raw.words
    w0 = words[0]
    w1 = words[1] if len(words) > 1 else ""
    if w0 not in ("CREATE", "ALTER", "DROP"):
        return None
    for hook in session.engine.registry.statement_hooks:  # e.g. ALTER ... CHANGE_TRACKING
        handled = hook(session, raw)
        if handled is not None:
            return handled
    handler = _TOKEN_DDL.get((w0, w1))
    if handler is not None:
        return handler(session, raw, _Cursor(raw, 2))
    if w0 in ("CREATE", "ALTER", "DROP") and w1 in (
        "VIEW",
        "PROCEDURE",
        "PROC",
        "FUNCTION",
        "TRIGGER",
        "TYPE",
        "SEQUENCE",
        "SYNONYM",
        "ASSEMBLY",
        "PARTITION",
        "FULLTEXT",
        "XML",
        "STATISTICS",
        "CERTIFICATE",
        "MASTER",
        "SERVER",
        "EVENT",
        "AVAILABILITY",
        "ENDPOINT",
        "QUEUE",
        "SERVICE",
    ):
        raise not_supported(f"{w0} {w1}")
    return None


def _create_database(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    name = c.name()
    if not c.at_end():
        raise not_supported("CREATE DATABASE options")
    session.engine.create_database(name)
    if session.engine.durable is not None:
        session.engine.durable.record_server(("create_database", name))
    yield _done()


def _drop_database(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    if_exists = c.if_exists()
    name = c.name()
    if if_exists and name.lower() not in session.engine.databases:
        yield _done()
        return
    users = [session, *list(session.engine.sessions.values())]
    if any(s.database.lower() == name.lower() for s in users):
        raise SqlError(3702, 16, 4, f'Cannot drop database "{name}" because it is currently in use.')
    with session.engine.mutex:
        db = session.engine.databases.get(name.lower())
        if db is None:
            raise cannot_drop(kind="database", name=name)
        if name.lower() in ("master", "tempdb", "model", "msdb"):
            raise SqlError(3708, 16, 1, f"Cannot drop the database '{name}' because it is a system database.")
        del session.engine.databases[name.lower()]
    if session.engine.durable is not None:
        session.engine.durable.record_server(("drop_database", name))
    yield _done()


def _alter_database(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    name = session.database if c.accept("CURRENT") else c.name()
    db = session.engine.database(name)
    c.expect("SET")
    opt = c.word()
    c.take()
    value = c.word()
    c.take()
    if opt == "ALLOW_SNAPSHOT_ISOLATION":
        db.allow_snapshot_isolation = value == "ON"
    elif opt == "READ_COMMITTED_SNAPSHOT":
        db.read_committed_snapshot = value == "ON"
    elif opt in (
        "RECOVERY",
        "COMPATIBILITY_LEVEL",
        "MULTI_USER",
        "AUTO_CLOSE",
        "AUTO_SHRINK",
        "PAGE_VERIFY",
        "ANSI_NULLS",
        "QUOTED_IDENTIFIER",
        "AUTO_UPDATE_STATISTICS",
    ):
        pass
    else:
        raise not_supported(f"ALTER DATABASE ... SET {opt}")
    while not c.at_end():
        c.take()
    if session.engine.durable is not None:
        session.engine.durable.record_server(("database_option", db.name, opt, value))
    yield _done()


def _authorization(session: ExecutionContext, c: _Cursor) -> int:
    """The principal id of an optional ``AUTHORIZATION owner`` (dbo's without one).

    An owner that is no user or role of the database is refused with 40517: SQL Server refuses it
    too, with a message no page of Microsoft's documentation gives.
    """
    if not c.accept("AUTHORIZATION"):
        return 1
    owner = c.name()
    p = session.current_db().principals.get(owner.lower())
    if p is None:
        raise not_supported(f"AUTHORIZATION of '{owner}', which is no user or role of the database")
    return p.principal_id


def _create_schema(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    name = c.name()
    owner = _authorization(session, c)
    if not c.at_end():
        raise not_supported("CREATE SCHEMA with schema elements")
    db = session.current_db()
    if db.schema(name) is not None:
        raise object_exists(name)
    xact = session.write_xact()
    with session.engine.mutex:
        sch = Schema(db.next_schema_id, name, owner)
        db.next_schema_id += 1
        db.schemas[name.lower()] = sch

    def undo() -> None:
        db.schemas.pop(name.lower(), None)

    session.engine.log_ddl(xact, db, None, SchemaChange("create_schema", raw.text, undo, schema=name))
    yield _done()


def _drop_schema(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    c.if_exists()
    name = c.name()
    db = session.current_db()
    sch = db.schema(name)
    if sch is None:
        if "EXISTS" in raw.words:
            yield _done()
            return
        raise cannot_drop(kind="schema", name=name)
    if sch.tables:
        first = next(iter(sch.tables.values()))
        raise SqlError(
            3729,
            16,
            1,
            f"Cannot drop schema '{name}' because it is being referenced by object '{first.name}'.",
        )
    xact = session.write_xact()
    del db.schemas[name.lower()]
    session.engine.log_ddl(
        xact,
        db,
        None,
        SchemaChange("drop_schema", raw.text, lambda: db.schemas.__setitem__(name.lower(), sch), schema=name),
    )
    yield _done()


def _create_login(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    name = c.name()
    c.expect("WITH")
    c.expect("PASSWORD")
    c.expect("=")
    pw_tok = c.take()
    password = pw_tok.text
    default_db = "master"
    while c.accept(","):
        opt = c.word()
        c.take()
        c.expect("=")
        val = c.take().text
        if opt == "DEFAULT_DATABASE":
            default_db = val
    session.engine.create_login(name, password, default_db)
    if session.engine.durable is not None:
        session.engine.durable.record_server(("create_login", name, password, default_db))
    yield _done()


def _create_user(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    name = c.name()
    login = name
    default_schema = "dbo"
    if c.accept("FOR", "FROM"):
        c.expect("LOGIN")
        login = c.name()
    elif c.accept("WITHOUT"):
        c.expect("LOGIN")
        login = None
    if c.accept("WITH"):
        c.expect("DEFAULT_SCHEMA")
        c.expect("=")
        default_schema = c.name()
    if login is not None and login.lower() not in session.engine.logins:
        raise SqlError(15007, 16, 1, f"'{login}' is not a valid login or you do not have permission.")
    _add_principal(
        session,
        raw,
        name,
        "create_user",
        lambda principal_id: Principal(principal_id, name, "S", login=login, default_schema=default_schema),
    )
    yield _done()


def _add_principal(
    session: ExecutionContext, raw: RawStatement, name: str, operation: str, make: Callable[[int], Principal]
) -> None:
    """Add the principal ``make(next id)`` to the current database and log it so a rollback drops it.

    :param operation: the DDL log operation, ``create_user`` or ``create_role``.
    """
    db = session.current_db()
    if name.lower() in db.principals:
        raise SqlError(15023, 16, 1, f"User, group, or role '{name}' already exists in the current database.")
    xact = session.write_xact()
    p = make(db.next_principal_id)
    db.next_principal_id += 1
    db.principals[name.lower()] = p
    _log_principal_ddl(session, xact, db, raw, operation, name, lambda: db.principals.pop(name.lower(), None))


def _log_principal_ddl(
    session: ExecutionContext,
    xact: Any,
    db: Any,
    raw: RawStatement,
    operation: str,
    name: str,
    undo: Callable[[], Any],
) -> None:
    """Log DDL on database principal ``name``; ``undo`` reverses it on rollback."""
    session.engine.log_ddl(xact, db, None, SchemaChange(operation, raw.text, undo, name=name))


def _create_role(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    name = c.name()
    owner = _authorization(session, c)
    _add_principal(
        session,
        raw,
        name,
        "create_role",
        lambda principal_id: Principal(principal_id + 16384, name, "R", owning_principal_id=owner),
    )
    yield _done()


def _alter_role(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    name = c.name()
    db = session.current_db()
    role = db.principals.get(name.lower())
    if role is None or role.type != "R":
        raise missing_principal(action="alter", kind="role", name=name)
    if c.accept("ADD"):
        c.expect("MEMBER")
        member = c.name()
        if member.lower() not in db.principals:
            raise missing_principal(action="add", kind="principal", name=member)
        xact = session.write_xact()
        role.members.add(member.lower())
        _log_principal_ddl(
            session, xact, db, raw, "alter_role", name, lambda: role.members.discard(member.lower())
        )
    elif c.accept("DROP"):
        c.expect("MEMBER")
        member = c.name()
        xact = session.write_xact()
        had = member.lower() in role.members
        role.members.discard(member.lower())
        _log_principal_ddl(
            session,
            xact,
            db,
            raw,
            "alter_role",
            name,
            lambda: role.members.add(member.lower()) if had else None,
        )
    else:
        raise not_supported("ALTER ROLE other than ADD/DROP MEMBER")
    yield _done()


#: principals every database has, which DROP USER / DROP ROLE refuse (error 15150)
_FIXED_PRINCIPALS = frozenset(
    {
        "dbo",
        "public",
        "db_owner",
        "db_accessadmin",
        "db_securityadmin",
        "db_ddladmin",
        "db_backupoperator",
        "db_datareader",
        "db_datawriter",
        "db_denydatareader",
        "db_denydatawriter",
    }
)


def _drop_principal(session: ExecutionContext, raw: RawStatement, c: _Cursor) -> Iterator[Any]:
    kind = raw.words[1]  # USER, ROLE or LOGIN
    c.if_exists()
    name = c.name()
    if kind == "LOGIN":
        if name.lower() == "sa":
            raise missing_principal(action="drop", kind="login", name="sa")
        if session.engine.logins.pop(name.lower(), None) is None and "EXISTS" not in raw.words:
            raise missing_principal(action="drop", kind="login", name=name)
        if session.engine.durable is not None:
            session.engine.durable.record_server(("drop_login", name))
        yield _done()
        return
    db = session.current_db()
    key = name.lower()
    p = db.principals.get(key)
    if p is None or (p.type == "R") != (kind == "ROLE"):
        if "EXISTS" in raw.words:
            yield _done()
            return
        raise missing_principal(action="drop", kind=kind.lower(), name=name)
    if key in _FIXED_PRINCIPALS:
        raise fixed_principal(kind=kind.lower(), name=p.name)
    # drop-role-transact-sql.md, drop-user-transact-sql.md: a principal that owns securables stays
    if any(s.principal_id == p.principal_id for s in db.schemas.values()):
        raise owns_schema()
    if any(r.owning_principal_id == p.principal_id for r in db.principals.values()):
        raise not_supported("DROP of a principal that owns a database role")
    if p.type == "R" and any(m in db.principals for m in p.members):
        raise role_has_members()
    xact = session.write_xact()
    # the dropped principal leaves every role it was a member of (sys.database_role_members)
    member_of = [r for r in db.principals.values() if r.type == "R" and key in r.members]
    for role in member_of:
        role.members.discard(key)
    del db.principals[key]

    def undo() -> None:
        db.principals[key] = p
        for role in member_of:
            role.members.add(key)

    _log_principal_ddl(session, xact, db, raw, f"drop_{kind.lower()}", name, undo)
    yield _done()


# the DDL parsed from tokens: (first word, second word) -> handler(session, statement, cursor after them)
_TOKEN_DDL: dict[tuple[str, str], Callable[[ExecutionContext, RawStatement, _Cursor], Iterator[Any]]] = {
    ("CREATE", "TABLE"): create_table,
    ("ALTER", "TABLE"): alter_table,
    ("CREATE", "DATABASE"): _create_database,
    ("DROP", "DATABASE"): _drop_database,
    ("ALTER", "DATABASE"): _alter_database,
    ("CREATE", "SCHEMA"): _create_schema,
    ("DROP", "SCHEMA"): _drop_schema,
    ("CREATE", "LOGIN"): _create_login,
    ("CREATE", "USER"): _create_user,
    ("CREATE", "ROLE"): _create_role,
    ("ALTER", "ROLE"): _alter_role,
    ("DROP", "USER"): _drop_principal,
    ("DROP", "ROLE"): _drop_principal,
    ("DROP", "LOGIN"): _drop_principal,
}
