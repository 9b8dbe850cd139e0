"""T-SQL parsing: the batch splitter and sqlglot's ``tsql`` dialect adjusted for execution.

The dialect keeps every function call as ``exp.Anonymous`` (the engine implements functions by
their T-SQL names, instead of sqlglot's transpiler rewrites) and records the type name as
written (``real`` vs ``float``, ``numeric`` vs ``decimal``) in ``DataType.meta['type_name']``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.tsql import TSQL
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from sqlserver_cdc_simulator.errors import SqlError, syntax_error

_Dml = TypeVar("_Dml", exp.Update, exp.Delete)


class _Parser(TSQL.Parser):
    FUNCTIONS: dict = {}

    def _parse_types(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        tok = self._curr
        dt = super()._parse_types(*args, **kwargs)
        if isinstance(dt, exp.DataType) and tok is not None:
            dt.meta["type_name"] = tok.text.lower()
        return dt

    def _parse_update(self) -> exp.Update:
        return self._with_dml_top(super()._parse_update)

    def _parse_delete(self) -> exp.Delete:
        return self._with_dml_top(self._parse_delete_from_from)

    def _parse_delete_from_from(self) -> exp.Delete:
        """``DELETE [FROM] target FROM table_source ...``: the optional first FROM is dropped (delete-transact-sql.md)."""
        index = self._index
        if self._match(TokenType.FROM):
            self._parse_table()
            second_from = self._match(TokenType.FROM, advance=False)
            self._retreat(index + 1 if second_from else index)
        return super()._parse_delete()

    def _with_dml_top(self, parse: Callable[[], _Dml]) -> _Dml:
        """Parse an UPDATE or DELETE with *parse*, after its ``TOP (n)`` (kept as the node's limit)."""
        top = self._parse_dml_top()
        node = parse()
        if top is not None:
            node.set("limit", top)
        return node

    def _parse_dml_top(self) -> exp.Limit | None:
        """``TOP (expression) [PERCENT]`` after UPDATE or DELETE (parentheses required, as in T-SQL).

        ``WITH TIES`` is a syntax error there: top-transact-sql.md allows it "only in SELECT statements".
        """
        if not self._match(TokenType.TOP):
            return None
        if not self._match(TokenType.L_PAREN, advance=False):
            self.raise_error("Expecting ( after TOP")
        index = self._index
        top = self._parse_limit(top=True, skip_limit_token=True)
        assert isinstance(top, exp.Limit)
        options = top.args.get("limit_options")
        if options is not None and options.args.get("with_ties"):
            with_token = next(t for t in self._tokens[index : self._index] if t.text.upper() == "WITH")
            self.raise_error("WITH TIES is allowed only in SELECT", with_token)
        return top


class _Tokenizer(TSQL.Tokenizer):
    def tokenize(self, sql: str) -> list[Token]:
        """Tokens of *sql*, with the empty binary literal ``0x`` as a hex string (not a column name)."""
        tokens = super().tokenize(sql)
        for i, tk in enumerate(tokens):
            if tk.token_type == TokenType.IDENTIFIER and tk.text in ("0x", "0X") and sql[tk.start] == "0":
                tokens[i] = Token(TokenType.HEX_STRING, "", tk.line, tk.col, tk.start, tk.end, tk.comments)
        return tokens


class SimDialect(TSQL):
    """sqlglot's T-SQL dialect, with functions left as written."""

    Parser = _Parser
    Tokenizer = _Tokenizer


_DIALECT = SimDialect()
_lock = threading.Lock()

STARTERS = {
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "DECLARE",
    "SET",
    "EXEC",
    "EXECUTE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVE",
    "USE",
    "PRINT",
    "TRUNCATE",
    "IF",
    "WHILE",
    "BREAK",
    "CONTINUE",
    "MERGE",
    "RAISERROR",
    "THROW",
    "RETURN",
    "GRANT",
    "REVOKE",
    "DENY",
    "WAITFOR",
    "CHECKPOINT",
    "DBCC",
}


@dataclass
class RawStatement:
    """One statement of a batch: its text and tokens."""

    text: str
    tokens: list[Token]

    @functools.cached_property
    def words(self) -> list[str]:
        return [t.text.upper() for t in self.tokens]


def tokenize(sql: str) -> list[Token]:
    try:
        return _DIALECT.tokenize(sql)
    except TokenError as e:
        raise SqlError(
            105, 15, 1, f"Unclosed quotation mark after the character string '{sql[-20:]}'."
        ) from e


@functools.lru_cache(maxsize=256)
def split_batch(sql: str) -> tuple[RawStatement, ...]:
    """Split a batch into statements (semicolons optional, as in T-SQL)."""
    tokens = tokenize(sql)
    statements: list[list[Token]] = []
    cur: list[Token] = []
    depth = 0
    first = ""
    seen_select = False
    seen_set = False
    case_depth = 0
    for k, tok in enumerate(tokens):
        text = tok.text.upper()
        quoted_tok = tok.token_type in (TokenType.IDENTIFIER, TokenType.STRING, TokenType.NATIONAL_STRING)
        if not quoted_tok and depth == 0:
            if text == "CASE":
                case_depth += 1
            elif text == "END" and case_depth > 0:
                case_depth -= 1
            elif (text in ("END", "ELSE") and case_depth == 0) or (
                text == "BEGIN"
                and (
                    k + 1 >= len(tokens)
                    or tokens[k + 1].text.upper()
                    not in ("TRAN", "TRANSACTION", "DISTRIBUTED", "TRY", "CATCH")
                )
            ):
                # control-of-flow words are statements of their own (BEGIN ... END blocks, IF ... ELSE)
                if cur:
                    statements.append(cur)
                statements.append([tok])
                cur, first, seen_select, seen_set = [], "", False, False
                continue
        if tok.token_type == TokenType.SEMICOLON and depth == 0:
            if cur:
                statements.append(cur)
            cur, first, seen_select, seen_set = [], "", False, False
            continue
        if tok.token_type == TokenType.COMMAND and text == "GO" and depth == 0:
            if cur:
                statements.append(cur)
            cur, first, seen_select, seen_set = [], "", False, False
            continue
        quoted = tok.token_type in (TokenType.IDENTIFIER, TokenType.STRING, TokenType.NATIONAL_STRING)
        if depth == 0 and _after_change_tracking_context(first, cur, text):
            cur.append(tok)  # WITH CHANGE_TRACKING_CONTEXT (...) UPDATE ...: one statement, the DML's
            first = text
            continue
        if (
            depth == 0
            and cur
            and not quoted
            and text in STARTERS
            and _starts_new(text, first, cur, seen_select, seen_set)
        ):
            statements.append(cur)
            cur, first, seen_select, seen_set = [], "", False, False
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        if not cur:
            first = text
        elif depth == 0 and not quoted:
            if text in ("SELECT", "VALUES"):
                seen_select = True
            elif text == "SET":
                seen_set = True
        cur.append(tok)
    if cur:
        statements.append(cur)
    out = []
    for toks in statements:
        start = toks[0].start
        end = toks[-1].end
        text = sql[start : end + 1]
        out.append(RawStatement(text, toks))
    return tuple(out)


def _after_change_tracking_context(first: str, cur: list[Token], text: str) -> bool:
    """Whether ``text`` is the DML that ``WITH CHANGE_TRACKING_CONTEXT ( context )`` in ``cur`` applies to."""
    return (
        first == "WITH"
        and text in ("INSERT", "UPDATE", "DELETE", "MERGE")
        and len(cur) > 3
        and cur[1].text.upper() == "CHANGE_TRACKING_CONTEXT"
        and cur[-1].token_type == TokenType.R_PAREN
    )


def _starts_new(text: str, first: str, cur: list[Token], seen_select: bool, seen_set: bool) -> bool:
    prev = cur[-1].text.upper()
    if text == "SELECT":
        if prev in ("UNION", "ALL", "EXCEPT", "INTERSECT", "(", "AS"):
            return False
        if first in ("INSERT", "WITH") and not seen_select:
            return False
        return not (first == "DECLARE" and prev == "=")
    if text == "SET":
        if first == "UPDATE" and not seen_set:
            return False
        return first != "ALTER"
    if text in ("DROP", "ALTER"):
        return first != "ALTER"
    if text in ("INSERT", "UPDATE", "DELETE"):
        return first != "MERGE" and prev not in ("FOR", "AFTER", "INSTEAD", ",")
    if text == "EXEC" or text == "EXECUTE":
        return first != "INSERT" or seen_select
    if text == "BEGIN":
        return True
    if text in ("COMMIT", "ROLLBACK"):
        return True
    return True


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str) -> exp.Expression:
    with _lock:
        result = sqlglot.parse(text, dialect=_DIALECT)
    stmts = [s for s in result if s is not None]
    if len(stmts) != 1:
        raise syntax_error(text.split()[0] if text.split() else text)
    return stmts[0]


