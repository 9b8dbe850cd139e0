"""The merge job's result file: one format for the job that writes it and the operator that reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_sqlserver_cdc.spark.merge.published_files import create_new, read_text, write_text
from airflow_provider_sqlserver_cdc.spark.merge.result_file import (
    MergeResult,
    ResultFileError,
    result_file_uri,
    window_base,
)
from airflow_provider_sqlserver_cdc.staging_files import read_text as read_from_airflow
from airflow_provider_sqlserver_cdc.staging_files import remove

SUMMARY = {
    "lake.cdc.dbo_orders": {
        "status": "committed",
        "applied": ["dbo_orders 0x1_0x2"],
        "skipped": [],
        "applied_lsn_ranges": {"dbo_orders": "0x00000000000000000001-0x00000000000000000002"},
        "max_applied_lsn": {"dbo_orders": "0x00000000000000000002"},
        "rows": {"insert": 3, "update_after": 1, "update_before": 1, "delete": 0},
        "snapshot_id": 7654321,
        "seconds": 2.5,
    },
    "lake.cdc.dbo_bad": {
        "status": "failed",
        "failed_windows": ["dbo_bad 0x1_0x2"],
        "error": "schema refused",
    },
}


def test_the_result_round_trips_and_answers_per_table() -> None:
    result = MergeResult.from_summary(SUMMARY, seconds=3.0, application_id="app-7")
    read = MergeResult.from_json(result.to_json(), "x.json")
    assert read == result
    orders = read.tables["lake.cdc.dbo_orders"]
    assert (orders.committed, orders.snapshot_id, orders.rows["insert"], orders.seconds) == (
        True,
        7654321,
        3,
        2.5,
    )
    assert [t.table for t in read.failed()] == ["lake.cdc.dbo_bad"]
    assert read.tables["lake.cdc.dbo_bad"].error == "schema refused"
    assert read.applied_lsn_ranges() == {"dbo_orders": "0x00000000000000000001-0x00000000000000000002"}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{cut", "is not JSON"),
        ('{"format_version": 9, "tables": {}}', "format_version 9; this provider reads 1"),
        ('{"format_version": 1, "tables": [1]}', "no 'tables' object"),
    ],
)
def test_an_unreadable_result_file_says_which_and_why(text: str, match: str) -> None:
    with pytest.raises(ResultFileError, match=match) as raised:
        MergeResult.from_json(text, "s3://b/staging/_merge_results/r.json")
    assert "s3://b/staging/_merge_results/r.json" in str(raised.value)


def test_result_files_go_under_the_windows_staging_path() -> None:
    assert window_base("s3a://b/staging/dbo_orders/0x1_0x2/_manifest.json") == "s3a://b/staging"
    assert window_base("/data/staging/dbo_orders/0x1_0x2/_manifest.json") == "/data/staging"
    with pytest.raises(ResultFileError, match="pass result_path"):
        window_base("_manifest.json")
    uri = result_file_uri(
        "s3a://b/staging/", "my dag", "merge", "scheduled__2026-01-01T00:00:00+00:00", "try1"
    )
    assert uri.startswith(
        "s3a://b/staging/_merge_results/my_dag__merge__scheduled__2026-01-01T00_00_00_00_00__try1__"
    )
    assert uri.endswith(".json")
    assert uri != result_file_uri(
        "s3a://b/staging/", "my dag", "merge", "scheduled__2026-01-01T00:00:00+00:00", "try1"
    )


def test_local_files_are_written_whole_and_read_from_both_sides(tmp_path: Path) -> None:
    uri = str(tmp_path / "staging" / "_merge_results" / "r.json")
    write_text(None, uri, "first")  # type: ignore[arg-type] - local paths need no Spark session
    write_text(None, uri, "second")  # type: ignore[arg-type]
    assert read_text(None, uri) == "second"  # type: ignore[arg-type]
    assert read_from_airflow(uri) == "second"
    assert read_from_airflow(f"file://{uri}") == "second"
    assert sorted(p.name for p in (tmp_path / "staging" / "_merge_results").iterdir()) == [
        "r.json"
    ]  # no leftovers
    remove(uri)
    assert read_from_airflow(uri) is None
    remove(uri)  # gone already: nothing to do
    lock = str(tmp_path / "lock.json")
    assert create_new(None, lock, "a")  # type: ignore[arg-type]
    assert not create_new(None, lock, "b")  # type: ignore[arg-type]
    assert Path(lock).read_text() == "a"
