from __future__ import annotations

import json

import pyarrow.fs as pafs
import pytest

from airflow_provider_sqlserver_cdc.parquet.manifest import (
    ManifestError,
    ManifestFile,
    WindowManifest,
    read_manifest,
    write_manifest,
)


def manifest(**over):
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
        columns=[
            {
                "name": "order_id",
                "ordinal": 1,
                "sql_type": "int",
                "max_length": 4,
                "precision": 10,
                "scale": 0,
                "nullable": False,
                "arrow_type": "int32",
            }
        ],
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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"row_count": 4}, "row_count"),
        ({"from_lsn": "0x12"}, "from_lsn"),
        ({"kind": "delta"}, "kind"),
        ({"from_lsn": "0x0000002A000001F0000A"}, "above to_lsn"),
        ({"files": [ManifestFile("../x.parquet", 3, 1)]}, "Bad file entry"),
        (
            {"operation_counts": {"delete": 0, "insert": 0, "update_before": 0, "update_after": 0}},
            "operation_counts",
        ),
    ],
)
def test_invalid_manifests_are_refused(tmp_path, change, message):
    with pytest.raises(ManifestError, match=message):
        write_manifest(pafs.LocalFileSystem(), str(tmp_path), manifest(**change))
    assert not list(tmp_path.iterdir())


def test_empty_window_manifest_is_valid():
    m = manifest(
        files=[],
        row_count=0,
        operation_counts={"delete": 0, "insert": 0, "update_before": 0, "update_after": 0},
    )
    assert WindowManifest.from_json(m.to_json()) == m
