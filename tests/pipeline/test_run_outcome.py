"""The run's last task: which task instances failed, and the message naming each capture instance (issue 36)."""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.pipeline.run_outcome import (
    failed_task_instances,
    failure_lines,
    outcome_message,
)

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
