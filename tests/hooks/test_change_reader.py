"""Change rows into Arrow batches without a server: decoders, schema, commit time in UTC, reader choice."""

from __future__ import annotations

import struct
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.hooks.change_reader import (
    ARROW_ODBC,
    PYODBC,
    ChangeReader,
    arrow_batch_to_schema,
    arrow_odbc_available,
    decode_datetimeoffset,
    decode_guid,
    rows_to_batch,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_converter
from airflow_provider_sqlserver_cdc.window.planning import LsnWindow, ServerTimeZone

COLUMNS = (
    CapturedColumn("id", 1, "int", 4, 10, 0, False),
    CapturedColumn("amount", 2, "money", 8, 19, 4, True),
)
LSN = bytes.fromhex("0000002A000001F00003")
ROWS = [
    (
        LSN,
        bytes.fromhex("0000002A000001F00002"),
        2,
        b"\x03",
        datetime(2026, 3, 1, 12, 0, 0, 3000),
        7,
        Decimal("1.5"),
    ),
    (LSN, bytes.fromhex("0000002A000001F00004"), 1, b"\x03", datetime(2026, 3, 1, 12, 0, 0, 3000), 8, None),
]


def test_decode_datetimeoffset_and_guid():
    raw = struct.pack("<6hI2h", 2024, 2, 29, 23, 59, 58, 123456700, -5, -30)
    value = decode_datetimeoffset(raw)
    assert value == datetime(
        2024, 2, 29, 23, 59, 58, 123456, tzinfo=timezone(-timedelta(hours=5, minutes=30))
    )
    u = uuid.uuid4()
    assert decode_guid(u.bytes_le) == u


def test_rows_to_batch_converts_commit_time_to_utc():
    cols = COLUMNS
    instance = CaptureInstance("dbo_t", "dbo", "t", Lsn.zero(), columns=cols)
    hook = SqlServerCdcHook("unused")
    schema = hook.changes_schema(instance)
    rows = ROWS
    tz = ServerTimeZone(offset=timedelta(hours=-5))
    batch = rows_to_batch(rows, schema, [column_converter(c) for c in cols], tz)
    assert batch.schema.names == [
        "__$start_lsn",
        "__$seqval",
        "__$operation",
        "__$update_mask",
        "__$commit_time",
        "id",
        "amount",
    ]
    assert batch.column("__$commit_time").type == pa.timestamp("us", tz="UTC")
    assert batch.column("__$commit_time")[0].as_py() == datetime(2026, 3, 1, 17, 0, 0, 3000, tzinfo=UTC)
    assert batch.column("amount").to_pylist() == [Decimal("1.5000"), None]
    assert batch.column("__$operation").to_pylist() == [2, 1]


def test_columnar_batch_gives_the_same_batch_as_rows():
    instance = CaptureInstance("dbo_t", "dbo", "t", Lsn.zero(), columns=COLUMNS)
    reader = ChangeReader(
        instance,
        window(),
        tz=ServerTimeZone(offset=timedelta(hours=-5)),
        row_filter_option="all",
        batch_size=10,
    )
    columnar = pa.RecordBatch.from_pylist(
        [dict(zip(["s", "q", "o", "m", "t", "id", "amount"], row, strict=True)) for row in ROWS]
    )
    from_columns = arrow_batch_to_schema(columnar, reader.schema, reader.converters, reader.tz)
    assert from_columns.equals(rows_to_batch(ROWS, reader.schema, reader.converters, reader.tz))


def window(empty: bool = False) -> LsnWindow:
    low = Lsn.from_hex("0x0000002A000001F00001")
    return LsnWindow("dbo_t", low, Lsn.from_hex("0x0000002A000001F00009"), "interval", empty=empty)


def test_reader_checks_its_arguments():
    instance = CaptureInstance("dbo_t", "dbo", "t", Lsn.zero(), columns=COLUMNS)
    tz = ServerTimeZone(offset=timedelta(0))
    with pytest.raises(ValueError, match="reader must be one of"):
        ChangeReader(instance, window(), tz=tz, row_filter_option="all", batch_size=1, choice="odbc")
    with pytest.raises(ValueError, match="without its columns"):
        ChangeReader(
            CaptureInstance("dbo_t", "dbo", "t", Lsn.zero()),
            window(),
            tz=tz,
            row_filter_option="all",
            batch_size=1,
        )
    with pytest.raises(ValueError):
        ChangeReader(instance, window(), tz=tz, row_filter_option="net", batch_size=1)


def test_auto_reader_avoids_arrow_odbc_for_large_objects():
    tz = ServerTimeZone(offset=timedelta(0))
    plain = CaptureInstance("dbo_t", "dbo", "t", Lsn.zero(), columns=COLUMNS)
    lob = CaptureInstance(
        "dbo_t",
        "dbo",
        "t",
        Lsn.zero(),
        columns=(*COLUMNS, CapturedColumn("doc", 3, "nvarchar", -1, 0, 0, True)),
    )
    auto = ChangeReader(plain, window(), tz=tz, row_filter_option="all", batch_size=1)
    assert auto.reader == (ARROW_ODBC if arrow_odbc_available() else PYODBC)
    assert ChangeReader(lob, window(), tz=tz, row_filter_option="all", batch_size=1).reader == PYODBC
    forced = ChangeReader(lob, window(), tz=tz, row_filter_option="all", batch_size=1, choice=ARROW_ODBC)
    assert forced.reader == ARROW_ODBC


def test_an_empty_window_is_not_queried(conn_env):
    hook = SqlServerCdcHook(conn_env(driver="FreeTDS"))  # db.example: any query would fail
    instance = CaptureInstance("dbo_t", "dbo", "t", Lsn.zero(), columns=COLUMNS)
    tz = ServerTimeZone(offset=timedelta(0))
    assert list(hook.stream_changes(instance, window(empty=True), tz=tz, reader="pyodbc")) == []
