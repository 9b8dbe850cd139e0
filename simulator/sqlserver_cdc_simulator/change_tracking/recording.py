"""Record tracked row changes inside the engine's commit, so versions commit with the data.

The engine calls :func:`record_commit` under its mutex right after it publishes a commit: a
transaction that changed a tracked table gets the database's next version, and each changed key an
entry. Readers filter entries by commit sequence number, so a snapshot that does not see the rows of
a transaction does not see its version either.
"""

from __future__ import annotations

from typing import Any

from sqlserver_cdc_simulator.collation import ci_key
from sqlserver_cdc_simulator.log import RowOperation

from .state import ChangeEntry, TrackedTable, state_of


def record_commit(engine: Any, records: list[tuple[Any, Any]], seq: int) -> None:
    """Give each committed transaction that changed tracked tables a version and record its keys.

    :param records: ``(database, CommittedTransaction)`` of the commit, one per database written.
    :param seq: the engine's commit sequence number of the commit.
    """
    for db, committed in records:
        state = state_of(db)
        if state is None or not state.tables:
            continue
        version = 0
        positions: dict[tuple[int, tuple[str, ...]], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for op in committed.operations:
            if not isinstance(op, RowOperation):
                continue
            tracked = state.tables.get(op.object_id)
            if tracked is None:
                continue
            if not version:
                state.version += 1
                version = state.version
                state.commits.append((seq, version, committed.commit_time_utc_ticks, committed.xact_id))
            layout = positions.get((op.object_id, op.columns))
            if layout is None:
                layout = positions[(op.object_id, op.columns)] = _layout(db, op, tracked)
            context = state.contexts.pop(op.lsn, None) if getattr(state, "contexts", None) else None
            tracked.entries.extend(_entries(op, tracked, layout, seq, version, context))


def _layout(db: Any, op: RowOperation, tracked: TrackedTable) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(key positions, column ids by position) of the operation's row layout."""
    lowered = [c.lower() for c in op.columns]
    key_positions = tuple(lowered.index(k.lower()) for k in tracked.key_columns)
    table = db.table(op.schema, op.table)
    ids = {c.name.lower(): c.column_id for c in table.columns} if table is not None else {}
    return key_positions, tuple(ids.get(c, 0) for c in lowered)


def _entries(
    op: RowOperation,
    tracked: TrackedTable,
    layout: tuple[tuple[int, ...], tuple[int, ...]],
    seq: int,
    version: int,
    context: bytes | None = None,
) -> list[ChangeEntry]:
    key_positions, column_ids = layout

    def entry(row: tuple[Any, ...], operation: str, columns: frozenset[int] = frozenset()) -> ChangeEntry:
        values = tuple(row[p] for p in key_positions)
        return ChangeEntry(
            seq, version, tuple(ci_key(v) for v in values), values, operation, columns, context
        )

    if op.kind == "insert":
        return [entry(op.after, "I")]
    if op.kind == "delete":
        return [entry(op.before, "D")]
    old, new = entry(op.before, "U"), entry(op.after, "U")
    if old.key != new.key:  # a primary key update is a delete of the old key and an insert of the new one
        return [entry(op.before, "D"), entry(op.after, "I")]
    changed = frozenset(
        column_ids[i] for i, (b, a) in enumerate(zip(op.before, op.after, strict=True)) if b != a
    )
    return [entry(op.after, "U", changed)]
