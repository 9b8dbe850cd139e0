"""PostgreSQL statements of the relational target: the type mapping, the tables, and the apply transaction.

The apply is set-based, inside one transaction, against a staging table that holds the batch's
net effect (one row per key, loaded by Spark over several connections):

1. a snapshot first retires the target rows it lacks (older than the snapshot),
2. ``DELETE`` every target row (and, for hard deletes, every deleted-key row) whose position
   ``(_cdc_start_lsn, _cdc_seqval, _cdc_operation)`` is older than the staged change of its key,
3. ``INSERT`` the staged rows ``ON CONFLICT (key) DO NOTHING``: a row that survived step 2 holds a
   newer (or the same) position, so the change is not applied: replays change nothing.

Releasing before taking is what keeps unique keys other than the primary key consistent: every
value a changed row held is gone (step 2) before any changed row takes a value (step 3), so a
swap of two rows' values, or a value one row releases and another takes in the same batch, never
meets a unique index twice. A tombstone (soft delete) keeps only the key and the position, its
other columns are NULL, so it holds no unique value either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import (
    COMMIT_TIME,
    DELETED,
    POSITION_COLUMNS,
    TARGET_META_COLUMNS,
    retired_row_values,
)
from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError

#: The bookkeeping table, one per schema: the applied LSN ranges of each target table it holds.
APPLIED_RANGES_TABLE = "_cdc_applied_lsn_ranges"
#: Suffix of a table's deleted-key table (hard deletes): key -> position of the delete.
DELETED_KEYS_SUFFIX = "_cdc_deleted_keys"
STAGE_PREFIX = "_cdc_stage_"
#: PostgreSQL truncates identifiers to 63 bytes.
MAX_IDENTIFIER = 63

#: The change columns of a target table (``change_columns.TARGET_META_COLUMNS``): name, PostgreSQL type, nullable.
_META_TYPES = {
    "BINARY": "bytea",
    "INT": "integer",
    "TIMESTAMP": "timestamp with time zone",
    "BOOLEAN": "boolean",
}
META_COLUMNS = tuple((name, _META_TYPES[spark], nullable) for name, spark, nullable in TARGET_META_COLUMNS)

_FIXED = {
    "bit": "boolean",
    "tinyint": "smallint",
    "smallint": "smallint",
    "int": "integer",
    "bigint": "bigint",
    "money": "numeric(19,4)",
    "smallmoney": "numeric(10,4)",
    "real": "real",
    "date": "date",
    "datetime": "timestamp(6) without time zone",
    "smalldatetime": "timestamp(0) without time zone",
    "uniqueidentifier": "uuid",
    "sysname": "character varying(128)",
    **dict.fromkeys(("text", "ntext", "xml", "sql_variant", "hierarchyid", "geography", "geometry"), "text"),
    **dict.fromkeys(("binary", "varbinary", "image", "rowversion", "timestamp"), "bytea"),
}
_STRINGS = {"char": 1, "varchar": 1, "nchar": 2, "nvarchar": 2}  # bytes per character in max_length


def quote(identifier: str) -> str:
    """Quote one identifier for PostgreSQL (double quotes, case kept)."""
    return '"' + identifier.replace('"', '""') + '"'


def split_table(table: str) -> tuple[str, str]:
    """Split a ``schema.table`` target name; a bare name is in ``public``."""
    schema, dot, name = table.partition(".")
    if not dot:
        return "public", table
    if "." in name:
        raise SchemaEvolutionError(
            f"target table {table}: a relational target is named schema.table (the database is the JDBC URL's)"
        )
    return schema, name


def quote_table(table: str) -> str:
    """Quote a ``schema.table`` name."""
    return ".".join(quote(part) for part in split_table(table))


def sibling_table(table: str, prefix: str = "", suffix: str = "") -> str:
    """Return a quoted table next to ``table`` (same schema), its name within PostgreSQL's 63 bytes."""
    schema, name = split_table(table)
    room = MAX_IDENTIFIER - len(prefix.encode()) - len(suffix.encode())
    while len(name.encode()) > room:
        name = name[:-1]
    return f"{quote(schema)}.{quote(prefix + name + suffix)}"


def fraction_digits(column: Mapping[str, Any]) -> int:
    """The fraction digits PostgreSQL keeps of a time / datetime2 / datetimeoffset column: at most 6."""
    scale = column.get("scale")
    return min(scale if isinstance(scale, int) and scale >= 0 else 7, 6)


