"""SQL Server column types (as a manifest describes them) -> Spark SQL types, and type widening."""

from __future__ import annotations

import re
from typing import Any

from airflow_provider_sqlserver_cdc.column_masking import masking_note
from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError

_STRING_TYPES = frozenset(
    {"char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml", "sysname", "uniqueidentifier"}
    | {"time", "datetimeoffset", "sql_variant", "hierarchyid", "geography", "geometry"}
)
_BINARY_TYPES = frozenset({"binary", "varbinary", "image", "rowversion", "timestamp"})
#: Types T-SQL declares with a length; the others take none, whatever ``max_length`` holds (``text``'s
#: 16-byte pointer, ``uniqueidentifier``'s 16 bytes, ``sysname``'s 256: it is ``nvarchar(128)``).
_SIZED_TYPES = frozenset({"char", "varchar", "nchar", "nvarchar", "binary", "varbinary"})
#: Types whose ``max_length`` (``sys.columns``, in bytes) holds two bytes per character: ``nvarchar(200)``
#: arrives as 400.
_TWO_BYTE_CHARACTER_TYPES = frozenset({"nchar", "nvarchar"})
#: SQL Server types whose Spark type depends on nothing else.
_FIXED_TYPES = {
    "bit": "BOOLEAN",
    "tinyint": "INT",
    "smallint": "INT",
    "int": "INT",
    "bigint": "BIGINT",
    "money": "DECIMAL(19,4)",
    "smallmoney": "DECIMAL(10,4)",
    "real": "FLOAT",
    "date": "DATE",
    "datetime": "TIMESTAMP_NTZ",
    "smalldatetime": "TIMESTAMP_NTZ",
    "datetime2": "TIMESTAMP_NTZ",
    **dict.fromkeys(_STRING_TYPES, "STRING"),
    **dict.fromkeys(_BINARY_TYPES, "BINARY"),
}
_ARROW_FALLBACK = {
    "bool": "BOOLEAN",
    "int8": "INT",
    "int16": "INT",
    "int32": "INT",
    "int64": "BIGINT",
    "float": "FLOAT",
    "float32": "FLOAT",
    "double": "DOUBLE",
    "float64": "DOUBLE",
    "string": "STRING",
    "large_string": "STRING",
    "binary": "BINARY",
    "large_binary": "BINARY",
    "date32": "DATE",
    "date32[day]": "DATE",
}


def is_nanosecond_column(column: dict[str, Any]) -> bool:
    """Whether the window stores this column as Parquet timestamp[ns] (datetime2(7))."""
    arrow = str(column.get("arrow_type", "")).replace(" ", "")
    if arrow.startswith("timestamp["):
        return arrow.startswith("timestamp[ns")
    return column["sql_type"].lower() == "datetime2" and column.get("scale", 7) == 7


def spark_type(column: dict[str, Any], table: str) -> str:
    """Return the Spark SQL type (as Iceberg stores it) of a manifest column.

    Integers narrower than 32 bits become INT (Iceberg has no smaller integers); datetime and
    datetime2 become TIMESTAMP_NTZ (Iceberg ``timestamp``, microseconds: datetime2(7) loses its
    last digit); time and datetimeoffset stay the strings the window holds (offset kept).
    """
    sql_type = column["sql_type"].lower()
    if sql_type in _FIXED_TYPES:
        return _FIXED_TYPES[sql_type]
    if sql_type in ("decimal", "numeric"):
        precision, scale = column.get("precision"), column.get("scale")
        if not isinstance(precision, int) or not isinstance(scale, int) or not 1 <= precision <= 38:
            raise SchemaEvolutionError(
                f"target table {table}: column {column['name']} is {sql_type} without a valid precision/scale "
                f"({precision!r}, {scale!r}) in the manifest"
            )
        return f"DECIMAL({precision},{scale})"
    if sql_type == "float":
        precision = column.get("precision")
        return "FLOAT" if isinstance(precision, int) and precision <= 24 else "DOUBLE"
    arrow = str(column.get("arrow_type", "")).replace(" ", "")
    if arrow in _ARROW_FALLBACK:
        return _ARROW_FALLBACK[arrow]
    decimal = re.match(r"^decimal128\((\d+),(\d+)\)$", arrow)
    if decimal:
        return f"DECIMAL({decimal.group(1)},{decimal.group(2)})"
    raise SchemaEvolutionError(
        f"target table {table}: column {column['name']} has SQL type {column['sql_type']!r} "
        f"(arrow {column.get('arrow_type')!r}) that the merge job cannot map; cast it in the source "
        "or leave it out of the capture instance's @captured_column_list"
    )


def _normalize(spark_sql_type: str) -> str:
    text = spark_sql_type.upper().replace(" ", "")
    return {"INTEGER": "INT", "LONG": "BIGINT", "REAL": "FLOAT", "BOOL": "BOOLEAN", "SHORT": "INT"}.get(
        text, text
    )


def widening(table_type: str, window_type: str) -> str | None:
    """Compare a table column type with the window's type.

    :param table_type: the Spark SQL type of the table column.
    :param window_type: the Spark SQL type of the window's column.
    :return: ``None`` when the table type holds the window's values as is, else the type the
        table column must be widened to.
    :raises ValueError: when Iceberg cannot widen the table type to hold the window's values.
    """
    have, want = _normalize(table_type), _normalize(window_type)
    if have == want:
        return None
    if (have, want) in (("BIGINT", "INT"), ("DOUBLE", "FLOAT")):
        return None
    if (have, want) in (("INT", "BIGINT"), ("FLOAT", "DOUBLE")):
        return want
    dec_have = re.match(r"^DECIMAL\((\d+),(\d+)\)$", have)
    dec_want = re.match(r"^DECIMAL\((\d+),(\d+)\)$", want)
    if dec_have and dec_want and dec_have.group(2) == dec_want.group(2):
        return None if int(dec_have.group(1)) >= int(dec_want.group(1)) else want
    raise ValueError(f"{have} cannot hold {want}")


def source_type_comment(column: dict[str, Any]) -> str:
    """Return the column comment naming its SQL Server type as declared, e.g. ``SQL Server nvarchar(200)``.

    A length is in characters, as in ``nvarchar(200)``: the manifest's ``max_length`` is
    ``sys.columns.max_length``, in bytes (400 for that column), and -1 for ``(max)``. Types declared
    without a length (``text``, ``uniqueidentifier``, ``sysname``, ``xml``...) get none. A masked column
    adds its rule and declared type (``SQL Server char(64); masked: hash of int``, ``column_masking``).

    :param column: the manifest's column entry.
    """
    sql_type = column["sql_type"]
    if sql_type.lower() in ("decimal", "numeric"):
        sql_type += f"({column.get('precision')},{column.get('scale')})"
    elif sql_type.lower() in ("datetime2", "time", "datetimeoffset"):
        sql_type += f"({column.get('scale')})"
    elif column.get("max_length") not in (None, 0) and sql_type.lower() in _SIZED_TYPES:
        length = column.get("max_length")
        if length != -1 and sql_type.lower() in _TWO_BYTE_CHARACTER_TYPES:
            length //= 2
        sql_type += "(max)" if length == -1 else f"({length})"
    return "SQL Server " + sql_type + masking_note(column)
