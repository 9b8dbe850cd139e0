"""Sample database and seeded random workload for SQL Server CDC, applied through a real client (pyodbc).

The demo, the end-to-end tests and the benchmarks use it against the simulator or a real SQL
Server 2022::

    conn = pyodbc.connect(odbc_connection_string, autocommit=True)
    sample = SampleDatabase.create(conn, database="cdc_sample")
    workload = Workload(seed=7)
    stats = workload.run(conn, transactions=500)
    workload.model["dbo.orders"]          # expected current rows, keyed by primary key

The sample database has four tables: ``dbo.customers`` (integer key plus a unique secondary key
on ``email``), ``dbo.orders`` (bigint key), ``dbo.order_lines`` (composite primary key) and
``dbo.type_zoo`` (one column of every data type the provider supports). CDC is enabled on the
database and on each table (net changes on, so both query functions exist).

The workload draws a seeded mix of inserts, updates (including primary-key and unique-key
updates), deletes and multi-statement transactions (some rolled back), and keeps a model of the
rows it expects each table to hold, so a test can compare a replica with the source without
reading the source.

Command line (connection string from ``--odbc`` or ``$SQLSERVER_CDC_ODBC``)::

    python -m airflow_provider_sqlserver_cdc.testing.workload create --database cdc_sample --initial-rows 100
    python -m airflow_provider_sqlserver_cdc.testing.workload run --database cdc_sample \\
        --transactions 1000 --rate 50 --seed 7
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import decimal
import os
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

Row = dict[str, Any]
Key = tuple[Any, ...]

_D = decimal.Decimal


# --------------------------------------------------------------------------- value generators


def _money(rng: random.Random, whole: int = 100_000) -> decimal.Decimal:
    return _D(rng.randint(-whole * 10_000, whole * 10_000)).scaleb(-4)


def _decimal(rng: random.Random, precision: int, scale: int) -> decimal.Decimal:
    digits = min(precision, 15)
    return _D(rng.randint(-(10**digits) + 1, 10**digits - 1)).scaleb(-scale)


def _text(rng: random.Random, max_len: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz ") -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len)))


# Characters outside ASCII, including some beyond the Basic Multilingual Plane.
_UNICODE = "aé漢字ßΩж😀🚀𝔘"


def _unicode(rng: random.Random, max_len: int) -> str:
    return "".join(rng.choice(_UNICODE) for _ in range(rng.randint(1, max_len)))


def _datetime2(rng: random.Random, digits: int = 6) -> dt.datetime:
    base = dt.datetime(2020, 1, 1) + dt.timedelta(seconds=rng.randint(0, 5 * 365 * 86400))
    micro = rng.randint(0, 999_999)
    if digits < 6:
        micro -= micro % 10 ** (6 - digits)
    return base.replace(microsecond=micro)


def _legacy_datetime(rng: random.Random) -> dt.datetime:
    # datetime keeps 1/300 s; multiples of 10 ms are exact.
    return _datetime2(rng, 0).replace(microsecond=rng.randint(0, 99) * 10_000)


def _smalldatetime(rng: random.Random) -> dt.datetime:
    return _datetime2(rng, 0).replace(second=0)


def _time(rng: random.Random, digits: int = 6) -> dt.time:
    return _datetime2(rng, digits).time()


def _date(rng: random.Random) -> dt.date:
    return dt.date(1990, 1, 1) + dt.timedelta(days=rng.randint(0, 20_000))


def _datetimeoffset(rng: random.Random) -> dt.datetime:
    offset = dt.timedelta(minutes=rng.choice([-480, -300, 0, 60, 330, 600]))
    return _datetime2(rng, 6).replace(tzinfo=dt.timezone(offset))


def _guid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper()


def _maybe_null(rng: random.Random, value: Callable[[], Any], null_ratio: float = 0.15) -> Any:
    return None if rng.random() < null_ratio else value()


# --------------------------------------------------------------------------- schema


@dataclasses.dataclass(frozen=True)
class ColumnSpec:
    """
    A column of a sample table.

    :param name: column name.
    :param declaration: T-SQL type (and constraints) as written in CREATE TABLE.
    :param generate: draws a value; ``None`` for server-generated columns (rowversion).
    :param parameter: converts a model value to the ``?`` parameter pyodbc sends (default: as is).
    """

    name: str
    declaration: str
    generate: Callable[[random.Random], Any] | None
    parameter: Callable[[Any], Any] | None = None


@dataclasses.dataclass(frozen=True)
class SampleTable:
    """
    A table of the sample database.

    :param schema: schema name.
    :param name: table name.
    :param columns: all columns in declaration order.
    :param key: primary-key column names.
    :param key_kind: how new keys are drawn: ``counter`` (a fresh integer per key column set).
    :param unique: a unique secondary key column (drawn from a counter), if any.
    :param constraints: extra table constraints for CREATE TABLE.
    """

    schema: str
    name: str
    columns: tuple[ColumnSpec, ...]
    key: tuple[str, ...]
    unique: str | None = None
    constraints: tuple[str, ...] = ()

    @property
    def qualified_name(self) -> str:
        """``schema.name``."""
        return f"{self.schema}.{self.name}"

    @property
    def quoted_name(self) -> str:
        """``[schema].[name]``."""
        return f"[{self.schema}].[{self.name}]"

    @property
    def capture_instance(self) -> str:
        """The default capture instance name SQL Server derives: ``schema_name``."""
        return f"{self.schema}_{self.name}"

    @property
    def writable_columns(self) -> tuple[ColumnSpec, ...]:
        """Columns the client writes (all but server-generated ones)."""
        return tuple(c for c in self.columns if c.generate is not None)

    @property
    def data_columns(self) -> tuple[ColumnSpec, ...]:
        """Writable columns that are neither key nor unique key."""
        skip = set(self.key) | ({self.unique} if self.unique else set())
        return tuple(c for c in self.writable_columns if c.name not in skip)

    def create_statement(self) -> str:
        """The CREATE TABLE statement."""
        parts = [f"[{c.name}] {c.declaration}" for c in self.columns]
        parts.append(f"CONSTRAINT [PK_{self.name}] PRIMARY KEY ({', '.join(f'[{k}]' for k in self.key)})")
        if self.unique:
            parts.append(f"CONSTRAINT [UQ_{self.name}_{self.unique}] UNIQUE ([{self.unique}])")
        parts.extend(self.constraints)
        return f"CREATE TABLE {self.quoted_name} (\n  " + ",\n  ".join(parts) + "\n)"


def _iso_offset(value: dt.datetime | None) -> str | None:
    # pyodbc cannot send an aware datetime; SQL Server converts this text to datetimeoffset exactly.
    return None if value is None else value.isoformat(sep=" ")


def _parse_datetimeoffset(text: str | None) -> dt.datetime | None:
    """``2024-01-02 03:04:05.1234567 +05:30`` (SQL Server's text form) as an aware datetime (microseconds)."""
    if text is None:
        return None
    stamp, offset = text.strip().rsplit(" ", 1)
    if "." in stamp:
        head, fraction = stamp.split(".")
        stamp = f"{head}.{fraction[:6].ljust(6, '0')}"
    return dt.datetime.fromisoformat(f"{stamp}{offset}")


def _iso_time(value: dt.time | None) -> str | None:
    # pyodbc binds datetime.time as SQL_TYPE_TIME, which drops the fraction of a second; text keeps it.
    return None if value is None else value.isoformat()


def _nullable(gen: Callable[[random.Random], Any], ratio: float = 0.15) -> Callable[[random.Random], Any]:
    return lambda rng: _maybe_null(rng, lambda: gen(rng), ratio)


SAMPLE_TABLES: tuple[SampleTable, ...] = (
    SampleTable(
        "dbo",
        "customers",
        (
            ColumnSpec("customer_id", "int NOT NULL", lambda rng: 0),
            ColumnSpec("email", "nvarchar(200) NOT NULL", lambda rng: ""),
            ColumnSpec("name", "nvarchar(100) NOT NULL", lambda rng: _text(rng, 30).strip() or "x"),
            ColumnSpec(
                "country", "char(2) NULL", _nullable(lambda rng: rng.choice(["DE", "FR", "US", "JP", "BR"]))
            ),
            ColumnSpec("is_active", "bit NOT NULL", lambda rng: rng.random() < 0.8),
            ColumnSpec("credit_limit", "money NULL", _nullable(_money)),
            ColumnSpec("created_at", "datetime2(7) NOT NULL", lambda rng: _datetime2(rng)),
            ColumnSpec("notes", "nvarchar(max) NULL", _nullable(lambda rng: _unicode(rng, 40), 0.4)),
        ),
        key=("customer_id",),
        unique="email",
    ),
    SampleTable(
        "dbo",
        "orders",
        (
            ColumnSpec("order_id", "bigint NOT NULL", lambda rng: 0),
            ColumnSpec("customer_id", "int NOT NULL", lambda rng: rng.randint(1, 1000)),
            ColumnSpec("order_date", "date NOT NULL", _date),
            ColumnSpec(
                "status", "varchar(20) NOT NULL", lambda rng: rng.choice(["new", "paid", "shipped", "void"])
            ),
            ColumnSpec("amount", "decimal(18,2) NOT NULL", lambda rng: _decimal(rng, 18, 2)),
            ColumnSpec("discount", "smallmoney NULL", _nullable(lambda rng: _money(rng, 1000))),
            ColumnSpec("priority", "tinyint NOT NULL", lambda rng: rng.randint(0, 255)),
            ColumnSpec("weight_kg", "real NULL", _nullable(lambda rng: rng.randint(0, 40_000) / 4)),
            ColumnSpec("ship_time", "time(3) NULL", _nullable(lambda rng: _time(rng, 3)), _iso_time),
            ColumnSpec("updated_at", "datetime NOT NULL", _legacy_datetime),
        ),
        key=("order_id",),
    ),
    SampleTable(
        "dbo",
        "order_lines",
        (
            ColumnSpec("order_id", "bigint NOT NULL", lambda rng: 0),
            ColumnSpec("line_no", "smallint NOT NULL", lambda rng: 0),
            ColumnSpec("product_code", "varchar(30) NOT NULL", lambda rng: f"P-{rng.randint(1, 9999):04d}"),
            ColumnSpec("quantity", "int NOT NULL", lambda rng: rng.randint(1, 500)),
            ColumnSpec("unit_price", "numeric(12,4) NOT NULL", lambda rng: _decimal(rng, 12, 4).copy_abs()),
            ColumnSpec("comment", "nvarchar(100) NULL", _nullable(lambda rng: _unicode(rng, 20), 0.5)),
        ),
        key=("order_id", "line_no"),
    ),
    SampleTable(
        "dbo",
        "type_zoo",
        (
            ColumnSpec("id", "int NOT NULL", lambda rng: 0),
            ColumnSpec("c_bit", "bit NULL", _nullable(lambda rng: rng.random() < 0.5)),
            ColumnSpec("c_tinyint", "tinyint NULL", _nullable(lambda rng: rng.randint(0, 255))),
            ColumnSpec("c_smallint", "smallint NULL", _nullable(lambda rng: rng.randint(-32768, 32767))),
            ColumnSpec("c_int", "int NULL", _nullable(lambda rng: rng.randint(-(2**31), 2**31 - 1))),
            ColumnSpec("c_bigint", "bigint NULL", _nullable(lambda rng: rng.randint(-(2**63), 2**63 - 1))),
            ColumnSpec(
                "c_decimal",
                "decimal(38,10) NULL",
                _nullable(lambda rng: _D(rng.randint(-(10**37) + 1, 10**37 - 1)).scaleb(-10)),
            ),
            ColumnSpec("c_numeric", "numeric(9,3) NULL", _nullable(lambda rng: _decimal(rng, 9, 3))),
            ColumnSpec("c_money", "money NULL", _nullable(_money)),
            ColumnSpec("c_smallmoney", "smallmoney NULL", _nullable(lambda rng: _money(rng, 200_000))),
            ColumnSpec("c_real", "real NULL", _nullable(lambda rng: rng.randint(-(2**20), 2**20) / 8)),
            ColumnSpec("c_float", "float NULL", _nullable(lambda rng: rng.uniform(-1e12, 1e12))),
            ColumnSpec("c_char", "char(10) NULL", _nullable(lambda rng: _text(rng, 10).ljust(10))),
            ColumnSpec("c_varchar", "varchar(50) NULL", _nullable(lambda rng: _text(rng, 50))),
            ColumnSpec("c_varchar_max", "varchar(max) NULL", _nullable(lambda rng: _text(rng, 200))),
            ColumnSpec("c_nchar", "nchar(10) NULL", _nullable(lambda rng: _text(rng, 10, "abcΩж").ljust(10))),
            ColumnSpec("c_nvarchar", "nvarchar(50) NULL", _nullable(lambda rng: _unicode(rng, 20))),
            ColumnSpec("c_nvarchar_max", "nvarchar(max) NULL", _nullable(lambda rng: _unicode(rng, 100))),
            ColumnSpec("c_binary", "binary(8) NULL", _nullable(lambda rng: rng.randbytes(8))),
            ColumnSpec(
                "c_varbinary", "varbinary(50) NULL", _nullable(lambda rng: rng.randbytes(rng.randint(0, 50)))
            ),
            ColumnSpec(
                "c_varbinary_max",
                "varbinary(max) NULL",
                _nullable(lambda rng: rng.randbytes(rng.randint(0, 300))),
            ),
            ColumnSpec("c_date", "date NULL", _nullable(_date)),
            ColumnSpec("c_time", "time(7) NULL", _nullable(lambda rng: _time(rng, 6)), _iso_time),
            ColumnSpec("c_datetime", "datetime NULL", _nullable(_legacy_datetime)),
            ColumnSpec("c_smalldatetime", "smalldatetime NULL", _nullable(_smalldatetime)),
            ColumnSpec("c_datetime2", "datetime2(7) NULL", _nullable(lambda rng: _datetime2(rng, 6))),
            ColumnSpec("c_datetime2_3", "datetime2(3) NULL", _nullable(lambda rng: _datetime2(rng, 3))),
            ColumnSpec("c_datetimeoffset", "datetimeoffset(7) NULL", _nullable(_datetimeoffset), _iso_offset),
            ColumnSpec("c_uniqueidentifier", "uniqueidentifier NULL", _nullable(_guid)),
            ColumnSpec("c_rowversion", "rowversion", None),
        ),
        key=("id",),
    ),
)


# --------------------------------------------------------------------------- sample database


@dataclasses.dataclass
class SampleDatabase:
    """
    The sample database: its name and tables (all enabled for CDC unless asked otherwise).

    :param database: database name.
    :param tables: the tables created.
    """

    database: str
    tables: tuple[SampleTable, ...] = SAMPLE_TABLES

    @classmethod
    def create(
        cls,
        conn: Any,
        database: str = "cdc_sample",
        *,
        enable_cdc: bool = True,
        role_name: str | None = None,
        supports_net_changes: bool = True,
        drop_existing: bool = True,
        tables: Sequence[SampleTable] = SAMPLE_TABLES,
        allow_snapshot_isolation: bool = True,
    ) -> SampleDatabase:
        """
        Create the database and its tables and enable CDC on them; leave the connection in it.

        The database allows SNAPSHOT isolation (``ALLOW_SNAPSHOT_ISOLATION ON``) unless asked not to:
        the initial load's default consistent-point method needs it.

        :param conn: a pyodbc connection (autocommit on or off; the DDL is committed).
        :param database: name of the database to create.
        :param enable_cdc: run ``sys.sp_cdc_enable_db`` and ``sys.sp_cdc_enable_table``.
        :param role_name: ``@role_name`` gating access to the change data (None: no gating role).
        :param supports_net_changes: ``@supports_net_changes`` for each table.
        :param drop_existing: drop a database of that name first.
        :param tables: the tables to create (default: all sample tables).
        :param allow_snapshot_isolation: set ``ALLOW_SNAPSHOT_ISOLATION ON`` (False leaves it OFF, to
            test what happens without it).
        """
        quoted = "[" + database.replace("]", "]]") + "]"
        autocommit = conn.autocommit
        conn.autocommit = True
        try:
            cursor = conn.cursor()
            cursor.execute("USE master")
            if drop_existing and cursor.execute("SELECT DB_ID(?)", database).fetchone()[0] is not None:
                cursor.execute(f"DROP DATABASE {quoted}")
            cursor.execute(f"CREATE DATABASE {quoted}")
            if allow_snapshot_isolation:
                cursor.execute(f"ALTER DATABASE {quoted} SET ALLOW_SNAPSHOT_ISOLATION ON")
            cursor.execute(f"USE {quoted}")
            for table in tables:
                cursor.execute(table.create_statement())
            if enable_cdc:
                cursor.execute("EXEC sys.sp_cdc_enable_db")
                for table in tables:
                    cursor.execute(
                        "EXEC sys.sp_cdc_enable_table @source_schema = ?, @source_name = ?, @role_name = ?, "
                        "@supports_net_changes = ?",
                        table.schema,
                        table.name,
                        role_name,
                        1 if supports_net_changes else 0,
                    )
                    _drain(cursor)
            cursor.close()
        finally:
            conn.autocommit = autocommit
        return cls(database=database, tables=tuple(tables))

    def table(self, qualified_name: str) -> SampleTable:
        """The table called ``schema.name``."""
        for table in self.tables:
            if table.qualified_name == qualified_name:
                return table
        raise KeyError(qualified_name)


def _drain(cursor: Any) -> None:
    # Procedures may return informational messages or result sets; read past them.
    while cursor.nextset():
        pass


# --------------------------------------------------------------------------- workload


@dataclasses.dataclass
class WorkloadStats:
    """What a :meth:`Workload.run` applied (committed transactions only, except ``rolled_back``)."""

    transactions: int = 0
    rolled_back: int = 0
    inserts: int = 0
    updates: int = 0
    key_updates: int = 0
    unique_key_updates: int = 0
    deletes: int = 0
    statements: int = 0
    seconds: float = 0.0

    @property
    def row_changes(self) -> int:
        """Committed row changes (a key update counts once)."""
        return self.inserts + self.updates + self.key_updates + self.unique_key_updates + self.deletes


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
        self._key_index: dict[str, _KeyedRows] = {}
        self._model_loaded = False

    # ----------------------------------------------------------------- public API

    def load_model(self, conn: Any) -> None:
        """
        Read the current rows of every table into the model.

        :meth:`run` and :meth:`insert_rows` do this on their first call, so a workload can start on
        tables that already hold rows (keys continue after the largest existing ones).
        """
        self._model_loaded = True
        cursor = conn.cursor()
        for table in self.tables:
            names = [c.name for c in table.writable_columns]
            # datetimeoffset is read as text: pyodbc has no converter for it (ODBC type -155)
            select = [
                f"CAST([{c.name}] AS nvarchar(40))"
                if c.declaration.startswith("datetimeoffset")
                else f"[{c.name}]"
                for c in table.writable_columns
            ]
            offsets = {c.name for c in table.writable_columns if c.declaration.startswith("datetimeoffset")}
            cursor.execute(f"SELECT {', '.join(select)} FROM {table.quoted_name}")
            self.model[table.qualified_name] = {}
            self._key_index.pop(table.qualified_name, None)
            rows = self._rows(table)
            for record in cursor.fetchall():
                row = dict(zip(names, record, strict=True))
                for name in offsets:
                    row[name] = _parse_datetimeoffset(row[name])
                rows.put(tuple(row[k] for k in table.key), row)
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
        if not self._model_loaded:
            self.load_model(conn)
        stats = WorkloadStats()
        autocommit = conn.autocommit
        conn.autocommit = False
        cursor = conn.cursor()
        start = time.monotonic()
        attempted = 0
        try:
            while True:
                if transactions is not None and attempted >= transactions:
                    break
                if duration is not None and time.monotonic() - start >= duration:
                    break
                if rate:
                    due = start + attempted / rate
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                attempted += 1
                self._run_transaction(conn, cursor, stats)
                if on_commit is not None:
                    on_commit(stats)
        finally:
            cursor.close()
            conn.autocommit = autocommit
        stats.seconds = time.monotonic() - start
        return stats

    def insert_rows(self, conn: Any, table_name: str, count: int, *, batch: int = 100) -> int:
        """Insert ``count`` new rows into one table in multi-row INSERTs (committed); return the count."""
        table = self._table(table_name)
        if not self._model_loaded:
            self.load_model(conn)
        # SQL Server accepts at most 2100 parameters per request.
        batch = max(1, min(batch, 2000 // len(table.writable_columns)))
        autocommit = conn.autocommit
        conn.autocommit = False
        cursor = conn.cursor()
        try:
            done = 0
            while done < count:
                n = min(batch, count - done)
                rows = [self._new_row(table) for _ in range(n)]
                self._execute_insert(cursor, table, rows)
                conn.commit()
                model = self._rows(table)
                for row in rows:
                    model.put(tuple(row[k] for k in table.key), row)
                done += n
        finally:
            cursor.close()
            conn.autocommit = autocommit
        return count

    # ----------------------------------------------------------------- internals

    def _table(self, qualified_name: str) -> SampleTable:
        for table in self.tables:
            if table.qualified_name == qualified_name:
                return table
        raise KeyError(f"{qualified_name} is not one of the workload's tables")

    def _next(self, counter: str) -> int:
        value = self._counters.get(counter, 0) + 1
        self._counters[counter] = value
        return value

    def _bump_counters(self, table: SampleTable, row: Row) -> None:
        for name in table.key:
            if isinstance(row[name], int) and not isinstance(row[name], bool):
                counter = f"{table.qualified_name}.{name}"
                self._counters[counter] = max(self._counters.get(counter, 0), row[name])
        if table.unique:
            counter = f"{table.qualified_name}.{table.unique}"
            number = int("".join(ch for ch in str(row[table.unique]) if ch.isdigit()) or 0)
            self._counters[counter] = max(self._counters.get(counter, 0), number)

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

    def _param(self, table: SampleTable, name: str, value: Any) -> Any:
        for column in table.columns:
            if column.name == name and column.parameter is not None:
                return column.parameter(value)
        return value

    def _execute_insert(self, cursor: Any, table: SampleTable, rows: list[Row]) -> None:
        names = [c.name for c in table.writable_columns]
        placeholders = "(" + ", ".join("?" for _ in names) + ")"
        sql = f"INSERT INTO {table.quoted_name} ({', '.join(f'[{n}]' for n in names)}) VALUES " + ", ".join(
            placeholders for _ in rows
        )
        params = [self._param(table, n, row[n]) for row in rows for n in names]
        cursor.execute(sql, params)

    def _where_key(self, table: SampleTable, key: Key) -> tuple[str, list[Any]]:
        return " AND ".join(f"[{k}] = ?" for k in table.key), list(key)

    def _run_transaction(self, conn: Any, cursor: Any, stats: WorkloadStats) -> None:
        rng = self._rng
        mix = self.mix
        undo: list[tuple[str, Key, Row | None]] = []  # (table, key, previous row or None) to roll back
        local = WorkloadStats()
        for _ in range(rng.randint(1, mix.max_statements)):
            table = rng.choice(self.tables)
            rows = self._rows(table)
            kind = rng.choices(
                ["insert", "update", "key_update", "unique_key_update", "delete"],
                weights=[mix.insert, mix.update, mix.key_update, mix.unique_key_update, mix.delete],
            )[0]
            if kind != "insert" and not rows:
                kind = "insert"
            if kind == "unique_key_update" and not table.unique:
                kind = "update"
            self._apply(cursor, table, rows, kind, local, undo)
            local.statements += 1
        if rng.random() < mix.rollback_ratio:
            conn.rollback()
            for name, key, previous in reversed(undo):
                rows = self._key_index[name]
                if previous is None:
                    rows.discard(key)
                else:
                    rows.put(key, previous)
            stats.rolled_back += 1
            return
        conn.commit()
        stats.transactions += 1
        for field in ("inserts", "updates", "key_updates", "unique_key_updates", "deletes", "statements"):
            setattr(stats, field, getattr(stats, field) + getattr(local, field))

    def _rows(self, table: SampleTable) -> _KeyedRows:
        rows = self._key_index.get(table.qualified_name)
        if rows is None:
            rows = self._key_index[table.qualified_name] = _KeyedRows(self.model[table.qualified_name])
        return rows

    def _apply(
        self,
        cursor: Any,
        table: SampleTable,
        rows: _KeyedRows,
        kind: str,
        stats: WorkloadStats,
        undo: list[tuple[str, Key, Row | None]],
    ) -> None:
        rng = self._rng
        name = table.qualified_name
        if kind == "insert":
            new_rows: list[Row] = []
            seen: set[Key] = set()
            for _ in range(rng.randint(1, self.mix.max_rows)):
                row = self._new_row(table)
                key = tuple(row[k] for k in table.key)
                if key not in rows and key not in seen:
                    new_rows.append(row)
                    seen.add(key)
            if not new_rows:
                return
            self._execute_insert(cursor, table, new_rows)
            for row in new_rows:
                key = tuple(row[k] for k in table.key)
                rows.put(key, row)
                undo.append((name, key, None))
            stats.inserts += len(new_rows)
            return
        key = rows.choice(rng)
        where, key_params = self._where_key(table, key)
        if kind == "delete":
            cursor.execute(f"DELETE FROM {table.quoted_name} WHERE {where}", key_params)
            undo.append((name, key, rows.discard(key)))
            stats.deletes += 1
            return
        old = rows.get(key)
        if kind == "update":
            candidates = table.data_columns
            changed = rng.sample(candidates, rng.randint(1, min(3, len(candidates))))
            values = {c.name: c.generate(rng) for c in changed}  # type: ignore[misc]
            stats.updates += 1
        elif kind == "key_update":
            values = self._new_key(table)
            if tuple(values[k] for k in table.key) in rows:
                return
            stats.key_updates += 1
        else:
            values = {table.unique: self._new_unique(table)}  # type: ignore[dict-item]
            stats.unique_key_updates += 1
        assignments = ", ".join(f"[{column}] = ?" for column in values)
        params = [self._param(table, column, value) for column, value in values.items()]
        cursor.execute(f"UPDATE {table.quoted_name} SET {assignments} WHERE {where}", params + key_params)
        row = {**old, **values}
        new_key = tuple(row[k] for k in table.key)
        rows.discard(key)
        undo.append((name, key, old))
        rows.put(new_key, row)
        if new_key != key:
            undo.append((name, new_key, None))


class _KeyedRows:
    """The model rows of one table with O(1) random choice, insert and delete (wraps the model dict)."""

    def __init__(self, rows: dict[Key, Row]) -> None:
        self._rows = rows
        self._keys = list(rows)
        self._positions = {key: i for i, key in enumerate(self._keys)}

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def get(self, key: Key) -> Row:
        return self._rows[key]

    def choice(self, rng: random.Random) -> Key:
        return self._keys[rng.randrange(len(self._keys))]

    def put(self, key: Key, row: Row) -> None:
        if key not in self._rows:
            self._positions[key] = len(self._keys)
            self._keys.append(key)
        self._rows[key] = row

    def discard(self, key: Key) -> Row | None:
        row = self._rows.pop(key, None)
        if row is None:
            return None
        i = self._positions.pop(key)
        last = self._keys.pop()
        if i < len(self._keys):
            self._keys[i] = last
            self._positions[last] = i
        return row


# --------------------------------------------------------------------------- command line


def _connect(args: argparse.Namespace) -> Any:
    import pyodbc

    from airflow_provider_sqlserver_cdc.hooks.odbc_connection import odbc_connection_string

    connection_string = args.odbc or os.environ.get("SQLSERVER_CDC_ODBC")
    if not connection_string:
        if not args.server:
            raise SystemExit("give --odbc, --server or set SQLSERVER_CDC_ODBC to an ODBC connection string")
        host, _, port = args.server.partition(":")
        password = os.environ.get("SQLSERVER_CDC_PASSWORD", "")
        connection_string = odbc_connection_string(
            host=host, port=int(port or 1433), user=args.user, password=password
        )
    return pyodbc.connect(connection_string, autocommit=True)


def main(argv: Iterable[str] | None = None) -> int:
    """Entry point of ``python -m airflow_provider_sqlserver_cdc.testing.workload``."""
    parser = argparse.ArgumentParser(
        prog="python -m airflow_provider_sqlserver_cdc.testing.workload",
        description="Create the CDC sample database and apply a seeded random workload to it.",
    )
    parser.add_argument("--odbc", help="ODBC connection string (default: $SQLSERVER_CDC_ODBC)")
    parser.add_argument(
        "--server", help="host:port, with the FreeTDS driver (password from $SQLSERVER_CDC_PASSWORD)"
    )
    parser.add_argument("--user", default="sa")
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="(re)create the sample database with CDC enabled")
    create.add_argument("--database", default="cdc_sample")
    create.add_argument("--initial-rows", type=int, default=0, help="rows to insert into each table")
    create.add_argument("--role-name", default=None, help="@role_name gating the change data")
    create.add_argument("--seed", type=int, default=0)
    run = commands.add_parser("run", help="apply a seeded random workload")
    run.add_argument("--database", default="cdc_sample")
    run.add_argument("--transactions", type=int, default=None)
    run.add_argument("--duration", type=float, default=None, help="seconds to run")
    run.add_argument(
        "--rate", type=float, default=None, help="transactions per second (default: as fast as possible)"
    )
    run.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(list(argv) if argv is not None else None)

    conn = _connect(args)
    workload = Workload(seed=args.seed)
    if args.command == "create":
        SampleDatabase.create(conn, database=args.database, role_name=args.role_name)
        print(f"created database {args.database} with CDC enabled on {len(SAMPLE_TABLES)} tables", flush=True)
        for table in SAMPLE_TABLES if args.initial_rows else ():
            workload.insert_rows(conn, table.qualified_name, args.initial_rows)
        if args.initial_rows:
            print(f"inserted {args.initial_rows} rows into each table", flush=True)
    else:
        if args.transactions is None and args.duration is None:
            parser.error("run needs --transactions and/or --duration")
        conn.cursor().execute(f"USE [{args.database}]")
        workload.load_model(conn)
        stats = workload.run(conn, args.transactions, duration=args.duration, rate=args.rate)
        print(
            f"{stats.transactions} transactions committed ({stats.rolled_back} rolled back), "
            f"{stats.row_changes} row changes: {stats.inserts} inserts, {stats.updates} updates, "
            f"{stats.key_updates} key updates, {stats.unique_key_updates} unique-key updates, "
            f"{stats.deletes} deletes in {stats.seconds:.1f} s",
            flush=True,
        )
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