def postgres_type(column: Mapping[str, Any], spark_type: str) -> str:
    """Return the PostgreSQL type of a captured column.

    Exact where PostgreSQL can be: decimal(p,s) stays numeric(p,s) (p up to 38), text keeps its
    declared length in characters, uniqueidentifier becomes uuid, binary types bytea. Time types
    keep microseconds: time(7), datetime2(7) and datetimeoffset(7) lose the seventh digit
    (floored, as the Iceberg target does), and datetimeoffset keeps the instant, not the offset.

    :param column: the manifest's column entry.
    :param spark_type: the column's Spark type in the job's plan (a widened integer or decimal wins).
    """
    sql_type = str(column["sql_type"]).lower()
    spark_type = spark_type.upper().replace(" ", "")
    if spark_type == "BIGINT" and sql_type in ("tinyint", "smallint", "int"):
        return "bigint"
    if spark_type.startswith("DECIMAL("):
        return "numeric" + spark_type[len("DECIMAL") :]
    if sql_type in _FIXED:
        return _FIXED[sql_type]
    if sql_type == "float":
        return "real" if spark_type == "FLOAT" else "double precision"
    if sql_type in _STRINGS:
        length = column.get("max_length")
        if not isinstance(length, int) or length <= 0:
            return "text"
        return f"character varying({max(length // _STRINGS[sql_type], 1)})"
    if sql_type == "time":
        return f"time({fraction_digits(column)}) without time zone"
    if sql_type == "datetime2":
        return f"timestamp({fraction_digits(column)}) without time zone"
    if sql_type == "datetimeoffset":
        return f"timestamp({fraction_digits(column)}) with time zone"
    return {"INT": "integer", "STRING": "text", "BINARY": "bytea", "BOOLEAN": "boolean"}.get(
        spark_type, "text"
    )


def stage_type(spark_type: str) -> str:
    """Return the staging column type for a Spark type: what Spark's JDBC writer binds exactly.

    Dates and timestamps travel as text (Spark's proleptic-Gregorian ISO form, exact to the
    microsecond, no JVM time zone involved) and are cast in the apply statement.
    """
    spark_type = spark_type.upper().replace(" ", "")
    if spark_type.startswith("DECIMAL("):
        return "numeric" + spark_type[len("DECIMAL") :]
    return {
        "BOOLEAN": "boolean",
        "INT": "integer",
        "BIGINT": "bigint",
        "FLOAT": "real",
        "DOUBLE": "double precision",
        "BINARY": "bytea",
    }.get(spark_type, "text")


def spark_type_of(data_type: str, precision: int | None, scale: int | None) -> str:
    """Return the Spark type (as the job's schema plan compares them) of a PostgreSQL column.

    :param data_type: ``information_schema.columns.data_type``.
    """
    if data_type == "numeric" and precision is not None:
        return f"DECIMAL({precision},{scale or 0})"
    return {
        "boolean": "BOOLEAN",
        "smallint": "INT",
        "integer": "INT",
        "bigint": "BIGINT",
        "real": "FLOAT",
        "double precision": "DOUBLE",
        "bytea": "BINARY",
        "date": "DATE",
        "timestamp without time zone": "TIMESTAMP_NTZ",
    }.get(data_type, "STRING")


def value_expression(column: Mapping[str, Any], pg_type: str, source: str) -> str:
    """Return the expression that turns a staged value into the target column's type.

    :param source: the staged column, qualified.
    """
    sql_type = str(column["sql_type"]).lower()
    if sql_type in ("time", "datetimeoffset"):
        # Floor the 7th fraction digit away (PostgreSQL would round it).
        return f"regexp_replace({source}, '(\\.[0-9]{{6}})[0-9]+', '\\1')::{pg_type}"
    if pg_type in ("uuid", "date") or pg_type.startswith(("timestamp", "character varying")):
        return f"{source}::{pg_type}"
    return source


def lsn_literal(lsn_hex: str) -> str:
    """Return a bytea literal of an LSN in the ``0x`` + 20 hex digits form."""
    digits = lsn_hex[2:] if lsn_hex[:2].lower() == "0x" else lsn_hex
    if not digits or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise ValueError(f"not an LSN: {lsn_hex!r}")
    return f"'\\x{digits}'::bytea"


def _position(qualifier: str) -> str:
    return "(" + ", ".join(f"{qualifier}.{c}" for c in POSITION_COLUMNS) + ")"


