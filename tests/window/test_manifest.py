"""The window manifest: its one validation, its JSON form, writing and reading it, and window references."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pyarrow.fs as pafs
import pytest
from manifest_columns import int_key_column

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.manifest_store import read_manifest, write_manifest
from airflow_provider_sqlserver_cdc.window.manifest import (
    ManifestError,
    ManifestFile,
    WindowManifest,
    build_manifest,
    manifest_uri,
    validate_manifest,
)


def manifest(**over: Any) -> WindowManifest:
    values = dict(
        kind="changes",
        capture_instance="dbo_orders",
        source={"server": "h:1433", "database": "shop", "schema": "dbo", "table": "orders"},
        from_lsn="0x0000002A000001F00003",
        to_lsn="0x0000002A000001F00009",
        from_time="2026-01-01T10:00:00+00:00",
        to_time="2026-01-01T11:00:00+00:00",
        mode="interval",
        row_filter_option="all update old",
        key_columns=["order_id"],
        columns=[int_key_column("order_id")],
        files=[ManifestFile("part-00000.parquet", 3, 100)],
        row_count=3,
        operation_counts={"delete": 1, "insert": 2, "update_before": 0, "update_after": 0},
    )
    values.update(over)
    return WindowManifest(**values)


def test_round_trip_and_key_order(tmp_path):
    fs = pafs.LocalFileSystem()
    path = write_manifest(fs, str(tmp_path), manifest(dag_id="d", run_id="r"))
    with open(path) as f:
        data = json.load(f)
    assert list(data)[:3] == ["format_version", "kind", "capture_instance"]
    assert data["files"] == [{"path": "part-00000.parquet", "rows": 3, "bytes": 100}]
    assert read_manifest(fs, str(tmp_path)) == manifest(dag_id="d", run_id="r")
    assert [p.name for p in tmp_path.iterdir()] == ["_manifest.json"]  # no temporary left behind


def test_empty_window_manifest_is_valid():
    m = manifest(
        files=[],
        row_count=0,
        operation_counts={"delete": 0, "insert": 0, "update_before": 0, "update_after": 0},
    )
    assert WindowManifest.from_json(m.to_json()) == m


def document(**changes: Any) -> dict[str, Any]:
    """The JSON object of ``manifest()`` with some fields replaced."""
    return {**manifest().to_dict(), **changes}


#: Invalid manifests and the words of the error that names the problem (reading and writing alike).
INVALID_MANIFESTS = [
    ({"format_version": 2}, "format_version is 2"),
    ({"kind": "delta"}, "kind is 'delta'"),
    ({"to_lsn": "0x12"}, "to_lsn '0x12' is not an LSN"),
    ({"from_lsn": "0x0000002A000001F0000A"}, "from_lsn is above to_lsn"),
    ({"key_columns": []}, "capture instance dbo_orders has no key columns"),
    ({"key_columns": ["nope"]}, "key column 'nope' is not among the columns"),
    ({"row_count": 4}, "row_count is 4 but the files list 3 rows"),
    ({"files": [{"path": "../x.parquet", "rows": 3}]}, "must be relative"),
    ({"mode": "sometimes"}, "mode is 'sometimes'"),
    ({"columns": [{"name": "_cdc_deleted", "sql_type": "bit"}]}, "reserved _cdc_ prefix"),
    (
        {"operation_counts": {"delete": 0, "insert": 0, "update_before": 0, "update_after": 0}},
        "operation_counts",
    ),
]


@pytest.mark.parametrize(("changes", "message"), INVALID_MANIFESTS)
def test_manifest_validation_names_the_problem(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match=re.escape(message)) as caught:
        WindowManifest.from_json(
            json.dumps(document(**changes)), "/w/dbo_orders/x/_manifest.json", key_required=True
        )
    assert "/w/dbo_orders/x/_manifest.json" in str(caught.value)
    assert "re-run the extract task" in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "message"), [case for case in INVALID_MANIFESTS if case[0] != {"key_columns": []}]
)
def test_invalid_manifests_are_not_written(tmp_path, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match=re.escape(message)):
        write_manifest(pafs.LocalFileSystem(), str(tmp_path), manifest(**changes))
    assert not list(tmp_path.iterdir())


def test_keyless_windows_are_valid_unless_a_key_is_required() -> None:
    assert WindowManifest.from_dict(document(key_columns=[])).key_columns == []


def test_missing_fields_are_named() -> None:
    data = document()
    del data["mode"], data["operation_counts"]
    with pytest.raises(ManifestError, match="lacks fields: mode, operation_counts"):
        WindowManifest.from_dict(data)


def test_file_sizes_are_optional_and_unknown_fields_ignored() -> None:
    data = document(files=[{"path": "part-00000.parquet", "rows": 3}], written_by="a newer extractor")
    assert WindowManifest.from_dict(data).files == [ManifestFile("part-00000.parquet", 3, -1)]


def test_label_and_lsn_range() -> None:
    changes = manifest()
    assert changes.label == "dbo_orders 0x0000002A000001F00003_0x0000002A000001F00009"
    assert changes.lsn_range == (0x2A000001F00003, 0x2A000001F00009)
    assert manifest(kind="snapshot", mode="snapshot").lsn_range == (0, 0x2A000001F00009)


def test_manifest_uri_of_a_window_directory() -> None:
    assert manifest_uri("s3a://b/w/x/") == "s3a://b/w/x/_manifest.json"
    assert manifest_uri(" /w/x/_manifest.json ") == "/w/x/_manifest.json"


def _built(kind: str, **over: Any) -> WindowManifest:
    m = manifest()
    values: dict[str, Any] = dict(
        capture_instance=m.capture_instance,
        source=m.source,
        to_lsn=Lsn.from_hex(m.to_lsn),
        key_columns=("order_id",),
        columns=m.columns,
        files=m.files,
        dag_id="d",
        run_id="r",
    )
    values.update(over)
    return build_manifest(kind, **values)


def test_the_builder_fills_what_every_producer_filled_by_hand():
    changes = _built(
        "changes",
        from_lsn=Lsn.from_hex("0x0000002A000001F00003"),
        from_time=datetime(2026, 1, 1, 10, tzinfo=UTC),
        to_time=datetime(2026, 1, 1, 11, tzinfo=UTC),
        mode="interval",
        row_filter_option="all update old",
        operation_counts={"delete": 1, "insert": 2, "update_before": 0, "update_after": 0},
        applied_through="0x0000002A000001F00001",
    )
    assert changes.created_at is not None
    assert changes == manifest(
        dag_id="d", run_id="r", applied_through="0x0000002A000001F00001", created_at=changes.created_at
    )
    validate_manifest(changes.to_dict())
    # A snapshot covers 0x0..its LSN in mode snapshot, every row of its files an insert.
    snapshot = _built("snapshot", to_time="2026-01-01T11:00:00+00:00")
    assert (snapshot.from_lsn, snapshot.mode, snapshot.row_filter_option) == (
        Lsn.zero().hex,
        "snapshot",
        "all",
    )
    assert (snapshot.row_count, snapshot.operation_counts["insert"], snapshot.from_time) == (3, 3, None)
    validate_manifest(snapshot.to_dict())


def test_the_builder_refuses_what_the_format_does_not_hold():
    with pytest.raises(ValueError, match="a snapshot window covers"):
        _built("snapshot", mode="interval")
    with pytest.raises(ValueError, match="needs from_lsn"):
        _built("changes", mode="interval")
    with pytest.raises(ValueError, match="kind must be one of"):
        _built("copy")
    with pytest.raises(TypeError, match="unknown manifest fields: rows"):
        _built("snapshot", rows=3)
