from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import (
    UnsupportedTypeError,
    arrow_type,
    column_converter,
)
from airflow_provider_sqlserver_cdc.tsql import ReadForm, read_form


def col(sql_type, *, max_length=0, precision=0, scale=0, name="c"):
    return CapturedColumn(name, 1, sql_type, max_length, precision, scale, True)


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (col("bit"), pa.bool_()),
        (col("tinyint"), pa.int16()),
        (col("smallint"), pa.int16()),
        (col("int"), pa.int32()),
        (col("bigint"), pa.int64()),
        (col("decimal", precision=38, scale=10), pa.decimal128(38, 10)),
        (col("numeric", precision=5, scale=0), pa.decimal128(5, 0)),
        (col("money"), pa.decimal128(19, 4)),
        (col("smallmoney"), pa.decimal128(10, 4)),
        (col("real", precision=24), pa.float32()),
        (col("float", precision=53), pa.float64()),
        (col("nvarchar", max_length=-1), pa.string()),
        (col("varchar", max_length=10), pa.string()),
        (col("ntext"), pa.string()),
        (col("xml"), pa.string()),
        (col("varbinary", max_length=-1), pa.binary()),
        (col("image"), pa.binary()),
        (col("timestamp", max_length=8), pa.binary()),
        (col("uniqueidentifier"), pa.string()),
        (col("date"), pa.date32()),
        (col("time", scale=7), pa.string()),
        (col("datetime"), pa.timestamp("us")),
        (col("smalldatetime"), pa.timestamp("us")),
        (col("datetime2", scale=6), pa.timestamp("us")),
        (col("datetime2", scale=7), pa.timestamp("ns")),
        (col("datetimeoffset", scale=7), pa.string()),
    ],
)
def test_arrow_type(column, expected):
    assert arrow_type(column) == expected


def test_unsupported_type_names_column_and_remedy():
    with pytest.raises(UnsupportedTypeError, match=r"'geo'.*geography.*@captured_column_list"):
        arrow_type(col("geography", name="geo"))


def test_read_forms():
    assert read_form(col("datetime2", scale=7)) is ReadForm.TEXT
    assert read_form(col("datetimeoffset", scale=3)) is ReadForm.TEXT
    assert read_form(col("time", scale=3)) is ReadForm.TEXT
    assert read_form(col("uniqueidentifier")) is ReadForm.GUID_TEXT
    assert read_form(col("xml")) is ReadForm.NTEXT
    assert read_form(col("int")) is ReadForm.NATIVE


def test_datetime2_7_keeps_100ns():
    arr = column_converter(col("datetime2", scale=7))(["2024-01-02 03:04:05.1234567", None])
    assert arr.type == pa.timestamp("ns")
    assert arr[0].value % 1000 == 700  # the 7th digit survives
    assert arr[1].as_py() is None


def test_datetime2_low_scale_reaches_year_one():
    arr = column_converter(col("datetime2", scale=3))(["0001-01-01 00:00:00.000", "9999-12-31 23:59:59.999"])
    assert arr.to_pylist() == [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999000)]


def test_datetime2_7_out_of_ns_range_is_a_clear_error():
    with pytest.raises(UnsupportedTypeError, match=r"'c'.*datetime2\(7\).*timestamp\[ns\]"):
        column_converter(col("datetime2", scale=7))(["0001-01-01 00:00:00.0000000"])


def test_datetimeoffset_to_iso_with_offset():
    arr = column_converter(col("datetimeoffset", scale=7))(
        ["2024-01-02 03:04:05.1234567 +05:30", "2024-01-02 03:04:05 -08:00", None]
    )
    assert arr.to_pylist() == ["2024-01-02T03:04:05.1234567+05:30", "2024-01-02T03:04:05-08:00", None]


def test_guid_upper_case_and_decimals_exact():
    guid = column_converter(col("uniqueidentifier"))(["6f9619ff-8b86-d011-b42d-00c04fc964ff"])
    assert guid.to_pylist() == ["6F9619FF-8B86-D011-B42D-00C04FC964FF"]
    dec = column_converter(col("decimal", precision=38, scale=10))(
        [Decimal("1234567890123456789012345678.0123456789")]
    )
    assert dec[0].as_py() == Decimal("1234567890123456789012345678.0123456789")
    money = column_converter(col("money"))([Decimal("-922337203685477.5808")])
    assert money[0].as_py() == Decimal("-922337203685477.5808")
