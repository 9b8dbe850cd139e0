"""The seeded random workload: transactions of inserts, updates and deletes, and the model of their effect."""

from __future__ import annotations

import dataclasses
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from sqlserver_cdc_simulator.workload.keyed_rows import KeyedRows
from sqlserver_cdc_simulator.workload.odbc_client import cursor_with_autocommit
from sqlserver_cdc_simulator.workload.sample_tables import SAMPLE_TABLES
from sqlserver_cdc_simulator.workload.schema import Key, Row, SampleTable, find_table
from sqlserver_cdc_simulator.workload.statements import (
    delete_statement,
    insert_statement,
    read_rows,
    update_statement,
)

#: The statement kinds the workload draws: :class:`WorkloadMix` weighs them, :class:`WorkloadStats`
#: counts the row changes of each.
STATEMENT_KINDS = ("insert", "update", "key_update", "unique_key_update", "delete")

# What rolling back a transaction puts back: (the model rows, a key, the row it held before or None).
_Undo = list[tuple[KeyedRows, Key, Row | None]]


@dataclasses.dataclass
class WorkloadStats:
    """What a :meth:`Workload.run` applied (committed transactions only, except ``rolled_back``)."""

    #: transactions committed.
    transactions: int = 0
    #: transactions rolled back (their statements are not counted).
    rolled_back: int = 0
    #: row changes per statement kind (:data:`STATEMENT_KINDS`): rows inserted, rows whose non-key
    #: columns, primary key or unique secondary key were updated (one row change each), rows deleted.
    rows: Counter[str] = dataclasses.field(default_factory=Counter)
    #: statements drawn in committed transactions (an insert whose keys were all taken, or a key
    #: update to a taken key, is drawn but not sent).
    statements: int = 0
    #: wall-clock duration of the run.
    seconds: float = 0.0

    @property
    def row_changes(self) -> int:
        """Committed row changes (a key update counts once)."""
        return sum(self.rows.values())

    def add(self, other: WorkloadStats) -> None:
        """
        Add the counts of ``other`` to these.

        :param other: the counts to add (a committed transaction's).
        """
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass(frozen=True)
class WorkloadMix:
    """
    Relative weights of the statement kinds the workload draws.

    :param insert: inserts of one to ``max_rows`` rows.
    :param update: updates of non-key columns of one existing row.
    :param key_update: updates that change a row's primary key.
    :param unique_key_update: updates that change a unique secondary key.
    :param delete: deletes of one existing row.
    :param max_statements: statements per transaction are drawn from 1..max_statements.
    :param max_rows: rows per insert are drawn from 1..max_rows.
    :param rollback_ratio: share of transactions rolled back instead of committed.
    """

    insert: float = 0.4
    update: float = 0.35
    key_update: float = 0.05
    unique_key_update: float = 0.05
    delete: float = 0.15
    max_statements: int = 4
    max_rows: int = 3
    rollback_ratio: float = 0.05

    def weights(self) -> list[float]:
        """The weights of :data:`STATEMENT_KINDS`, in that order."""
        return [getattr(self, kind) for kind in STATEMENT_KINDS]


