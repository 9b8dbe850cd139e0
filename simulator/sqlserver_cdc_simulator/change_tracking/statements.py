"""ALTER DATABASE … SET CHANGE_TRACKING, ALTER TABLE … ENABLE / DISABLE CHANGE_TRACKING, CHANGETABLE text.

The engine offers every DDL statement to :func:`alter_statement` (a statement hook) and every
statement text to :func:`rewrite_changetable` before parsing: ``CHANGETABLE(CHANGES t, @v)`` becomes a
call of the table function ``sys.changetable__changes(N't', @v)`` that :mod:`.functions` implements,
``CHANGETABLE(VERSION t, (k1, k2), (v1, v2))`` a call of ``sys.changetable__version(N't', N'k1, k2',
v1, v2)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from sqlserver_cdc_simulator.errors import (
    invalid_object,
    not_supported,
    syntax_error,
)
from sqlserver_cdc_simulator.events import StatementDone

from . import errors
from .functions import CHANGES_FUNCTION, VERSION_FUNCTION
from .state import RETENTION_UNITS, STATE_KEY, ChangeTrackingDatabase, TrackedTable, state_of


def alter_statement(session: Any, raw: Any) -> Iterator[Any] | None:
    """Run ALTER DATABASE … CHANGE_TRACKING / ALTER TABLE … CHANGE_TRACKING; None for other statements."""
    words = raw.words
    if len(words) < 4 or words[0] != "ALTER" or "CHANGE_TRACKING" not in words:
        return None
    if words[1] == "DATABASE":
        return _alter_database(session, raw)
    if words[1] == "TABLE":
        return _alter_table(session, raw)
    return None


class _Words:
    def __init__(self, raw: Any, pos: int) -> None:
        self.tokens = raw.tokens
        self.pos = pos

    def word(self) -> str:
        return self.tokens[self.pos].text.upper() if self.pos < len(self.tokens) else ""

    def take(self) -> str:
        if self.pos >= len(self.tokens):
            raise syntax_error(self.tokens[-1].text)
        self.pos += 1
        return self.tokens[self.pos - 1].text

    def expect(self, *words: str) -> str:
        if self.word() not in words:
            raise syntax_error(
                self.tokens[self.pos].text if self.pos < len(self.tokens) else self.tokens[-1].text
            )
        return self.take().upper()

    def accept(self, word: str) -> bool:
        if self.word() == word:
            self.pos += 1
            return True
        return False

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens) or self.word() == ";"

    def dotted(self) -> list[str]:
        parts = [self.take()]
        while self.word() == ".":
            self.take()
            parts.append(self.take())
        return parts


def _alter_database(session: Any, raw: Any) -> Iterator[Any]:
    w = _Words(raw, 2)
    name = session.database if w.accept("CURRENT") else w.take()
    engine = session.engine
    database = engine.database(name)
    w.expect("SET")
    if w.word() != "CHANGE_TRACKING":
        raise errors.options_combined()
    w.take()
    state = state_of(database)
    turn = None
    if w.accept("="):
        turn = w.expect("ON", "OFF")
    options = _options(w) if w.word() == "(" else {}
    if not w.at_end():
        raise errors.options_combined()
    if turn == "OFF":
        if state is None:
            raise errors.database_not_enabled(database.name)
        if state.tables:
            raise errors.tables_still_enabled(database.name)
        database.flags.pop(STATE_KEY, None)
    elif turn == "ON":
        if state is not None:
            raise errors.database_already_enabled(database.name)
        state = ChangeTrackingDatabase()
        _apply_options(state, options)
        database.flags[STATE_KEY] = state
    else:
        if state is None:
            raise errors.database_not_enabled(database.name)
        _apply_options(state, options)
    yield StatementDone(None)


def _options(w: _Words) -> dict[str, Any]:
    w.expect("(")
    options: dict[str, Any] = {}
    while True:
        option = w.expect("CHANGE_RETENTION", "AUTO_CLEANUP")
        w.expect("=")
        if option == "CHANGE_RETENTION":
            value = int(w.take())
            if value <= 0:
                raise not_supported("a CHANGE_RETENTION that is not positive")
            units = w.expect(*RETENTION_UNITS) if w.word() in RETENTION_UNITS else "DAYS"
            options[option] = (value, units)
        else:
            options[option] = w.expect("ON", "OFF") == "ON"
        if not w.accept(","):
            break
    w.expect(")")
    return options


def _apply_options(state: ChangeTrackingDatabase, options: dict[str, Any]) -> None:
    if "CHANGE_RETENTION" in options:
        state.retention_value, state.retention_units = options["CHANGE_RETENTION"]
    if "AUTO_CLEANUP" in options:
        state.auto_cleanup = options["AUTO_CLEANUP"]


def _alter_table(session: Any, raw: Any) -> Iterator[Any]:
    w = _Words(raw, 2)
    parts = w.dotted()
    written = ".".join(parts)
    action = w.expect("ENABLE", "DISABLE")
    w.expect("CHANGE_TRACKING")
    track_columns = False
    if action == "ENABLE" and w.accept("WITH"):
        w.expect("(")
        w.expect("TRACK_COLUMNS_UPDATED")
        w.expect("=")
        track_columns = w.expect("ON", "OFF") == "ON"
        w.expect(")")
    if not w.at_end():
        raise syntax_error(w.word())
    table = session.lookup_table_by_text(".".join(f"[{p}]" for p in parts))
    if table is None:
        raise invalid_object(written)
    engine = session.engine
    database = next(
        db for db in engine.databases.values() if db.table(table.schema.name, table.name) is table
    )
    if database.name.lower() == "tempdb":
        raise not_supported("change tracking on temporary tables")
    state = state_of(database)
    with engine.mutex:
        if action == "DISABLE":
            if state is None or table.object_id not in state.tables:
                raise errors.table_not_enabled_for_disable(written)
            del state.tables[table.object_id]
        else:
            if state is None:
                raise errors.database_not_enabled_for_table(database=database.name, table=written)
            if table.object_id in state.tables:
                raise errors.table_already_enabled(written)
            primary = next((ix for ix in table.indexes if ix.is_primary_key), None)
            if primary is None:
                raise errors.primary_key_required(written)
            engine.commit_seq += 1  # enabling is a transaction of its own: later snapshots see it
            state.tables[table.object_id] = TrackedTable(
                table.object_id,
                tuple(primary.columns),
                track_columns,
                state.version,
                engine.commit_seq,
                [(engine.commit_seq, state.version)],
            )
    yield StatementDone(None)


# --------------------------------------------------------------------------- CHANGETABLE text

_STRING = re.compile(r"N?'(?:[^']|'')*'|\[(?:[^\]]|\]\])*\]|--[^\n]*|/\*.*?\*/", re.S)
_CHANGETABLE = re.compile(r"\bCHANGETABLE\s*\(\s*(CHANGES|VERSION)\s+", re.I)
_NAME = re.compile(
    r"\s*((?:\[(?:[^\]]|\]\])*\]|[#\w@$]+)(?:\s*\.\s*(?:\[(?:[^\]]|\]\])*\]|[#\w@$]+)){0,3})\s*,", re.S
)
# changetable-transact-sql.md: "CHANGETABLE ( ... ) [AS] table_alias": the alias is required (error 22104)
_ALIAS = re.compile(r"\s*(?:AS\b\s*)?(?:\[|\"|[A-Za-z_#@])", re.I)
_NOT_ALIAS = re.compile(
    r"\s*(?:WHERE|ORDER|GROUP|HAVING|JOIN|INNER|LEFT|RIGHT|FULL|CROSS|OUTER|ON|UNION|EXCEPT|INTERSECT|OPTION|FOR)\b",
    re.I,
)


def rewrite_changetable(text: str) -> str:
    """Turn CHANGETABLE(CHANGES …) / CHANGETABLE(VERSION …) into table function calls the engine parses."""
    if "changetable" not in text.lower():
        return text
    protected = _protected_spans(text)
    out = []
    pos = 0
    for m in _CHANGETABLE.finditer(text):
        if m.start() < pos or _inside(m.start(), protected):
            continue
        name = _NAME.match(text, m.end())
        if name is None:
            raise syntax_error(
                text[m.end() : m.end() + 20].split()[0] if text[m.end() :].strip() else "CHANGETABLE"
            )
        close = _closing_paren(text, m.start() + m.group(0).index("("), protected)
        if not _ALIAS.match(text, close + 1) or _NOT_ALIAS.match(text, close + 1):
            raise errors.changetable_alias_required()
        rest = text[name.end() : close]
        quoted = "N'" + name.group(1).replace("'", "''") + "'"
        if m.group(1).upper() == "CHANGES":
            call = f"{CHANGES_FUNCTION}({quoted}, {rest.strip()})"
        else:
            call = f"{VERSION_FUNCTION}({quoted}, {_version_arguments(rest)})"
        out.append(text[pos : m.start()])
        out.append(call)
        pos = close + 1
    out.append(text[pos:])
    return "".join(out)


def _version_arguments(rest: str) -> str:
    groups = re.fullmatch(r"\s*\(([^()]*)\)\s*,\s*\((.*)\)\s*", rest, re.S)
    if groups is None:
        raise syntax_error("VERSION")
    columns, values = groups.group(1), groups.group(2)
    return "N'" + columns.replace("'", "''") + "', " + values


def _protected_spans(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _STRING.finditer(text) if not m.group(0).startswith("[")]


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _closing_paren(text: str, open_pos: int, protected: list[tuple[int, int]]) -> int:
    depth = 0
    for i in range(open_pos, len(text)):
        if _inside(i, protected):
            continue
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise syntax_error("CHANGETABLE")
