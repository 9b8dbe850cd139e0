"""Unit tests of the source-vs-target comparison: normalisation, exact decoders and the verdict."""

from __future__ import annotations

import datetime as dt
import decimal
import struct

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.testing.table_comparison import (
    OffsetDateTime,
    TableComparison,
    TimeOfDay,
    _decode_time2,
    _decode_timestampoffset,
    compare_rows,
    compare_table,
    expected_target_type,
    source_schema_differences,
    source_value,
    target_table_name,
    target_value,
)

D = decimal.Decimal


def column(
    name: str, sql_type: str, precision: int = 0, scale: int = 0, max_length: int = 0
) -> CapturedColumn:
    return CapturedColumn(name, 1, sql_type, max_length, precision, scale, True)


INSTANCE = CaptureInstance(
    "dbo_t",
    "dbo",
    "t",
    Lsn.from_hex("0x00000000000000000001"),
    columns=(column("id", "int", 10), column("amount", "decimal", 18, 2), column("at", "time", 16, 7)),
    key_columns=("id",),
)


def test_time_keeps_100ns_from_the_odbc_struct_and_the_target_text() -> None:
    raw = struct.pack("<3H2xI", 13, 5, 59, 123456700)
    assert _decode_time2(raw) == TimeOfDay(13, 5, 59, 123456700)
    assert target_value(column("t", "time", 16, 7), "13:05:59.1234567") == TimeOfDay(13, 5, 59, 123456700)
    # The seventh digit counts: a target that dropped it differs.
    assert target_value(column("t", "time", 16, 7), "13:05:59.1234560") != _decode_time2(raw)


def test_datetimeoffset_compares_local_time_fraction_and_offset() -> None:
    raw = struct.pack("<6hI2h", 2026, 3, 29, 1, 30, 5, 120000000, 5, 30)
    source = _decode_timestampoffset(raw)
    assert source == OffsetDateTime(dt.datetime(2026, 3, 29, 1, 30, 5, 120000), 120000000, 330)
    col = column("o", "datetimeoffset", 34, 7)
    assert target_value(col, "2026-03-29T01:30:05.1200000+05:30") == source
    # Same instant in another offset is a different datetimeoffset value.
    assert target_value(col, "2026-03-28T20:00:05.1200000+00:00") != source
    assert target_value(col, "2026-01-01T00:00:00-08:00").offset_minutes == -480


def test_types_follow_the_documented_target_mapping() -> None:
    assert expected_target_type(column("a", "tinyint", 3)) == "INT"
    assert expected_target_type(column("a", "money", 19, 4)) == "DECIMAL(19,4)"
    assert expected_target_type(column("a", "datetime2", 27, 7)) == "TIMESTAMP_NTZ"
    assert expected_target_type(column("a", "datetimeoffset", 34, 7)) == "STRING"
    assert expected_target_type(column("a", "rowversion", 0, 0, 8)) == "BINARY"


def test_source_values_are_brought_to_the_target_representation() -> None:
    assert source_value(column("r", "real", 24), 0.1) == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert source_value(column("g", "uniqueidentifier"), "6f9619ff-8b86-d011-b42d-00c04fc964ff") == (
        "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    )
    assert source_value(column("b", "varbinary", 0, 0, 10), bytearray(b"\x00\x01")) == b"\x00\x01"
    assert target_value(column("b", "varbinary", 0, 0, 10), bytearray(b"\x00\x01")) == b"\x00\x01"
    assert source_value(column("x", "int"), None) is None


def test_verdict_lists_missing_extra_and_differing_rows() -> None:
    at = TimeOfDay(1, 2, 3, 0)
    source = {
        (1,): {"id": 1, "amount": D("1.50"), "at": at},
        (2,): {"id": 2, "amount": D("2.00"), "at": None},
        (3,): {"id": 3, "amount": None, "at": at},
    }
    target = {
        (1,): {"id": 1, "amount": D("1.5"), "at": at},  # equal value, other scale
        (2,): {"id": 2, "amount": D("2.01"), "at": None},
        (4,): {"id": 4, "amount": None, "at": None},
    }
    result = compare_rows(INSTANCE, source, target, TableComparison("dbo_t", "dbo.t", "lake.cdc.dbo_t"))
    assert not result.matches
    assert result.missing_in_target == [(3,)]
    assert result.unexpected_in_target == [(4,)]
    assert [(d.key, d.column) for d in result.value_differences] == [((2,), "amount")]
    text = result.describe()
    assert "DIFFERENT" in text and "2.01" in text and "missing in target" in text


def test_equal_tables_match() -> None:
    rows = {(1,): {"id": 1, "amount": D("1.50"), "at": None}}
    result = compare_rows(INSTANCE, rows, dict(rows), TableComparison("dbo_t", "dbo.t", "lake.cdc.dbo_t"))
    assert result.matches
    assert result.describe().endswith("MATCH")
    kept = TableComparison("dbo_t", "dbo.t", "lake.cdc.dbo_t", kept_columns=["credit_limit"])
    kept = compare_rows(INSTANCE, rows, dict(rows), kept)
    assert kept.matches  # the verdict says what it did not compare
    assert kept.describe().endswith(
        "not compared: credit_limit (dropped on the source, kept in the target): MATCH"
    )


def test_target_table_name_follows_the_merge_template() -> None:
    assert target_table_name(INSTANCE, "lake.cdc") == "lake.cdc.dbo_t"
    assert target_table_name(INSTANCE, "lake.raw", "{capture_instance}_v1") == "lake.raw.dbo_t_v1"


def test_source_columns_the_instance_does_not_follow_are_differences() -> None:
    grown = [*INSTANCE.columns, column("loyalty", "int", 10)]
    assert source_schema_differences(INSTANCE, grown) == [
        "column loyalty is in the source table but not captured by dbo_t: not replicated"
    ]
    changed = [column("id", "bigint", 19), column("at", "time", 16, 7)]
    assert source_schema_differences(INSTANCE, changed) == [
        "column id is bigint in the source, captured as int",
        "captured column amount no longer exists in the source table",
    ]
    assert source_schema_differences(INSTANCE, list(INSTANCE.columns)) == []
    # The verdict is DIFFERENT before any row is read (no Spark, no connection needed for it).
    result = compare_table(None, None, INSTANCE, "lake.cdc.dbo_t", grown)
    assert not result.matches and "loyalty" in result.describe()