class Workload:
    """
    A seeded random workload over the sample tables, with a model of the expected table contents.

    :param seed: random seed; the same seed against the same starting state gives the same statements.
    :param tables: tables to write (default: all sample tables).
    :param mix: statement mix.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        tables: Sequence[SampleTable] = SAMPLE_TABLES,
        mix: WorkloadMix | None = None,
    ) -> None:
        self.seed = seed
        self.tables = tuple(tables)
        self.mix = mix or WorkloadMix()
        self._rng = random.Random(seed)
        #: expected rows per table (``schema.name``), keyed by primary-key tuple.
        self.model: dict[str, dict[Key, Row]] = {t.qualified_name: {} for t in self.tables}
        self._counters: dict[str, int] = {}
        self._key_index: dict[str, KeyedRows] = {}
        self._model_loaded = False

    # ----------------------------------------------------------------- public API

    def load_model(self, conn: Any) -> None:
        """
        Read the current rows of every table into the model.

        :meth:`run` and :meth:`insert_rows` do this on their first call, so a workload can start on
        tables that already hold rows (keys continue after the largest existing ones).

        :param conn: a pyodbc connection in the sample database.
        """
        self._model_loaded = True
        cursor = conn.cursor()
        for table in self.tables:
            self.model[table.qualified_name] = {}
            self._key_index.pop(table.qualified_name, None)
            rows = self._rows(table)
            for row in read_rows(cursor, table):
                rows.put(table.key_of(row), row)
                self._bump_counters(table, row)
        cursor.close()

    def run(
        self,
        conn: Any,
        transactions: int | None = None,
        *,
        duration: float | None = None,
        rate: float | None = None,
        on_commit: Callable[[WorkloadStats], None] | None = None,
    ) -> WorkloadStats:
        """
        Apply transactions until ``transactions`` have been attempted or ``duration`` seconds passed.

        :param conn: a pyodbc connection; its autocommit setting is restored afterwards.
        :param transactions: number of transactions to attempt (committed + rolled back).
        :param duration: stop after this many seconds.
        :param rate: target transactions per second (None: as fast as possible).
        :param on_commit: called after every committed transaction with the running totals.
        """
        if transactions is None and duration is None:
            raise ValueError("give transactions=, duration= or both")
        self._ensure_model(conn)
        stats = WorkloadStats()
        start = time.monotonic()
        attempted = 0
        with cursor_with_autocommit(conn, False) as cursor:
            while True:
                if transactions is not None and attempted >= transactions:
                    break
                if duration is not None and time.monotonic() - start >= duration:
                    break
                if rate:
                    pause = start + attempted / rate - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                attempted += 1
                self._run_transaction(conn, cursor, stats)
                if on_commit is not None:
                    on_commit(stats)
        stats.seconds = time.monotonic() - start
        return stats

    def insert_rows(self, conn: Any, table_name: str, count: int, *, batch: int = 100) -> int:
        """
        Insert ``count`` new rows into one table in multi-row INSERTs (committed); return the count.

        :param conn: a pyodbc connection in the sample database; its autocommit setting is restored.
        :param table_name: ``schema.name`` of the table.
        :param count: how many rows to insert.
        :param batch: rows per INSERT (fewer if the table's columns would pass 2,000 parameters).
        """
        table = find_table(self.tables, table_name)
        self._ensure_model(conn)
        # SQL Server accepts at most 2100 parameters per request.
        batch = max(1, min(batch, 2000 // len(table.writable_columns)))
        model = self._rows(table)
        with cursor_with_autocommit(conn, False) as cursor:
            for done in range(0, count, batch):
                rows = [self._new_row(table) for _ in range(min(batch, count - done))]
                cursor.execute(*insert_statement(table, rows))
                conn.commit()
                for row in rows:
                    model.put(table.key_of(row), row)
        return count

    # ----------------------------------------------------------------- model and keys

    def _ensure_model(self, conn: Any) -> None:
        if not self._model_loaded:
            self.load_model(conn)

    def _rows(self, table: SampleTable) -> KeyedRows:
        rows = self._key_index.get(table.qualified_name)
        if rows is None:
            rows = self._key_index[table.qualified_name] = KeyedRows(self.model[table.qualified_name])
        return rows

    def _next(self, counter: str) -> int:
        value = self._counters.get(counter, 0) + 1
        self._counters[counter] = value
        return value

    def _bump_counters(self, table: SampleTable, row: Row) -> None:
        """Make new keys continue after those of an existing row."""
        seen = {
            name: row[name]
            for name in table.key
            if isinstance(row[name], int) and not isinstance(row[name], bool)
        }
        if table.unique:
            seen[table.unique] = int("".join(ch for ch in str(row[table.unique]) if ch.isdigit()) or 0)
        for name, value in seen.items():
            counter = f"{table.qualified_name}.{name}"
            self._counters[counter] = max(self._counters.get(counter, 0), value)

    def _new_key(self, table: SampleTable) -> dict[str, Any]:
        if table.qualified_name == "dbo.order_lines":
            # lines of a fresh order number; line_no from a small range
            return {"order_id": self._next("dbo.order_lines.order_id"), "line_no": self._rng.randint(1, 20)}
        return {name: self._next(f"{table.qualified_name}.{name}") for name in table.key}

    def _new_unique(self, table: SampleTable) -> str:
        return f"user{self._next(f'{table.qualified_name}.{table.unique}')}@example.com"

    def _new_row(self, table: SampleTable) -> Row:
        row = {c.name: c.generate(self._rng) for c in table.writable_columns}  # type: ignore[misc]
        row.update(self._new_key(table))
        if table.unique:
            row[table.unique] = self._new_unique(table)
        return row

    # ----------------------------------------------------------------- transactions

    def _run_transaction(self, conn: Any, cursor: Any, stats: WorkloadStats) -> None:
        rng = self._rng
        mix = self.mix
        undo: _Undo = []
        local = WorkloadStats()
        for _ in range(rng.randint(1, mix.max_statements)):
            table = rng.choice(self.tables)
            rows = self._rows(table)
            kind = rng.choices(STATEMENT_KINDS, weights=mix.weights())[0]
            if kind != "insert" and not rows:
                kind = "insert"
            if kind == "unique_key_update" and not table.unique:
                kind = "update"
            if kind == "insert":
                local.rows[kind] += self._insert(cursor, table, rows, undo)
            elif kind == "delete":
                local.rows[kind] += self._delete(cursor, table, rows, undo)
            else:
                local.rows[kind] += self._update(cursor, table, rows, kind, undo)
            local.statements += 1
        if rng.random() < mix.rollback_ratio:
            conn.rollback()
            for rows, key, previous in reversed(undo):
                if previous is None:
                    rows.discard(key)
                else:
                    rows.put(key, previous)
            stats.rolled_back += 1
            return
        conn.commit()
        local.transactions = 1
        stats.add(local)

    def _insert(self, cursor: Any, table: SampleTable, rows: KeyedRows, undo: _Undo) -> int:
        new_rows: list[Row] = []
        seen: set[Key] = set()
        for _ in range(self._rng.randint(1, self.mix.max_rows)):
            row = self._new_row(table)
            key = table.key_of(row)
            if key not in rows and key not in seen:
                new_rows.append(row)
                seen.add(key)
        if not new_rows:
            return 0
        cursor.execute(*insert_statement(table, new_rows))
        for row in new_rows:
            key = table.key_of(row)
            rows.put(key, row)
            undo.append((rows, key, None))
        return len(new_rows)

    def _delete(self, cursor: Any, table: SampleTable, rows: KeyedRows, undo: _Undo) -> int:
        key = rows.choice(self._rng)
        cursor.execute(*delete_statement(table, key))
        undo.append((rows, key, rows.discard(key)))
        return 1

    def _update(self, cursor: Any, table: SampleTable, rows: KeyedRows, kind: str, undo: _Undo) -> int:
        rng = self._rng
        key = rows.choice(rng)
        old = rows.get(key)
        if kind == "update":
            candidates = table.data_columns
            changed = rng.sample(candidates, rng.randint(1, min(3, len(candidates))))
            values = {c.name: c.generate(rng) for c in changed}  # type: ignore[misc]
        elif kind == "key_update":
            values = self._new_key(table)
            if table.key_of(values) in rows:
                return 0
        else:
            values = {table.unique: self._new_unique(table)}  # type: ignore[dict-item]
        cursor.execute(*update_statement(table, key, values))
        row = {**old, **values}
        new_key = table.key_of(row)
        rows.discard(key)
        undo.append((rows, key, old))
        rows.put(new_key, row)
        if new_key != key:
            undo.append((rows, new_key, None))
        return 1
