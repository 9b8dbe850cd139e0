"""SQL Server -> Spark types, widening, and the values of every type through a merge."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from merge_runs import run
from window_builder import INT_KEY, Column, Row, WindowSpec, write_window

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import TARGET_META_COLUMNS
from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError
from airflow_provider_sqlserver_cdc.spark.merge.spark_types import source_type_comment, spark_type, widening


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        ({"sql_type": "bit"}, "BOOLEAN"),
        ({"sql_type": "tinyint"}, "INT"),
        ({"sql_type": "bigint"}, "BIGINT"),
        ({"sql_type": "numeric", "precision": 38, "scale": 10}, "DECIMAL(38,10)"),
        ({"sql_type": "money"}, "DECIMAL(19,4)"),
        ({"sql_type": "smallmoney"}, "DECIMAL(10,4)"),
        ({"sql_type": "float", "precision": 53}, "DOUBLE"),
        ({"sql_type": "float", "precision": 24}, "FLOAT"),
        ({"sql_type": "real"}, "FLOAT"),
        ({"sql_type": "datetime2", "scale": 7}, "TIMESTAMP_NTZ"),
        ({"sql_type": "smalldatetime"}, "TIMESTAMP_NTZ"),
        ({"sql_type": "datetimeoffset", "scale": 7}, "STRING"),
        ({"sql_type": "time", "scale": 3}, "STRING"),
        ({"sql_type": "uniqueidentifier"}, "STRING"),
        ({"sql_type": "xml"}, "STRING"),
        ({"sql_type": "rowversion"}, "BINARY"),
        ({"sql_type": "date"}, "DATE"),
    ],
)
def test_target_types(column: dict[str, Any], expected: str) -> None:
    assert spark_type({"name": "c", **column}, "lake.db.t") == expected


def test_unknown_type_names_table_and_column() -> None:
    with pytest.raises(
        SchemaEvolutionError, match="target table lake.db.t: column shape has SQL type 'geometry2'"
    ):
        spark_type({"name": "shape", "sql_type": "geometry2", "arrow_type": "struct<>"}, "lake.db.t")


@pytest.mark.parametrize(
    ("table", "window", "expected"),
    [
        ("int", "INT", None),
        ("bigint", "INT", None),
        ("int", "BIGINT", "BIGINT"),
        ("float", "DOUBLE", "DOUBLE"),
        ("decimal(10,2)", "DECIMAL(12,2)", "DECIMAL(12,2)"),
        ("decimal(12,2)", "DECIMAL(10,2)", None),
    ],
)
def test_widening_allowed_by_iceberg(table: str, window: str, expected: str | None) -> None:
    assert widening(table, window) == expected


@pytest.mark.parametrize(
    ("table", "window"), [("int", "STRING"), ("decimal(10,2)", "DECIMAL(10,3)"), ("bigint", "DOUBLE")]
)
def test_widening_refused(table: str, window: str) -> None:
    with pytest.raises(ValueError):
        widening(table, window)


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        # max_length is sys.columns.max_length, in bytes: two a character for the n-types
        ({"sql_type": "nvarchar", "max_length": 400}, "nvarchar(200)"),
        ({"sql_type": "nchar", "max_length": 20}, "nchar(10)"),
        # declared without a length, whatever max_length holds (a pointer, a fixed size, -1)
        ({"sql_type": "sysname", "max_length": 256}, "sysname"),
        ({"sql_type": "uniqueidentifier", "max_length": 16}, "uniqueidentifier"),
        ({"sql_type": "text", "max_length": 16}, "text"),
        ({"sql_type": "ntext", "max_length": 16}, "ntext"),
        ({"sql_type": "image", "max_length": 16}, "image"),
        ({"sql_type": "xml", "max_length": -1}, "xml"),
        ({"sql_type": "timestamp", "max_length": 8}, "timestamp"),
        ({"sql_type": "sql_variant", "max_length": 8016}, "sql_variant"),
        ({"sql_type": "nvarchar", "max_length": -1}, "nvarchar(max)"),
        ({"sql_type": "varchar", "max_length": 50}, "varchar(50)"),
        ({"sql_type": "char", "max_length": 4}, "char(4)"),
        ({"sql_type": "varbinary", "max_length": -1}, "varbinary(max)"),
        ({"sql_type": "binary", "max_length": 16}, "binary(16)"),
        ({"sql_type": "decimal", "max_length": 9, "precision": 10, "scale": 2}, "decimal(10,2)"),
        ({"sql_type": "datetime2", "max_length": 7, "precision": 23, "scale": 3}, "datetime2(3)"),
        ({"sql_type": "int", "max_length": 4, "precision": 10}, "int"),
    ],
)
def test_source_type_comment_names_the_type_as_declared(column: dict[str, Any], expected: str) -> None:
    assert source_type_comment({"name": "c", **column}) == f"SQL Server {expected}"


ALL_TYPES = (
    INT_KEY,
    Column("flag", "bit", pa.bool_()),
    Column("tiny", "tinyint", pa.int16()),
    Column("big", "bigint", pa.int64()),
    Column("price", "money", pa.decimal128(19, 4), precision=19, scale=4),
    Column("ratio", "float", pa.float64(), precision=53),
    Column("small_ratio", "real", pa.float32(), precision=24),
    Column("guid", "uniqueidentifier", pa.string()),
    Column("blob", "varbinary", pa.binary(), max_length=-1),
    Column("day", "date", pa.date32()),
    Column("at", "datetime", pa.timestamp("us")),
    Column("at7", "datetime2", pa.timestamp("ns"), scale=7),
    Column("at_offset", "datetimeoffset", pa.string(), scale=7),
    Column("clock", "time", pa.string(), scale=7),
)


@pytest.mark.spark
def test_types_are_kept_faithfully(spark: Any, base: Path, namespace: str) -> None:
    at7 = pa.array([1_700_000_000_123_456_789, -1_234_567], pa.int64()).cast(pa.timestamp("ns"))
    values = {
        "id": 1,
        "flag": True,
        "tiny": 255,
        "big": 2**62,
        "price": decimal.Decimal("922337203685477.5807"),
        "ratio": 1.5e300,
        "small_ratio": 0.5,
        "guid": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "blob": b"\x00\xff",
        "day": dt.date(1, 1, 1),
        "at": dt.datetime(2026, 3, 29, 2, 30, 0, 997000),
        "at7": at7[0].value,
        "at_offset": "2026-03-29T02:30:00.1234567+05:30",
        "clock": "23:59:59.9999999",
    }
    second = dict(values, id=2, at7=at7[1].value)
    rows = [Row(0x200, 0x20001, 2, values), Row(0x200, 0x20002, 2, second)]
    window = write_window(base, WindowSpec("dbo_types", 0x100, 0x200, rows, columns=ALL_TYPES))
    run(spark, namespace, window)
    table = f"{namespace}.dbo_types"
    schema = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
    assert schema == {
        "id": "int",
        "flag": "boolean",
        "tiny": "int",
        "big": "bigint",
        "price": "decimal(19,4)",
        "ratio": "double",
        "small_ratio": "float",
        "guid": "string",
        "blob": "binary",
        "day": "date",
        "at": "timestamp_ntz",
        "at7": "timestamp_ntz",
        "at_offset": "string",
        "clock": "string",
        **{name: kind.lower() for name, kind, _ in TARGET_META_COLUMNS},
    }
    got = {r.id: r.asDict() for r in spark.table(table).collect()}
    for column in (
        "flag",
        "tiny",
        "big",
        "price",
        "ratio",
        "small_ratio",
        "guid",
        "day",
        "at",
        "at_offset",
        "clock",
    ):
        assert got[1][column] == values[column], column
    assert bytes(got[1]["blob"]) == b"\x00\xff"
    # datetime2(7) keeps microseconds: the 100 ns digit is dropped (floored, also before 1970).
    assert got[1]["at7"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456)
    assert got[2]["at7"] == dt.datetime(1969, 12, 31, 23, 59, 59, 998765)
