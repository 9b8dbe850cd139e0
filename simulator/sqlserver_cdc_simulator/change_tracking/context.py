"""WITH CHANGE_TRACKING_CONTEXT ( context ) before an INSERT, UPDATE or DELETE.

with-change-tracking-context-transact-sql.md: the context (varbinary(128), a constant or a variable,
not NULL) is stored with the change tracking information of the statement's changes;
CHANGETABLE(CHANGES ...) and CHANGETABLE(VERSION ...) return it as SYS_CHANGE_CONTEXT (the context of
a row's latest change). The statement runs as usual; the row changes it logged get the context by
their LSN, which :func:`.recording.record_commit` moves into the change entries at commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.errors import not_supported, syntax_error
from sqlserver_cdc_simulator.sql.compiler import Compiler
from sqlserver_cdc_simulator.sql.dialect import parse_expression, split_batch
from sqlserver_cdc_simulator.sql.expressions import Scope, converter

from .state import state_of

CONTEXT_TYPE = T.varbinary(128)
_STATEMENTS = ("INSERT", "UPDATE", "DELETE", "MERGE")


def with_context(session: Any, raw: Any, dispatch: Callable[[Any], Iterator[Any]]) -> Iterator[Any]:
    """Run ``raw`` (``WITH CHANGE_TRACKING_CONTEXT (expr) statement``) with the context on its row changes.

    :param dispatch: runs the statement that follows the context.
    """
    tokens = raw.tokens
    if len(tokens) < 4 or tokens[2].text != "(":
        raise syntax_error(tokens[min(2, len(tokens) - 1)].text)
    depth, close = 0, None
    for i in range(2, len(tokens)):
        depth += {"(": 1, ")": -1}.get(tokens[i].text, 0)
        if depth == 0:
            close = i
            break
    if close is None or close + 1 >= len(tokens):
        raise syntax_error(tokens[-1].text)
    base = tokens[0].start
    expression = raw.text[tokens[3].start - base : tokens[close].start - base]
    compiled = Compiler(session, Scope()).compile(parse_expression(expression))
    value = compiled.fn(())
    if value is None:
        raise not_supported("a NULL WITH CHANGE_TRACKING_CONTEXT (SQL Server refuses it)")
    conv = converter(compiled.type, CONTEXT_TYPE)
    context = bytes(conv(value) if conv is not None else value)[:128]
    rest = split_batch(raw.text[tokens[close + 1].start - base :])
    if len(rest) != 1 or rest[0].words[0] not in _STATEMENTS:
        raise syntax_error(tokens[close + 1].text)
    xact = session.xact
    before = {db: len(ops) for db, ops in xact.ops.items()} if xact is not None else {}
    yield from dispatch(rest[0])
    xact = session.xact
    if xact is None:
        return
    for dbname, ops in xact.ops.items():
        state = state_of(session.engine.database(dbname))
        if state is None:
            continue
        for op in ops[before.get(dbname, 0) :]:
            if op.object_id in state.tables:
                state.contexts[op.lsn] = context
