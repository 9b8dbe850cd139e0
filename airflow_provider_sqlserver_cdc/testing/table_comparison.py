"""Compare a source table in SQL Server with its Iceberg target: the proof that a replica is exact.

The demo (``make demo``) and the end-to-end tests both use :func:`compare_table`. The source is
read independently of the extraction path (a plain ``SELECT`` of the captured columns through
pyodbc, with output converters that keep every fraction digit of ``time`` and
``datetimeoffset``); the target's live rows (``NOT _cdc_deleted``) are read with Spark. Both sides
are brought to the representation the target documents (docs/type-mapping.md and the merge job's
``spark_type``) and compared row by row, column by column; the target's column types are checked
against the documented mapping too.

Precision compared: everything exactly, except ``datetime2(7)``, which Iceberg stores in
microseconds (the merge job documents the loss of the seventh digit): both sides are compared at
microseconds there.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import DELETED, TARGET_META_COLUMNS
from airflow_provider_sqlserver_cdc.spark.merge.spark_types import spark_type
from airflow_provider_sqlserver_cdc.tsql import quote_name

# ODBC type codes pyodbc reports for SQL Server's time(n) and datetimeoffset(n) and GUIDs.
SQL_SS_TIME2 = -154
SQL_SS_TIMESTAMPOFFSET = -155
SQL_GUID = -11

Key = tuple[Any, ...]


# --------------------------------------------------------------------------- exact source values


@dataclass(frozen=True, order=True)
class TimeOfDay:
    """A ``time(n)`` value with its fraction in nanoseconds (pyodbc's time keeps microseconds only)."""

    hour: int
    minute: int
    second: int
    nanosecond: int

    @classmethod
    def parse(cls, text: str) -> TimeOfDay:
        """Parse ``HH:MM:SS[.fffffff]``."""
        clock, _, fraction = text.strip().partition(".")
        hour, minute, second = (int(part) for part in clock.split(":"))
        return cls(hour, minute, second, int((fraction or "0").ljust(9, "0")[:9]))

    def __str__(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d}:{self.second:02d}.{self.nanosecond:09d}"


@dataclass(frozen=True, order=True)
class OffsetDateTime:
    """A ``datetimeoffset(n)`` value: local date-time with nanoseconds, and the offset in minutes."""

    local: dt.datetime  # naive, microseconds
    nanosecond: int  # the full fraction of the second in nanoseconds
    offset_minutes: int

    @classmethod
    def parse(cls, text: str) -> OffsetDateTime:
        """Parse ``YYYY-MM-DD[T ]HH:MM:SS[.f…]±HH:MM`` (the target's ISO form and SQL Server's text form)."""
        text = text.strip().replace("T", " ", 1)
        sign_at = max(text.rfind("+"), text.rfind("-"))
        stamp, offset = text[:sign_at].strip(), text[sign_at:]
        sign = -1 if offset[0] == "-" else 1
        hours, _, minutes = offset[1:].partition(":")
        date_part, _, time_part = stamp.partition(" ")
        clock = TimeOfDay.parse(time_part)
        local = dt.datetime.fromisoformat(date_part).replace(
            hour=clock.hour, minute=clock.minute, second=clock.second, microsecond=clock.nanosecond // 1000
        )
        return cls(local, clock.nanosecond, sign * (int(hours) * 60 + int(minutes or 0)))

    def __str__(self) -> str:
        sign = "-" if self.offset_minutes < 0 else "+"
        hours, minutes = divmod(abs(self.offset_minutes), 60)
        return f"{self.local:%Y-%m-%d %H:%M:%S}.{self.nanosecond:09d} {sign}{hours:02d}:{minutes:02d}"


def _decode_time2(raw: bytes) -> TimeOfDay:
    # SQL_SS_TIME2_STRUCT: hour, minute, second (SQLUSMALLINT), 2 bytes padding, fraction (ns, SQLUINTEGER).
    hour, minute, second, fraction = struct.unpack("<3H2xI", raw)
    return TimeOfDay(hour, minute, second, fraction)


def _decode_timestampoffset(raw: bytes) -> OffsetDateTime:
    # SQL_SS_TIMESTAMPOFFSET_STRUCT: year..second (SQLSMALLINT/USMALLINT), fraction (ns), tz hour, tz minute.
    year, month, day, hour, minute, second, fraction, tz_hour, tz_minute = struct.unpack("<6hI2h", raw)
    local = dt.datetime(year, month, day, hour, minute, second, fraction // 1000)
    return OffsetDateTime(local, fraction, tz_hour * 60 + tz_minute)


def _decode_guid(raw: bytes) -> str:
    return str(uuid.UUID(bytes_le=raw)).upper()


def add_exact_converters(conn: Any) -> None:
    """Register pyodbc output converters that keep every digit of time, datetimeoffset and GUIDs."""
    conn.add_output_converter(SQL_SS_TIME2, _decode_time2)
    conn.add_output_converter(SQL_SS_TIMESTAMPOFFSET, _decode_timestampoffset)
    conn.add_output_converter(SQL_GUID, _decode_guid)


# --------------------------------------------------------------------------- normalisation


def _float32(value: float) -> float:
    """The value rounded to single precision (``real``, ``float(1..24)``), as Python's float."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _source_time(value: Any) -> TimeOfDay:
    return value if isinstance(value, TimeOfDay) else TimeOfDay.parse(str(value))


def _source_datetimeoffset(value: Any) -> OffsetDateTime:
    if isinstance(value, OffsetDateTime):
        return value
    if isinstance(value, dt.datetime):
        offset = value.utcoffset() or dt.timedelta(0)
        return OffsetDateTime(
            value.replace(tzinfo=None), value.microsecond * 1000, int(offset.total_seconds() // 60)
        )
    return OffsetDateTime.parse(str(value))


# How both sides bring a value of a SQL type to the documented representation; a type that is not
# listed keeps its value (datetime, smalldatetime and datetime2: pyodbc and Spark both give naive
# datetimes in microseconds, the target's precision; strings; dates).
_BOTH_SIDES: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(("binary", "varbinary", "image", "rowversion", "timestamp"), bytes),
    **dict.fromkeys(("decimal", "numeric", "money", "smallmoney"), decimal.Decimal),
    "real": _float32,
}
_SOURCE_VALUES: dict[str, Callable[[Any], Any]] = {
    **_BOTH_SIDES,
    **dict.fromkeys(("tinyint", "smallint", "int", "bigint"), int),
    "bit": bool,
    "float": float,
    "uniqueidentifier": lambda value: str(value).upper(),
    "time": _source_time,
    "datetimeoffset": _source_datetimeoffset,
}
_TARGET_VALUES: dict[str, Callable[[Any], Any]] = {
    **_BOTH_SIDES,
    "time": TimeOfDay.parse,
    "datetimeoffset": OffsetDateTime.parse,
}


def _normalise(column: CapturedColumn, value: Any, conversions: dict[str, Callable[[Any], Any]]) -> Any:
    if value is None:
        return None
    sql_type = column.sql_type.lower()
    if sql_type == "float" and column.precision <= 24:
        sql_type = "real"
    convert = conversions.get(sql_type)
    return value if convert is None else convert(value)


def source_value(column: CapturedColumn, value: Any) -> Any:
    """
    Bring a value read from SQL Server to the representation the target documents for its type.

    :param column: the captured column.
    :param value: the value pyodbc returned (with :func:`add_exact_converters`).
    """
    return _normalise(column, value, _SOURCE_VALUES)


def target_value(column: CapturedColumn, value: Any) -> Any:
    """
    Bring a value read from the Iceberg target (Spark) to the same representation as :func:`source_value`.

    :param column: the captured column.
    :param value: the value Spark returned.
    """
    return _normalise(column, value, _TARGET_VALUES)


def _python_type_ok(column: CapturedColumn, value: Any) -> bool:
    """Whether a target value has the Python type Spark returns for the documented target type."""
    if value is None:
        return True
    expected = {
        "BOOLEAN": bool,
        "INT": int,
        "BIGINT": int,
        "FLOAT": float,
        "DOUBLE": float,
        "STRING": str,
        "BINARY": (bytes, bytearray),
        "DATE": dt.date,
        "TIMESTAMP_NTZ": dt.datetime,
    }
    target_type = expected_target_type(column)
    if target_type.startswith("DECIMAL"):
        return isinstance(value, decimal.Decimal)
    wanted = expected.get(target_type)
    if wanted is None:
        return True
    if wanted is int and isinstance(value, bool):
        return False
    return isinstance(value, wanted)


def expected_target_type(column: CapturedColumn) -> str:
    """The Spark SQL type the merge job documents for a captured column (e.g. ``DECIMAL(18,2)``).

    The job types a column by its manifest entry, whose type fields are the column's own.
    """
    return spark_type(asdict(column), column.name)


def _spark_type_name(data_type: Any) -> str:
    """Spark's DataType as the merge job spells SQL types (``INT``, ``DECIMAL(18,2)``, ``TIMESTAMP_NTZ``)."""
    return data_type.simpleString().upper().replace("INTEGER", "INT")


# --------------------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class ValueDifference:
    """One column of one row that differs between source and target."""

    key: Key
    column: str
    source: Any
    target: Any


@dataclass
class TableComparison:
    """
    The outcome of comparing one source table with its target.

    :param capture_instance: the capture instance.
    :param source_table: ``schema.table`` in SQL Server.
    :param target_table: the Iceberg table.
    :param source_rows: rows in the source table.
    :param target_rows: live rows in the target (not flagged deleted).
    :param deleted_rows: rows the target keeps flagged as deleted (soft deletes).
    :param missing_in_target: keys in the source without a live target row.
    :param unexpected_in_target: live target keys that are not in the source.
    :param value_differences: columns whose values differ, per key.
    :param schema_differences: columns missing, extra or of another type than documented.
    :param kept_columns: target columns the source dropped: kept, with the values they had at the DROP,
        and not compared (the source has nothing to compare them with); the verdict names them.
    """

    capture_instance: str
    source_table: str
    target_table: str
    source_rows: int = 0
    target_rows: int = 0
    deleted_rows: int = 0
    missing_in_target: list[Key] = field(default_factory=list)
    unexpected_in_target: list[Key] = field(default_factory=list)
    value_differences: list[ValueDifference] = field(default_factory=list)
    schema_differences: list[str] = field(default_factory=list)
    kept_columns: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        """Whether the target's live rows equal the source exactly (values and types)."""
        return not (
            self.missing_in_target
            or self.unexpected_in_target
            or self.value_differences
            or self.schema_differences
        )

    def describe(self, limit: int = 5) -> str:
        """A short human-readable verdict: ``MATCH`` or the first ``limit`` differences of each kind."""
        head = (
            f"{self.source_table} -> {self.target_table}: source {self.source_rows} rows, "
            f"target {self.target_rows} live rows ({self.deleted_rows} flagged deleted)"
        )
        if self.kept_columns:
            head += (
                f"; not compared: {', '.join(self.kept_columns)} (dropped on the source, kept in the target)"
            )
        if self.matches:
            return f"{head}: MATCH"
        lines = [f"{head}: DIFFERENT"]
        for text in self.schema_differences[:limit]:
            lines.append(f"  schema: {text}")
        if self.missing_in_target:
            lines.append(
                f"  {len(self.missing_in_target)} key(s) missing in target, e.g. {self.missing_in_target[:limit]}"
            )
        if self.unexpected_in_target:
            lines.append(
                f"  {len(self.unexpected_in_target)} key(s) in target but not in source, "
                f"e.g. {self.unexpected_in_target[:limit]}"
            )
        if self.value_differences:
            lines.append(f"  {len(self.value_differences)} differing value(s):")
            for diff in self.value_differences[:limit]:
                lines.append(
                    f"    key {diff.key} column {diff.column}: source {diff.source!s:.80} != target {diff.target!s:.80}"
                )
        return "\n".join(lines)


def read_source_rows(conn: Any, instance: CaptureInstance) -> dict[Key, dict[str, Any]]:
    """
    Read every row of the capture instance's source table (captured columns only), keyed by key columns.

    :param conn: a pyodbc connection to the source database (converters are added to it).
    :param instance: the capture instance with its columns and key columns loaded.
    """
    add_exact_converters(conn)
    names = [c.name for c in instance.columns]
    select = ", ".join(quote_name(n) for n in names)
    table = f"{quote_name(instance.source_schema)}.{quote_name(instance.source_table)}"
    cursor = conn.cursor()
    try:
        cursor.execute(f"SELECT {select} FROM {table}")
        rows: dict[Key, dict[str, Any]] = {}
        while True:
            batch = cursor.fetchmany(5000)
            if not batch:
                break
            for record in batch:
                row = {c.name: source_value(c, v) for c, v in zip(instance.columns, record, strict=True)}
                rows[tuple(row[k] for k in instance.key_columns)] = row
    finally:
        cursor.close()
    return rows


def compare_rows(
    instance: CaptureInstance,
    source: dict[Key, dict[str, Any]],
    target: dict[Key, dict[str, Any]],
    result: TableComparison,
) -> TableComparison:
    """Compare normalised source and target rows of one table into ``result``."""
    result.source_rows = len(source)
    result.target_rows = len(target)
    result.missing_in_target = sorted((k for k in source if k not in target), key=repr)
    result.unexpected_in_target = sorted((k for k in target if k not in source), key=repr)
    for key in sorted(source.keys() & target.keys(), key=repr):
        left, right = source[key], target[key]
        for column in instance.columns:
            if left.get(column.name) != right.get(column.name):
                result.value_differences.append(
                    ValueDifference(key, column.name, left.get(column.name), right.get(column.name))
                )
    return result


def read_target_rows(
    spark: Any,
    table: str,
    instance: CaptureInstance,
    result: TableComparison,
    dropped_on_source: Collection[str] = (),
) -> dict[Key, dict[str, Any]]:
    """
    Read the target's live rows (``NOT _cdc_deleted``) with Spark; record schema differences in ``result``.

    :param spark: a SparkSession whose catalog holds ``table``.
    :param table: the dotted Iceberg table name.
    :param instance: the capture instance (its columns say what the target should hold).
    :param result: where schema differences and the count of soft-deleted rows go.
    :param dropped_on_source: lower-cased target columns the source table no longer has: the target
        keeps a dropped column (its values stop changing, docs/schema-changes.md), so it is no difference.
    """
    frame = spark.table(table)
    types = {f.name.lower(): _spark_type_name(f.dataType) for f in frame.schema.fields}
    meta = {name.lower() for name, _, _ in TARGET_META_COLUMNS}
    expected = {c.name.lower(): expected_target_type(c) for c in instance.columns}
    for name, wanted in expected.items():
        if name not in types:
            result.schema_differences.append(f"column {name} is missing in the target")
        elif types[name] != wanted.replace(" ", ""):
            result.schema_differences.append(
                f"column {name} is {types[name]} in the target, documented {wanted}"
            )
    for name in types.keys() - expected.keys() - meta - set(dropped_on_source):
        result.schema_differences.append(f"column {name} is in the target but not captured")
    if result.schema_differences:
        return {}
    result.deleted_rows = frame.where(f"`{DELETED}`").count()
    columns = [c.name for c in instance.columns]
    rows: dict[Key, dict[str, Any]] = {}
    for record in frame.where(f"NOT `{DELETED}`").select(*[f"`{n}`" for n in columns]).toLocalIterator():
        raw = record.asDict()
        for column in instance.columns:
            if not _python_type_ok(column, raw[column.name]):
                result.schema_differences.append(
                    f"column {column.name}: target value {raw[column.name]!r} is a "
                    f"{type(raw[column.name]).__name__}, not {expected_target_type(column)}"
                )
                return {}
        row = {c.name: target_value(c, raw[c.name]) for c in instance.columns}
        key = tuple(row[k] for k in instance.key_columns)
        if key in rows:
            result.schema_differences.append(f"key {key} appears twice among the target's live rows")
        rows[key] = row
    return rows


def source_schema_differences(
    instance: CaptureInstance, source_columns: Sequence[CapturedColumn]
) -> list[str]:
    """
    Return how the source table's columns now differ from what its capture instance captures.

    A column the source has and the instance does not capture is not replicated at all; a captured
    column the source dropped, or whose type changed, no longer follows the source. Either way the
    target cannot equal the source (docs/schema-changes.md).

    :param instance: the capture instance with its columns loaded.
    :param source_columns: the source table's columns now (``SqlServerCdcHook.get_source_columns``).
    """
    captured = {c.name.lower(): c for c in instance.columns}
    source = {c.name.lower(): c for c in source_columns}
    differences = [
        f"column {c.name} is in the source table but not captured by {instance.name}: not replicated"
        for c in source_columns
        if c.name.lower() not in captured
    ]
    for name, column in captured.items():
        if name not in source:
            differences.append(f"captured column {column.name} no longer exists in the source table")
        elif source[name].describe() != column.describe():
            differences.append(
                f"column {column.name} is {source[name].describe()} in the source, captured as {column.describe()}"
            )
    return differences


def compare_each_source(
    hook: Any,
    names: Iterable[str],
    describe: Callable[[str], CaptureInstance],
    compare: Callable[[Any, CaptureInstance], TableComparison],
) -> list[TableComparison]:
    """
    ``compare(conn, instance)`` for each name, in order, each source read on a new connection of its own.

    :param hook: the source's hook (its ``new_connection``).
    :param describe: the name's :class:`CaptureInstance` (a capture instance, or a tracked table).
    """
    comparisons = []
    for name in names:
        instance = describe(name)
        conn = hook.new_connection()
        try:
            comparisons.append(compare(conn, instance))
        finally:
            conn.close()
    return comparisons


def compare_table(
    spark: Any,
    conn: Any,
    instance: CaptureInstance,
    target_table: str,
    source_columns: Sequence[CapturedColumn] | None = None,
) -> TableComparison:
    """
    Compare the source table of ``instance`` with its Iceberg target.

    :param spark: a SparkSession configured with the target's catalog.
    :param conn: a pyodbc connection to the source database.
    :param instance: the capture instance with columns and key columns loaded (``SqlServerCdcHook.get_capture_instance``).
    :param target_table: the dotted Iceberg table name, e.g. ``lake.cdc.dbo_orders``.
    :param source_columns: the source table's columns now; given, a column the instance does not
        follow (added, dropped, retyped on the source) is a difference.
    """
    result = TableComparison(instance.name, instance.source, target_table)
    if source_columns is not None:
        differences = source_schema_differences(instance, source_columns)
        if differences:
            # The instance no longer follows its table: no value comparison can make this a match.
            result.schema_differences.extend(differences)
            return result
    if not spark.catalog.tableExists(target_table):
        result.schema_differences.append(f"target table {target_table} does not exist")
        result.source_rows = len(read_source_rows(conn, instance))
        result.missing_in_target = []
        return result
    dropped: set[str] = set()
    if source_columns is not None and spark.catalog.tableExists(target_table):
        present = {c.name.lower() for c in source_columns}
        dropped = {f.name.lower() for f in spark.table(target_table).schema.fields} - present
        result.kept_columns = sorted(dropped - {name.lower() for name, _, _ in TARGET_META_COLUMNS})
    target = read_target_rows(spark, target_table, instance, result, dropped)
    source = read_source_rows(conn, instance)
    if result.schema_differences:
        result.source_rows = len(source)
        return result
    return compare_rows(instance, source, target, result)


def target_table_name(instance: CaptureInstance, namespace: str, template: str = "{schema}_{table}") -> str:
    """The target table the merge job writes for ``instance`` (its ``--namespace``/``--table-name-template``)."""
    name = template.format(
        capture_instance=instance.name,
        schema=instance.source_schema,
        table=instance.source_table,
        database="",
    )
    return f"{namespace}.{name}"


def all_match(comparisons: Iterable[TableComparison]) -> bool:
    """Whether every comparison matched."""
    return all(c.matches for c in comparisons)


def describe_all(comparisons: Sequence[TableComparison], limit: int = 5) -> str:
    """The verdict of every table, one block per table."""
    return "\n".join(c.describe(limit) for c in comparisons)
