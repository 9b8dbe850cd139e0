"""The test cluster's daemons are stopped whatever happens, and a daemon that does not start says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_sqlserver_cdc.testing.spark_standalone import (
    SparkStandaloneError,
    java_missing,
    spark_standalone_cluster,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def processes_using(directory: Path) -> list[str]:
    """Command lines of the running processes that name ``directory`` (the daemons' configuration dir)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if str(directory) in text:
            found.append(text)
    return found


def test_a_worker_that_does_not_start_fails_with_its_log_and_the_master_is_stopped(tmp_path: Path) -> None:
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    with (
        pytest.raises(
            SparkStandaloneError, match=r"the Spark worker did not start \(exited with \d+\)"
        ) as raised,
        spark_standalone_cluster(tmp_path, worker_memory="lots"),
    ):
        pytest.fail("the worker cannot start with --memory lots")
    assert str(tmp_path / "worker.log") in str(raised.value)
    assert "Usage: Worker" in str(raised.value)  # the end of the worker's log: it refused its options
    assert processes_using(tmp_path) == []
    assert "RECEIVED SIGNAL TERM" in (tmp_path / "master.log").read_text()
