"""The job's result line and exit code: what spark-submit's output tells about committed and failed tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.spark.merge import job
from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError, TableMergeError
from airflow_provider_sqlserver_cdc.spark.merge.result_file import MergeResult
from airflow_provider_sqlserver_cdc.spark.merge.result_line import (
    COMMITTED,
    FAILED,
    RESULT_MARKER,
    parse_result_line,
    result_line,
)

RESULT = {
    "lake.cdc.good": {"status": "committed", "applied": ["dbo_good 0x1_0x2"], "skipped": []},
    "lake.cdc.bad": {"status": "failed", "error": "target table lake.cdc.bad: column name is string ..."},
}


def test_result_line_round_trips_after_a_log_prefix() -> None:
    line = result_line(RESULT)
    assert line.startswith(RESULT_MARKER + " ")
    assert parse_result_line(f"25/11/25 00:40:00 INFO stdout: {line}") == RESULT
    assert sorted(entry["status"] for entry in parse_result_line(line).values()) == [COMMITTED, FAILED]


@pytest.mark.parametrize(
    "line", ["INFO nothing here", f"{RESULT_MARKER} {{cut short", f"{RESULT_MARKER} [1]"]
)
def test_other_lines_are_no_result(line: str) -> None:
    assert parse_result_line(line) is None


class _FakeContext:
    applicationId = "app-1"


class _FakeSession:
    stopped = False
    sparkContext = _FakeContext()

    def stop(self) -> None:
        self.stopped = True


def test_main_prints_and_writes_the_result_and_exits_non_zero_naming_the_failed_tables(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    session = _FakeSession()
    monkeypatch.setattr("pyspark.sql.SparkSession.Builder.getOrCreate", lambda self: session)
    cause = SchemaEvolutionError("target table lake.cdc.bad: column name is string ...")
    failure = TableMergeError(
        "the merge failed for 1 of 2 target table(s): lake.cdc.bad", RESULT, {"lake.cdc.bad": cause}
    )

    def failing_run(spark: Any, settings: Any) -> dict[str, Any]:
        raise failure

    monkeypatch.setattr(job, "run", failing_run)
    uri = str(tmp_path / "staging" / "_merge_results" / "run.json")
    assert job.main(["--manifest", "/w/a", "--namespace", "lake.cdc", "--result-uri", uri]) == 2
    out, err = capsys.readouterr()
    results = [parse_result_line(line) for line in out.splitlines() if RESULT_MARKER in line]
    assert results == [RESULT]
    assert "ERROR: the merge failed for 1 of 2 target table(s): lake.cdc.bad" in err
    assert session.stopped
    # The result file holds the same, for the operator to read in any deploy mode.
    written = MergeResult.from_json(Path(uri).read_text(), uri)
    assert written.summary()["lake.cdc.bad"]["error"] == RESULT["lake.cdc.bad"]["error"]
    assert [t.table for t in written.failed()] == ["lake.cdc.bad"]
    assert written.application_id == "app-1"

    monkeypatch.setattr(job, "run", lambda spark, settings: {"lake.cdc.good": RESULT["lake.cdc.good"]})
    assert job.main(["--manifest", "/w/a", "--namespace", "lake.cdc"]) == 0
    out, _ = capsys.readouterr()
    assert [parse_result_line(line) for line in out.splitlines() if RESULT_MARKER in line] == [
        {"lake.cdc.good": RESULT["lake.cdc.good"]}
    ]
