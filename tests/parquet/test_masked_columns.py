"""Masked record batches (parquet.masked_columns) written by ParquetWindowWriter: no clear value reaches Parquet."""

from __future__ import annotations

import hashlib
import hmac

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking
from airflow_provider_sqlserver_cdc.parquet.masked_columns import mask_batch, masked_schema
from airflow_provider_sqlserver_cdc.parquet.window_writer import ParquetWindowWriter

SCHEMA = pa.schema(
    [
        pa.field("__$operation", pa.int32()),
        pa.field("id", pa.int32(), metadata={b"sql_type": b"int"}),
        pa.field("email", pa.string(), metadata={b"sql_type": b"nvarchar(100)"}),
        pa.field("phone", pa.string(), metadata={b"sql_type": b"varchar(20)"}),
        pa.field("ssn", pa.string(), metadata={b"sql_type": b"char(11)"}),
        pa.field("note", pa.string()),
    ]
)
COLUMNS = [
    {"name": "id", "sql_type": "int"},
    {"name": "email", "sql_type": "nvarchar", "max_length": 200},
    {"name": "phone", "sql_type": "varchar", "max_length": 20},
    {"name": "ssn", "sql_type": "char", "max_length": 11},
    {"name": "note", "sql_type": "nvarchar", "max_length": 200},
]
SALT = "s3cret-salt-value"


def table_masking():
    rules = {"dbo.c.id": "hash", "dbo.c.email": "hash", "dbo.c.phone": "truncate(3)", "dbo.c.ssn": "drop"}
    return ColumnMasking(rules, salt=SALT).for_table("dbo", "c", COLUMNS, ["id"])


def batch():
    return pa.RecordBatch.from_pydict(
        {
            "__$operation": [2, 2, 1],
            "id": [1, 2, 3],
            "email": ["ann@example.com", None, "cid@example.com"],
            "phone": ["555-0101", "555-0102", None],
            "ssn": ["123-45-6789", "987-65-4321", "000-00-0000"],
            "note": ["x", "y", "z"],
        },
        schema=SCHEMA,
    )


def digest(text: str) -> str:
    return hmac.new(SALT.encode(), text.encode(), hashlib.sha256).hexdigest()


def test_masked_schema_drops_and_retypes_with_the_rule_in_the_field_metadata():
    schema = masked_schema(SCHEMA, table_masking())
    assert schema.names == ["__$operation", "id", "email", "phone", "note"]
    assert schema.field("id").type == pa.string()
    assert schema.field("id").metadata == {b"sql_type": b"int", b"masked": b"hash"}
    assert schema.field("phone").type == pa.string()
    assert schema.field("phone").metadata[b"masked"] == b"truncate(3)"
    assert schema.field("note") == SCHEMA.field("note")


def test_mask_batch_hashes_truncates_and_drops():
    masking = table_masking()
    masked = mask_batch(batch(), masking, masked_schema(SCHEMA, masking)).to_pydict()
    assert masked["id"] == [digest("1"), digest("2"), digest("3")]
    assert masked["email"] == [digest("ann@example.com"), None, digest("cid@example.com")]
    assert masked["phone"] == ["555", "555", None]
    assert "ssn" not in masked
    assert masked["note"] == ["x", "y", "z"] and masked["__$operation"] == [2, 2, 1]


def test_the_writer_writes_no_clear_value_and_no_salt(tmp_path):
    writer = ParquetWindowWriter(pafs.LocalFileSystem(), str(tmp_path / "w"), SCHEMA, masking=table_masking())
    with writer:
        writer.write_batch(batch())
    (part,) = writer.files
    raw = (tmp_path / "w" / part.path).read_bytes()
    for clear in (b"ann@example.com", b"123-45-6789", b"555-0101", SALT.encode()):
        assert clear not in raw
    table = pq.read_table(tmp_path / "w" / part.path)
    assert table.schema.names == ["__$operation", "id", "email", "phone", "note"]
    assert table.column("id").to_pylist() == [digest("1"), digest("2"), digest("3")]
    assert part.rows == 3


def test_the_writer_without_masking_writes_the_batch_as_it_is(tmp_path):
    writer = ParquetWindowWriter(pafs.LocalFileSystem(), str(tmp_path / "w"), SCHEMA)
    with writer:
        writer.write_batch(batch())
    assert writer.schema == SCHEMA
    assert pq.read_table(tmp_path / "w" / writer.files[0].path).column("ssn").to_pylist()[0] == "123-45-6789"
