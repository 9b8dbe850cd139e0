"""
SQL Server type -> Arrow type, and the conversion of driver values into Arrow arrays.

The mapping (docs/type-mapping.md) keeps every value exact and readable by Spark 3.5.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.errors import UnsupportedTypeError

_INT_TYPES = {"tinyint": pa.int16(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64()}
_STRING_TYPES = {"char", "varchar", "nchar", "nvarchar", "text", "ntext", "sysname"}
_BINARY_TYPES = {"binary", "varbinary", "image", "timestamp", "rowversion"}
_TS_NS_MIN = "1677-09-21 00:12:43.145224192"
_TS_NS_MAX = "2262-04-11 23:47:16.854775807"


def _type(column: CapturedColumn) -> str:
    return column.sql_type.lower()


def arrow_type(column: CapturedColumn) -> pa.DataType:
    """
    Return the Arrow type a SQL Server column is written as.

    :param column: the captured column with its full type.
    """
    t = _type(column)
    if t == "bit":
        return pa.bool_()
    if t in _INT_TYPES:
        return _INT_TYPES[t]
    if t in ("decimal", "numeric"):
        return pa.decimal128(column.precision, column.scale)
    if t == "money":
        return pa.decimal128(19, 4)
    if t == "smallmoney":
        return pa.decimal128(10, 4)
    if t == "real":
        return pa.float32()
    if t == "float":
        return pa.float32() if 0 < column.precision <= 24 else pa.float64()
    if t in _STRING_TYPES or t in ("xml", "uniqueidentifier", "time", "datetimeoffset"):
        return pa.string()
    if t in _BINARY_TYPES:
        return pa.binary()
    if t == "date":
        return pa.date32()
    if t in ("datetime", "smalldatetime"):
        return pa.timestamp("us")
    if t == "datetime2":
        return pa.timestamp("ns") if column.scale >= 7 else pa.timestamp("us")
    raise UnsupportedTypeError(
        f"Column {column.name!r} has type {column.describe()}, which the provider cannot write to Parquet. "
        "Leave it out of the capture instance (sys.sp_cdc_enable_table @captured_column_list) or "
        "use a computed/converted column."
    )


def _as_text(values: Sequence[Any] | pa.Array) -> pa.Array:
    return values if isinstance(values, pa.Array) else pa.array(values, pa.string())


def _datetime2_array(
    values: Sequence[Any] | pa.Array, column: CapturedColumn, target: pa.DataType
) -> pa.Array:
    text = _as_text(values)
    try:
        return text.cast(target)
    except (pa.ArrowInvalid, OverflowError) as err:
        raise UnsupportedTypeError(
            f"Column {column.name!r} ({column.describe()}) holds a value outside the range of Parquet "
            f"timestamp[ns] ({_TS_NS_MIN} .. {_TS_NS_MAX}): {err}. Declare the column datetime2(6) or less "
            "(written as microseconds, years 1..9999) or keep its values inside that range."
        ) from err


def _datetimeoffset_array(values: Sequence[Any] | pa.Array) -> pa.Array:
    # SQL Server's default text form is 'YYYY-MM-DD hh:mm:ss[.fffffff] +hh:mm'.
    return pc.replace_substring_regex(
        _as_text(values), pattern=r"^(\S+) (\S+) ?([+-]\d\d:\d\d)$", replacement=r"\1T\2\3"
    )


def _native_array(values: Sequence[Any] | pa.Array, target: pa.DataType) -> pa.Array:
    if isinstance(values, pa.Array):
        return values if values.type == target else values.cast(target)
    return pa.array(values, target)


def column_converter(column: CapturedColumn) -> Callable[[Sequence[Any] | pa.Array], pa.Array]:
    """
    Return a function turning one column as read with ``tsql.read_form`` into an Arrow array of :func:`arrow_type`.

    The function accepts driver values (a sequence of Python objects, from pyodbc) or the Arrow
    array a columnar reader (arrow-odbc) produced.

    :param column: the captured column with its full type.
    """
    target = arrow_type(column)
    t = _type(column)
    if t == "datetime2":
        return lambda values: _datetime2_array(values, column, target)
    if t == "datetimeoffset":
        return _datetimeoffset_array
    if t == "uniqueidentifier":
        return lambda values: pc.utf8_upper(_as_text(values))
    if t in ("time", "xml"):
        return _as_text
    return lambda values: _native_array(values, target)


def is_large_object(column: CapturedColumn) -> bool:
    """Whether the column is a (max) or legacy LOB type (unbounded length)."""
    return column.max_length == -1 or _type(column) in ("text", "ntext", "image", "xml")


def arrow_field(column: CapturedColumn) -> pa.Field:
    """The Parquet field of a captured column (with its SQL type in the field metadata)."""
    return pa.field(
        column.name,
        arrow_type(column),
        nullable=True,
        metadata={b"sql_type": column.describe().encode()},
    )


def column_descriptions(instance: CaptureInstance) -> list[dict[str, Any]]:
    """Return the manifest's ``columns`` list of a capture instance loaded with its columns.

    :param instance: the capture instance, with its captured columns.
    """
    return [
        {
            "name": c.name,
            "ordinal": c.ordinal,
            "sql_type": c.sql_type,
            "max_length": c.max_length,
            "precision": c.precision,
            "scale": c.scale,
            "nullable": c.nullable,
            "arrow_type": str(arrow_type(c)),
        }
        for c in instance.columns
    ]