def _keys_equal(key_columns: Sequence[str], target: str, staged: Mapping[str, str]) -> str:
    return " AND ".join(f"{target}.{quote(k)} = {staged[k]}" for k in key_columns)


class ApplyStatements:
    """The statements of one batch's apply transaction, in order.

    :param table: the target ``schema.table``.
    :param stage: the quoted staging table.
    :param columns: captured column name -> (manifest column entry, PostgreSQL type), in table order.
    :param key_columns: the primary key.
    :param hard: remove deleted rows (their key and position go to the deleted-key table).
    """

    def __init__(
        self,
        table: str,
        stage: str,
        columns: Mapping[str, tuple[Mapping[str, Any], str]],
        key_columns: Sequence[str],
        hard: bool,
    ) -> None:
        self.target = quote_table(table)
        self.deleted_keys = sibling_table(table, suffix=DELETED_KEYS_SUFFIX)
        self.stage = stage
        self.columns = columns
        self.key_columns = tuple(key_columns)
        self.hard = hard
        self.staged = {
            name: value_expression(column, pg_type, f"s.{quote(name)}")
            for name, (column, pg_type) in columns.items()
        }

    def retire_absent(self, snapshot_lsn: str) -> str:
        """Return the statement that retires target rows a snapshot lacks (older than the snapshot)."""
        lsn = lsn_literal(snapshot_lsn)
        older = f"{_position('t')} < ({lsn}, {lsn}, 2)"
        absent = f"NOT EXISTS (SELECT 1 FROM {self.stage} s WHERE {_keys_equal(self.key_columns, 't', self.staged)})"
        if self.hard:
            keys = ", ".join(quote(k) for k in self.key_columns)
            return (
                f"WITH gone AS (DELETE FROM {self.target} t WHERE {older} AND {absent} "
                f"RETURNING {', '.join('t.' + quote(k) for k in self.key_columns)}) "
                f"INSERT INTO {self.deleted_keys} ({keys}, {', '.join(POSITION_COLUMNS)}) "
                f"SELECT {keys}, {lsn}, {lsn}, 1 FROM gone ON CONFLICT ({keys}) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in POSITION_COLUMNS)
                + f" WHERE {_position(self.deleted_keys)} < {_position('excluded')}"
            )
        cleared = [f"{quote(c)} = NULL" for c in self.columns if c not in self.key_columns]
        retired = [f"{column} = {value}" for column, value in retired_row_values(lsn).items()]
        return (
            f"UPDATE {self.target} t SET {', '.join([*cleared, *retired])} "
            f"WHERE NOT t.{DELETED} AND {older} AND {absent}"
        )

    def remove_older(self) -> list[str]:
        """Return the statements that delete every row a newer staged change replaces."""
        statements = [
            f"DELETE FROM {self.target} t USING {self.stage} s WHERE "
            f"{_keys_equal(self.key_columns, 't', self.staged)} AND {_position('t')} < {_position('s')}"
        ]
        if self.hard:
            statements.append(
                f"DELETE FROM {self.deleted_keys} t USING {self.stage} s WHERE "
                f"{_keys_equal(self.key_columns, 't', self.staged)} AND {_position('t')} < {_position('s')}"
            )
        return statements

    def insert_newer(self) -> list[str]:
        """Return the statements that insert the staged rows no newer row holds back."""
        keys = ", ".join(quote(k) for k in self.key_columns)
        names = [*self.columns, *(c for c, _, _ in META_COLUMNS)]
        values = [
            self.staged[name]
            if name in self.key_columns
            else f"CASE WHEN s.{DELETED} THEN NULL ELSE {self.staged[name]} END"
            for name in self.columns
        ]
        values += [f"s.{c}" for c in POSITION_COLUMNS]
        values += [f"(s.{COMMIT_TIME} || '+00')::timestamp with time zone", f"s.{DELETED}"]
        insert = (
            f"INSERT INTO {self.target} ({', '.join(quote(n) for n in names)}) "
            f"SELECT {', '.join(values)} FROM {self.stage} s"
        )
        if not self.hard:
            return [f"{insert} ON CONFLICT ({keys}) DO NOTHING"]
        not_in = "NOT EXISTS (SELECT 1 FROM {table} t WHERE {match})"
        match = _keys_equal(self.key_columns, "t", self.staged)
        key_values = ", ".join(self.staged[k] for k in self.key_columns)
        return [
            f"{insert} WHERE NOT s.{DELETED} AND {not_in.format(table=self.deleted_keys, match=match)} "
            f"ON CONFLICT ({keys}) DO NOTHING",
            f"INSERT INTO {self.deleted_keys} ({keys}, {', '.join(POSITION_COLUMNS)}) "
            f"SELECT {key_values}, {', '.join('s.' + c for c in POSITION_COLUMNS)} FROM {self.stage} s "
            f"WHERE s.{DELETED} AND {not_in.format(table=self.target, match=match)} ON CONFLICT ({keys}) DO NOTHING",
        ]


