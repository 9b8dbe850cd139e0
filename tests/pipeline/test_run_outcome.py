"""The run's last task: which task instances failed, and the message naming each capture instance (issue 36).

The merge's failure record is made by the real operator, spark-submit being the edge that stands in
(run for real in tests/operators/test_partial_merge_dag.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from airflow.exceptions import AirflowException

from airflow_provider_sqlserver_cdc.operators.failure_record import (
    FAILURE_XCOM_KEY,
    MAX_INSTANCE_MESSAGE_CHARS,
    record_failure,
    scrub,
)
from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator
from airflow_provider_sqlserver_cdc.pipeline.run_outcome import (
    GENERIC_REMEDY,
    MERGE_REMEDY,
    failed_task_instances,
    failure_lines,
    outcome_message,
)
from airflow_provider_sqlserver_cdc.spark.merge.result_file import MergeResult
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

WATCHED = ["plan", "snapshot", "wait_for_capture", "extract", "ct_extract", "merge", "commit_watermarks"]


def test_failed_task_instances_parse_map_indexes_and_keep_the_watched_order():
    states = {
        "plan": "success",
        "extract_0": "success",
        "extract_2": "failed",
        "ct_extract_1": "upstream_failed",
        "wait_for_capture_1": "failed",
        "extract_1": "upstream_failed",
        "merge": "success",
        "extract_list": "failed",  # not watched
    }
    assert failed_task_instances(states, WATCHED) == [
        ("wait_for_capture", 1, "failed"),
        ("extract", 1, "upstream_failed"),
        ("extract", 2, "failed"),
        ("ct_extract", 1, "upstream_failed"),
    ]


def test_each_failed_capture_instance_is_named_once_with_its_error_and_remedy():
    failed = [("wait_for_capture", 1, "failed"), ("extract", 1, "upstream_failed"), ("extract", 2, "failed")]
    records = {
        ("extract", 2): {
            "capture_instances": ["dbo_customers"],
            "error": "RetentionGapError",
            "message": "Retention gap in capture instance 'dbo_customers'",
        }
    }
    names = {
        ("wait_for_capture", 1): "dbo_orders",
        ("extract", 1): "dbo_orders",
        ("extract", 2): "dbo_customers",
    }
    lines = failure_lines(failed, records, names)
    assert lines[0] == "dbo_orders: wait_for_capture[1] is failed; its task log says why"
    assert len(lines) == 2  # extract[1] is the same capture instance
    assert lines[1].startswith("dbo_customers: extract[2] failed with RetentionGapError: Retention gap")
    assert '{"resnapshot": ["dbo_customers"]}' in lines[1]
    message = outcome_message(lines, ["dbo_type_zoo"])
    assert "dbo_customers" in message and "merged and their watermarks committed: dbo_type_zoo" in message


def test_a_task_without_a_capture_instance_is_named_by_its_id():
    assert failure_lines([("merge", None, "failed")], {}, {}) == ["merge is failed; its task log says why"]


def test_tasks_that_did_not_run_because_of_a_listed_failure_are_left_out():
    failed = [("ct_snapshot", None, "upstream_failed"), ("ct_plan", None, "failed")]
    assert failure_lines(failed, {}, {}) == ["ct_plan is failed; its task log says why"]


def test_a_merge_record_gives_a_line_per_failed_capture_instance_with_its_table_error():
    record = {
        "capture_instances": ["dbo_bad", "dbo_worse"],
        "error": "TablesNotMergedError",
        "message": "merge: the merge failed for target table(s) lake.cdc.dbo_bad, lake.cdc.dbo_worse; ...",
        "errors": {
            "dbo_bad": "lake.cdc.dbo_bad: key columns differ",
            "dbo_worse": "lake.cdc.dbo_worse: MERGE failed",
        },
        "kind": "merge",
    }
    lines = failure_lines([("merge", None, "failed")], {("merge", None): record}, {})
    assert lines == [
        "dbo_bad: merge failed with TablesNotMergedError: lake.cdc.dbo_bad: key columns differ -> "
        + MERGE_REMEDY.format(name="dbo_bad"),
        "dbo_worse: merge failed with TablesNotMergedError: lake.cdc.dbo_worse: MERGE failed -> "
        + MERGE_REMEDY.format(name="dbo_worse"),
    ]
    # The merge's remedy, not the extract's (no missed changes to heal: the watermark stayed).
    assert lines[0].endswith(
        "-> The watermark of dbo_bad did not advance: fix what the message says, then clear the failed merge "
        "of this run and its downstream tasks (the tables that committed skip the windows they hold; those of "
        "dbo_bad are merged again), or let the next run extract and merge dbo_bad again from the watermark"
    )
    message = outcome_message(lines, ["dbo_good"])
    assert message.splitlines()[1].startswith("- dbo_bad: merge failed with TablesNotMergedError")
    assert message.endswith("merged and their watermarks committed: dbo_good.")


def test_a_merge_that_failed_as_a_whole_names_its_capture_instances_on_one_line():
    record = {
        "capture_instances": ["dbo_a", "dbo_b"],
        "error": "AirflowException",
        "message": "Cannot execute: spark-submit. Error code is: 1.",
        "kind": "merge",
    }
    assert failure_lines([("eu.merge", None, "failed")], {("eu.merge", None): record}, {}) == [
        "dbo_a, dbo_b: eu.merge failed with AirflowException: Cannot execute: spark-submit. Error code is: 1. -> "
        + MERGE_REMEDY.format(name="dbo_a, dbo_b")
    ]
    # Windows given as bare manifest URIs name no capture instance: the line names the task.
    nameless = {**record, "capture_instances": [], "error": "ValueError", "message": "merge: no windows"}
    assert failure_lines([("merge", None, "failed")], {("merge", None): nameless}, {}) == [
        "merge failed with ValueError: merge: no windows -> "
        + MERGE_REMEDY.format(name="its capture instances")
    ]


def test_a_capture_instance_named_by_an_earlier_record_is_not_named_again():
    failed = [("snapshot", None, "failed"), ("extract", 0, "upstream_failed"), ("extract", 1, "failed")]
    records = {
        ("snapshot", None): {
            "capture_instances": ["dbo_a", "dbo_b"],
            "error": "OSError",
            "message": "disk full",
        },
        ("extract", 1): {"capture_instances": ["dbo_b"], "error": "OSError", "message": "disk full"},
    }
    lines = failure_lines(failed, records, {("extract", 0): "dbo_a", ("extract", 1): "dbo_b"})
    assert lines == [
        "dbo_a, dbo_b: snapshot failed with OSError: disk full -> "
        + GENERIC_REMEDY.format(name="dbo_a, dbo_b")
    ]


class _TaskInstance:
    """The merge's XCom: the windows its extract task returned, and what it pushes."""

    dag_id, task_id, run_id, try_number = "dag", "merge", "manual__2026-01-01T00:00:00+00:00", 1

    def __init__(self, windows: list[dict[str, Any]]) -> None:
        self.windows = windows
        self.pushed: dict[str, Any] = {}

    def xcom_pull(self, task_ids: Any) -> Any:
        return self.windows

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def _window(staging: Path, capture_instance: str) -> dict[str, Any]:
    directory = staging / capture_instance / "w1"
    source = {"server": "s", "database": "d", "schema": "dbo", "table": capture_instance[4:]}
    lsn = "0x" + "0" * 19
    return ChangeWindow(
        capture_instance, source, "changes", "interval", lsn + "1", lsn + "2", str(directory),
        f"{directory}/_manifest.json", f"k_{capture_instance}",
    ).to_xcom()  # fmt: skip


