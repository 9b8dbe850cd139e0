from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from airflow_provider_sqlserver_cdc.parquet.window_writer import ParquetWindowWriter, resolve_filesystem

SCHEMA = pa.schema([("id", pa.int64()), ("payload", pa.string())])


def batch(start, n):
    return pa.record_batch(
        [
            pa.array(range(start, start + n), pa.int64()),
            pa.array([f"row {i} " * 8 for i in range(start, start + n)]),
        ],
        schema=SCHEMA,
    )


def test_rolls_files_at_size_and_keeps_all_rows(tmp_path):
    fs, path = resolve_filesystem(str(tmp_path / "w"))
    with ParquetWindowWriter(fs, path, SCHEMA, max_file_bytes=20_000) as writer:
        for i in range(20):
            writer.write_batch(batch(i * 1000, 1000))
    files = writer.files
    assert len(files) > 2
    assert [f.path for f in files] == [f"part-{i:05d}.parquet" for i in range(len(files))]
    assert sum(f.rows for f in files) == 20_000
    ids = []
    for f in files:
        meta = pq.read_metadata(tmp_path / "w" / f.path)
        assert meta.num_rows == f.rows
        assert meta.row_group(0).column(0).compression == "ZSTD"
        assert (tmp_path / "w" / f.path).stat().st_size == f.bytes
        ids.extend(pq.read_table(tmp_path / "w" / f.path).column("id").to_pylist())
    assert ids == list(range(20_000))


def test_rerun_leaves_no_stale_parts(tmp_path):
    fs, path = resolve_filesystem(str(tmp_path / "w"))
    with ParquetWindowWriter(fs, path, SCHEMA, max_file_bytes=10_000) as writer:
        for i in range(10):
            writer.write_batch(batch(i * 1000, 1000))
    assert len(list((tmp_path / "w").iterdir())) > 1
    (tmp_path / "w" / "_manifest.json").write_text("{}")
    with ParquetWindowWriter(fs, path, SCHEMA) as writer:
        writer.write_batch(batch(0, 5))
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["part-00000.parquet"]


def test_empty_window_writes_no_file(tmp_path):
    fs, path = resolve_filesystem(str(tmp_path / "w"))
    with ParquetWindowWriter(fs, path, SCHEMA) as writer:
        writer.write_batch(batch(0, 0))
    assert writer.files == []
    assert list((tmp_path / "w").iterdir()) == []


def test_failure_leaves_no_manifest(tmp_path):
    fs, path = resolve_filesystem(str(tmp_path / "w"))
    with pytest.raises(RuntimeError), ParquetWindowWriter(fs, path, SCHEMA) as writer:
        writer.write_batch(batch(0, 5))
        raise RuntimeError("driver died")
    assert not (tmp_path / "w" / "_manifest.json").exists()


def test_fsspec_uri_is_supported():
    fs, path = resolve_filesystem("memory://bucket/base/ci/w1")
    assert isinstance(fs, pafs.PyFileSystem)
    with ParquetWindowWriter(fs, path, SCHEMA) as writer:
        writer.write_batch(batch(0, 10))
    with fs.open_input_file(f"{path}/part-00000.parquet") as f:
        assert pq.read_table(f).num_rows == 10


def test_file_uri_uses_local_filesystem(tmp_path):
    fs, path = resolve_filesystem(f"file://{tmp_path}/x")
    assert isinstance(fs, pafs.LocalFileSystem)
    assert path == f"{tmp_path}/x"