def create_table_sql(table: str, columns: Mapping[str, str], key_columns: Sequence[str]) -> str:
    """Return the CREATE TABLE of a target: captured columns, change columns, primary key.

    :param columns: column name -> PostgreSQL type, in order.
    """
    definitions = [
        f"{quote(name)} {pg_type}{' NOT NULL' if name in key_columns else ''}"
        for name, pg_type in columns.items()
    ]
    definitions += [
        f"{name} {pg_type}{'' if nullable else ' NOT NULL'}" for name, pg_type, nullable in META_COLUMNS
    ]
    definitions.append(f"PRIMARY KEY ({', '.join(quote(k) for k in key_columns)})")
    return f"CREATE TABLE IF NOT EXISTS {quote_table(table)} ({', '.join(definitions)})"


def create_deleted_keys_sql(table: str, key_types: Mapping[str, str]) -> str:
    """Return the CREATE TABLE of a target's deleted-key table (hard deletes): key -> position of the delete."""
    keys = [f"{quote(k)} {t} NOT NULL" for k, t in key_types.items()]
    positions = [f"{name} {pg_type} NOT NULL" for name, pg_type, _ in META_COLUMNS[:3]]
    return (
        f"CREATE TABLE IF NOT EXISTS {sibling_table(table, suffix=DELETED_KEYS_SUFFIX)} "
        f"({', '.join([*keys, *positions])}, PRIMARY KEY ({', '.join(quote(k) for k in key_types)}))"
    )


def create_stage_sql(stage: str, columns: Mapping[str, str]) -> str:
    """Return the CREATE UNLOGGED TABLE of a staging table (not crash-safe, not replicated: it lives one batch).

    :param columns: column name -> staging type, in the order Spark writes them.
    """
    return f"CREATE UNLOGGED TABLE {stage} ({', '.join(f'{quote(n)} {t}' for n, t in columns.items())})"


def applied_ranges_table(schema: str) -> str:
    """Return the quoted bookkeeping table of a schema."""
    return f"{quote(schema)}.{quote(APPLIED_RANGES_TABLE)}"


def create_applied_ranges_sql(schema: str) -> str:
    """Return the CREATE TABLE of the bookkeeping table (one row per target table and capture instance)."""
    return (
        f"CREATE TABLE IF NOT EXISTS {applied_ranges_table(schema)} (target_table text NOT NULL, "
        "capture_instance text NOT NULL, applied_lsn_ranges text NOT NULL, max_applied_lsn text NOT NULL, "
        "updated_at timestamp with time zone NOT NULL DEFAULT now(), PRIMARY KEY (target_table, capture_instance))"
    )


def upsert_applied_ranges_sql(schema: str) -> str:
    """Return the parameterised upsert of one row of the bookkeeping table (table, instance, ranges, max LSN)."""
    return (
        f"INSERT INTO {applied_ranges_table(schema)} AS r (target_table, capture_instance, applied_lsn_ranges, "
        "max_applied_lsn) VALUES (?, ?, ?, ?) ON CONFLICT (target_table, capture_instance) DO UPDATE SET "
        "applied_lsn_ranges = excluded.applied_lsn_ranges, max_applied_lsn = excluded.max_applied_lsn, "
        "updated_at = now()"
    )


def last_apply_transaction_sql(schema: str) -> str:
    """Return the query of the transaction id (``xmin``) that last wrote a target table's bookkeeping rows.

    The apply transaction upserts them with the table's data: its id is the asset events' marker
    (``assets.py``); the rows it wrote in the table have the same ``xmin``. One parameter: the table.
    """
    return (
        f"SELECT xmin::text FROM {applied_ranges_table(schema)} WHERE target_table = ? "
        "ORDER BY updated_at DESC LIMIT 1"
    )