def _spark_submit(monkeypatch: pytest.MonkeyPatch, result: dict[str, Any] | None, error: str) -> None:
    """Stand in for spark-submit (the edge): write ``result`` as the job's result file, then fail with ``error``."""

    def execute(operator: Any, context: Any) -> None:
        arguments = list(operator.application_args)
        uri = Path(arguments[arguments.index("--result-uri") + 1])
        if result is not None:
            uri.parent.mkdir(parents=True, exist_ok=True)
            uri.write_text(MergeResult.from_summary(result, seconds=1.0).to_json())
        raise AirflowException(error)

    monkeypatch.setattr(
        "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator.execute", execute
    )


def test_the_merge_records_its_failed_tables_capture_instances_and_run_outcome_names_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    windows = [_window(tmp_path, name) for name in ("dbo_good", "dbo_bad", "dbo_gone")]
    result = {
        "lake.cdc.dbo_good": {"status": "committed", "applied": ["dbo_good 0x1_0x2"]},
        "lake.cdc.dbo_bad": {
            "status": "failed",
            "failed_windows": ["dbo_bad 0x1_0x2"],
            "error": "key columns differ: (id) in the table, (name) in window 0x1_0x2",
        },
        # dbo_gone: in no table of the result (the job never got to it).
    }
    _spark_submit(monkeypatch, result, "Cannot execute: spark-submit. Error code is: 2.")
    ti = _TaskInstance(windows)
    operator = CdcSparkMergeOperator(task_id="merge", extract_task_ids="extract", namespace="lake.cdc")
    with pytest.raises(AirflowException, match="failed for target table"):
        operator.execute({"ti": ti})
    record = ti.pushed[FAILURE_XCOM_KEY]
    assert record["capture_instances"] == ["dbo_bad", "dbo_gone"]
    assert record["errors"] == {
        "dbo_bad": "lake.cdc.dbo_bad: key columns differ: (id) in the table, (name) in window 0x1_0x2",
        "dbo_gone": "no target table of the merge job's result holds it; see the job log",
    }
    assert (record["error"], record["kind"]) == ("TablesNotMergedError", "merge")
    assert record["message"].startswith("merge: the merge failed for target table(s) lake.cdc.dbo_bad;")
    # What run_outcome makes of it: a line per capture instance whose windows were not committed.
    lines = failure_lines([("merge", None, "failed")], {("merge", None): record}, {})
    assert [line.split(" -> ")[0] for line in lines] == [
        "dbo_bad: merge failed with TablesNotMergedError: lake.cdc.dbo_bad: key columns differ: (id) in the "
        "table, (name) in window 0x1_0x2",
        "dbo_gone: merge failed with TablesNotMergedError: no target table of the merge job's result holds it; "
        "see the job log",
    ]