#: functions ``text -> text`` applied before parsing (e.g. CHANGETABLE(...) into a table function call)
TEXT_REWRITERS: list[Callable[[str], str]] = []


def parse_statement(text: str) -> exp.Expression:
    """Parse one statement (cached; callers must not modify the tree)."""
    for rewrite in TEXT_REWRITERS:
        text = rewrite(text)
    try:
        return _parse_cached(text)
    except ParseError as e:
        near = _near(e, text)
        raise syntax_error(near) from None


def parse_expression(text: str) -> exp.Expression:
    """Parse a scalar expression."""
    node = parse_statement("SELECT " + text)
    assert isinstance(node, exp.Select)
    return node.expressions[0]


def _near(error: ParseError, text: str) -> str:
    try:
        info = error.errors[0]
        hl = info.get("highlight") or ""
        if hl:
            return hl
    except (IndexError, AttributeError, KeyError):
        pass
    words = text.split()
    return words[-1] if words else text


def type_name_of(dt: exp.DataType) -> tuple[str, list[str]]:
    """(type name as written, its arguments) of a parsed DataType."""
    name = dt.meta.get("type_name")
    if not name:
        name = dt.this.value.lower() if hasattr(dt.this, "value") else str(dt.this).lower()
        name = {"timestamptz": "datetimeoffset", "uuid": "uniqueidentifier", "utinyint": "tinyint"}.get(
            name, name
        )
    if name == "user-defined":
        name = dt.args.get("kind") or "sysname"
    args = []
    for p in dt.expressions:
        inner = p.this if isinstance(p, exp.DataTypeParam) else p
        args.append(inner.name if isinstance(inner, (exp.Literal, exp.Var, exp.Identifier)) else inner.sql())
    return name, args


def table_name(node: exp.Table) -> str:
    """The name of a table reference, with ``#`` for temporary tables (sqlglot flags them)."""
    ident = node.this
    if isinstance(ident, exp.Identifier):
        if ident.args.get("global_") or ident.args.get("global"):
            return "##" + ident.name
        if ident.args.get("temporary"):
            return "#" + ident.name
    return node.name
