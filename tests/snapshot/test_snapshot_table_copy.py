from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.fs as pafs

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.hooks.change_reader import METADATA_FIELDS
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import (
    arrow_field,
    column_converter,
    column_descriptions,
)
from airflow_provider_sqlserver_cdc.snapshot.progress import SnapshotProgress
from airflow_provider_sqlserver_cdc.snapshot.table_copy import (
    chunk_key_columns,
    resume_problem,
    rows_to_snapshot_batch,
    update_mask_all,
)
from airflow_provider_sqlserver_cdc.window.manifest import ManifestFile

START = Lsn.from_hex("0x00000010000000200001")
SNAP = Lsn.from_hex("0x00000020000000300004")


def col(name, ordinal, sql_type="int", nullable=False, scale=0):
    return CapturedColumn(name, ordinal, sql_type, 4, 10, scale, nullable)


def instance(columns, keys):
    return CaptureInstance("dbo_t", "dbo", "t", START, columns=tuple(columns), key_columns=tuple(keys))


def test_update_mask_has_every_captured_column_bit_in_sql_servers_layout():
    assert update_mask_all([col(f"c{i}", i) for i in range(1, 6)]) == b"\x1f"
    assert update_mask_all([col(f"c{i}", i) for i in range(1, 11)]) == b"\x03\xff"
    # a dropped column leaves a hole in the ordinals
    assert update_mask_all([col("a", 1), col("c", 3)]) == b"\x05"


def test_chunk_keys_need_every_key_captured_and_not_null():
    a, b, n = col("a", 1), col("b", 2), col("n", 3, nullable=True)
    assert chunk_key_columns(instance([a, b, n], ["b", "a"])) == [b, a]
    assert chunk_key_columns(instance([a, b, n], ["a", "n"])) == []
    assert chunk_key_columns(instance([a, b], ["missing"])) == []
    assert chunk_key_columns(instance([a, b], [])) == []


def test_snapshot_batch_rows_are_inserts_at_the_snapshot_lsn():
    columns = [col("id", 1), CapturedColumn("at", 2, "datetime2", 8, 27, 7, True)]
    schema = pa.schema(METADATA_FIELDS + [arrow_field(c) for c in columns])
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    batch = rows_to_snapshot_batch(
        [(1, "2024-01-01 10:00:00.1234567"), (2, None)],
        schema,
        [column_converter(c) for c in columns],
        lsn=SNAP,
        mask=b"\x03",
        commit_time=when,
    )
    assert batch.schema == schema
    data = batch.to_pydict()
    assert data["__$start_lsn"] == [SNAP.value] * 2 == data["__$seqval"]
    assert data["__$operation"] == [2, 2]
    assert data["__$update_mask"] == [b"\x03"] * 2
    assert data["__$commit_time"] == [when] * 2
    assert data["id"] == [1, 2]
    assert batch.column("at").type == pa.timestamp("ns")
    assert batch.column("at")[0].value % 1000 == 700  # the seventh fraction digit survives


SOURCE = {"server": "h:1", "database": "d", "schema": "dbo", "table": "t"}


def _progress(inst, chunk_file=None):
    from airflow_provider_sqlserver_cdc.snapshot.progress import ChunkRecord, encode_key_value

    chunks = [ChunkRecord([chunk_file], chunk_file.rows, [encode_key_value(9)])] if chunk_file else []
    return SnapshotProgress(
        capture_instance=inst.name,
        source=dict(SOURCE),
        instance_start_lsn=START.hex,
        snapshot_lsn=SNAP.hex,
        snapshot_time="2026-01-01T00:00:00+00:00",
        method="snapshot_isolation",
        window_dir="w",
        columns=column_descriptions(inst),
        key_columns=["id"],
        chunks=chunks,
    )


def _problem(progress, inst, tmp_path, *, min_lsn=START, keys=("id",)):
    return resume_problem(
        progress,
        instance=inst,
        source=dict(SOURCE),
        columns=column_descriptions(inst),
        key_columns=list(keys),
        min_lsn=min_lsn,
        filesystem=pafs.LocalFileSystem(),
        instance_dir=str(tmp_path),
    )


def test_resume_is_allowed_when_nothing_changed_and_files_are_intact(tmp_path):
    inst = instance([col("id", 1), col("v", 2)], ["id"])
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "part-00000.parquet").write_bytes(b"x" * 10)
    progress = _progress(inst, ManifestFile("part-00000.parquet", 3, 10))
    assert _problem(progress, inst, tmp_path) is None
    # the low-water mark may reach the snapshot LSN itself: every change after it is still there
    assert _problem(progress, inst, tmp_path, min_lsn=SNAP) is None


def test_resume_is_refused_after_cleanup_passed_the_snapshot_lsn(tmp_path):
    inst = instance([col("id", 1)], ["id"])
    beyond = Lsn.from_hex("0x00000020000000300005")
    problem = _problem(_progress(inst), inst, tmp_path, min_lsn=beyond)
    assert problem and "cleanup" in problem and SNAP.hex in problem
    assert "0 (instance unknown" in _problem(_progress(inst), inst, tmp_path, min_lsn=Lsn.zero())


def test_resume_is_refused_when_table_instance_or_files_changed(tmp_path):
    inst = instance([col("id", 1), col("v", 2)], ["id"])
    progress = _progress(inst, ManifestFile("part-00000.parquet", 3, 10))
    assert "missing" in _problem(progress, inst, tmp_path)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "part-00000.parquet").write_bytes(b"x" * 9)
    assert "another size" in _problem(progress, inst, tmp_path)
    widened = instance([col("id", 1), col("v", 2, "bigint")], ["id"])
    assert "columns" in _problem(_progress(inst), widened, tmp_path)
    recreated = CaptureInstance("dbo_t", "dbo", "t", SNAP, columns=inst.columns, key_columns=("id",))
    assert "re-created" in _problem(_progress(inst), recreated, tmp_path)
    other = _progress(inst)
    other.source["database"] = "elsewhere"
    assert "another source" in _problem(other, inst, tmp_path)


def test_snapshot_manifest_is_a_valid_window_manifest_of_inserts(tmp_path):
    from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_manifest
    from airflow_provider_sqlserver_cdc.window.manifest import WindowManifest, validate_manifest

    inst = instance([col("id", 1), col("v", 2)], ["id"])
    progress = _progress(inst, ManifestFile("part-00000.parquet", 3, 10))
    manifest = snapshot_manifest(progress, key_columns=["id"], dag_id="d", run_id="r")
    data = manifest.to_dict()
    validate_manifest(data)
    assert WindowManifest.from_dict(data) == manifest
    assert (data["kind"], data["mode"]) == ("snapshot", "snapshot")
    assert (data["from_lsn"], data["to_lsn"]) == (Lsn.zero().hex, SNAP.hex)
    assert data["operation_counts"] == {"delete": 0, "insert": 3, "update_before": 0, "update_after": 0}
    assert data["key_columns"] == ["id"] and data["files"] == [
        {"path": "part-00000.parquet", "rows": 3, "bytes": 10}
    ]
    assert data["to_time"] == progress.snapshot_time and data["source"] == SOURCE
