from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pyarrow.fs as pafs
import pytest

from airflow_provider_sqlserver_cdc.snapshot.progress import (
    PROGRESS_NAME,
    ChunkRecord,
    SnapshotProgress,
    decode_key_value,
    encode_key_value,
    read_progress,
    remove_progress,
    write_progress,
)
from airflow_provider_sqlserver_cdc.window.manifest import ManifestFile

KEY_VALUES = [
    None,
    True,
    2**62 + 7,
    -5,
    0.1,
    Decimal("-12345678901234567890.123456789"),
    "naïve ]key[ 𝄞",
    b"\x00\xff\x10",
    dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    dt.datetime(2024, 1, 1, 10, 0, tzinfo=dt.timezone(dt.timedelta(hours=-5, minutes=-30))),
    dt.date(1, 1, 1),
    dt.time(23, 59, 59, 123456),
    uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"),
]


@pytest.mark.parametrize(
    "value", KEY_VALUES, ids=[type(v).__name__ + str(i) for i, v in enumerate(KEY_VALUES)]
)
def test_key_values_round_trip_with_their_type(value):
    back = decode_key_value(encode_key_value(value))
    assert back == value
    assert type(back) is type(value)


def test_unknown_key_types_are_refused():
    with pytest.raises(TypeError, match="list"):
        encode_key_value([1])
    with pytest.raises(ValueError, match="Bad key value"):
        decode_key_value({"type": "int", "value": "x"})


def _progress(chunks):
    return SnapshotProgress(
        capture_instance="dbo_orders",
        source={"server": "h:1", "database": "shop", "schema": "dbo", "table": "orders"},
        instance_start_lsn="0x00000001000000100001",
        snapshot_lsn="0x0000002A000001F00003",
        snapshot_time="2026-01-01T10:00:00+00:00",
        method="snapshot_isolation",
        window_dir="0x00000000000000000000_0x0000002A000001F00003",
        columns=[{"name": "id"}],
        key_columns=["id", "line"],
        read_lsns=["0x0000002A000001F00003"],
        chunks=chunks,
    )


def test_progress_file_round_trips_and_is_removed(tmp_path):
    fs = pafs.LocalFileSystem()
    key = [encode_key_value(41), encode_key_value("b")]
    progress = _progress(
        [
            ChunkRecord([ManifestFile("part-00000.parquet", 10, 100)], 10, key),
            ChunkRecord([ManifestFile("part-00001.parquet", 3, 50)], 3, None),
        ]
    )
    write_progress(fs, str(tmp_path / "dbo_orders"), progress)
    assert (tmp_path / "dbo_orders" / PROGRESS_NAME).is_file()
    assert not list((tmp_path / "dbo_orders").glob(".*tmp"))
    back = read_progress(fs, str(tmp_path / "dbo_orders"))
    assert back == progress
    assert back.rows == 13 and back.finished
    assert [f.path for f in back.files] == ["part-00000.parquet", "part-00001.parquet"]
    assert back.chunks[0].last_key_values() == [41, "b"]
    remove_progress(fs, str(tmp_path / "dbo_orders"))
    assert read_progress(fs, str(tmp_path / "dbo_orders")) is None


def test_unfinished_when_the_last_chunk_has_a_last_key():
    assert not _progress([]).finished
    assert not _progress([ChunkRecord([], 5, [encode_key_value(5)])]).finished


def test_an_unreadable_progress_file_counts_as_none(tmp_path):
    (tmp_path / PROGRESS_NAME).write_text("{not json")
    assert read_progress(pafs.LocalFileSystem(), str(tmp_path)) is None