def test_a_merge_that_failed_as_a_whole_records_every_window_capture_instance_without_the_password(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = "s3cret-Pa55"
    target = {
        "conn_type": "postgres",
        "host": "pg",
        "schema": "reporting",
        "login": "replicator",
        "password": secret,
    }
    monkeypatch.setenv("AIRFLOW_CONN_PG_TARGET", json.dumps(target))
    windows = [_window(tmp_path, name) for name in ("dbo_a", "dbo_b")]
    # A failure that echoes the login (as a careless driver might): the record keeps it out.
    _spark_submit(
        monkeypatch, None, f"Cannot execute: spark-submit (login replicator/{secret}). Error code is: 1."
    )
    ti = _TaskInstance([*windows, windows[0]])
    operator = CdcSparkMergeOperator(
        task_id="merge", extract_task_ids="extract", namespace="reporting", target_kind="postgres",
        target_conn_id="pg_target", jars="/usr/share/java/postgresql.jar",
    )  # fmt: skip
    with pytest.raises(AirflowException, match="Error code is: 1"):
        operator.execute({"ti": ti})
    assert ti.pushed == {
        FAILURE_XCOM_KEY: {
            "capture_instances": ["dbo_a", "dbo_b"],
            "error": "AirflowException",
            "message": "Cannot execute: spark-submit (login replicator/***). Error code is: 1.",
            "kind": "merge",
        }
    }
    assert secret not in repr(ti.pushed)


def test_a_skipped_merge_records_no_failure(tmp_path: Path) -> None:
    ti = _TaskInstance([])
    operator = CdcSparkMergeOperator(
        task_id="merge", extract_task_ids="extract", namespace="lake.cdc", skip_without_windows=True
    )
    with pytest.raises(Exception, match="no window to merge"):
        operator.execute({"ti": ti})
    assert ti.pushed == {}


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        (
            "jdbc:postgresql://pg/db?user=u&password=p4ss&ssl=true",
            "jdbc:postgresql://pg/db?user=u&password=***&ssl=true",
        ),
        ("DRIVER={FreeTDS};UID=sa;PWD={a;b}}c};SERVER=db", "DRIVER={FreeTDS};UID=sa;PWD=***;SERVER=db"),
        ("postgresql://bob:hunter2@pg:5432/db refused", "postgresql://bob:***@pg:5432/db refused"),
        ("password authentication failed for user bob", "password authentication failed for user bob"),
    ],
)
def test_failure_messages_are_scrubbed_of_passwords(text: str, scrubbed: str) -> None:
    assert scrub(text) == scrubbed


def test_the_record_cuts_each_capture_instance_message_and_scrubs_known_secrets() -> None:
    ti = _TaskInstance([])
    errors = {"dbo_a": "x" * 5000, "dbo_b": "login with topsecret refused"}
    record_failure(
        {"ti": ti}, ["dbo_a", "dbo_b"], RuntimeError("topsecret"), errors=errors, secrets=["topsecret"]
    )
    record = ti.pushed[FAILURE_XCOM_KEY]
    assert len(record["errors"]["dbo_a"]) == MAX_INSTANCE_MESSAGE_CHARS
    assert (record["errors"]["dbo_b"], record["message"]) == ("login with *** refused", "***")
    assert "kind" not in record  # a window task's record: the generic remedies
