"""CdcSparkMergeOperator and plain SparkSubmitOperator usage of the merge job, up to a real dag.test() run."""

from __future__ import annotations

import decimal
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from airflow.exceptions import AirflowException
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_sqlserver_cdc.operators.committed_windows import (
    committed_windows,
    uncommitted_instances,
)
from airflow_provider_sqlserver_cdc.operators.spark_merge import (
    CdcSparkMergeOperator,
    merge_job_arguments,
    window_manifest_uris,
)
from airflow_provider_sqlserver_cdc.operators.watermark import WatermarkCommitOperator
from airflow_provider_sqlserver_cdc.spark import MERGE_JOB_PATH, merge_job_py_files
from airflow_provider_sqlserver_cdc.spark.merge.result_file import MergeResult
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar, iceberg_spark_conf
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow, ChangeWindowError

SPARK_TESTS = Path(__file__).resolve().parents[1] / "spark"
sys.path.insert(0, str(SPARK_TESTS))

import window_builder  # noqa: E402


def test_arguments_for_the_job() -> None:
    arguments = merge_job_arguments(
        ["/w/a/_manifest.json", "/w/b/_manifest.json"],
        namespace="lake.cdc",
        targets={"dbo_orders": "lake.sales.orders"},
        delete_mode="hard",
    )
    assert arguments == [
        "--manifest",
        "/w/a/_manifest.json",
        "--manifest",
        "/w/b/_manifest.json",
        "--namespace",
        "lake.cdc",
        "--target",
        "dbo_orders=lake.sales.orders",
        "--delete-mode",
        "hard",
        "--write-mode",
        "merge-on-read",
    ]


def test_arguments_pass_table_properties_checked_as_the_job_checks_them() -> None:
    arguments = merge_job_arguments(["/w/a"], properties={"write.target-file-size-bytes": "134217728"})
    assert arguments[-2:] == ["--table-property", "write.target-file-size-bytes=134217728"]
    with pytest.raises(ValueError, match="set by the merge job itself"):
        merge_job_arguments(["/w/a"], properties={"write.merge.mode": "copy-on-write"})


def test_arguments_pass_the_merge_strategy_and_refuse_an_unknown_one() -> None:
    assert "--merge-strategy" not in merge_job_arguments(["/w/a"])  # auto: the job's default
    assert merge_job_arguments(["/w/a"], merge_strategy="rewrite")[-2:] == ["--merge-strategy", "rewrite"]
    with pytest.raises(ValueError, match=r"merge_strategy must be one of \('auto', 'merge', 'rewrite'\)"):
        merge_job_arguments(["/w/a"], merge_strategy="fastest")
    assert "merge_strategy" in CdcSparkMergeOperator.template_fields


def test_arguments_refuse_credentials_in_uris() -> None:
    with pytest.raises(ValueError, match="carries credentials") as caught:
        merge_job_arguments(["s3a://AKIA:s3cr3t@bucket/w/_manifest.json"])
    assert "s3cr3t" not in str(caught.value)


def test_operator_settings_are_checked_without_io() -> None:
    with pytest.raises(ValueError, match="pass extract_task_ids"):
        CdcSparkMergeOperator(task_id="merge", namespace="lake.cdc")
    with pytest.raises(ValueError, match="delete_mode must be one of"):
        CdcSparkMergeOperator(task_id="merge", extract_task_ids="extract", delete_mode="purge")
    operator = CdcSparkMergeOperator(task_id="merge", extract_task_ids="extract", namespace="lake.cdc")
    assert operator.application == MERGE_JOB_PATH
    assert {"application_args", "namespace", "windows", "targets", "table_properties", "conf"} <= set(
        operator.template_fields
    )


def _window(capture_instance: str, window_uri: str) -> ChangeWindow:
    lsn = "0x" + "0" * 19
    source = {"server": "s", "database": "d", "schema": "dbo", "table": capture_instance[4:]}
    return ChangeWindow(
        capture_instance,
        source,
        "changes",
        "interval",
        lsn + "1",
        lsn + "2",
        window_uri,
        f"{window_uri}/_manifest.json",
        f"k_{capture_instance}",
    )


def test_manifest_uris_from_change_windows_uris_and_mapped_results() -> None:
    window = _window("dbo_a", "/w/a")
    mapped = (item for item in [window.to_xcom(), None, "s3a://b/w/b/"])  # lazy, as mapped XComs are
    assert window_manifest_uris([json.dumps(window.to_xcom()), mapped]) == [
        "/w/a/_manifest.json",
        "s3a://b/w/b/_manifest.json",
    ]
    # A window object is read as the watermark operator reads it: a bare or partial dict is refused.
    with pytest.raises(ChangeWindowError, match="Not a change window"):
        window_manifest_uris({"capture_instance": "dbo_a", "manifest_uri": "/w/a/_manifest.json"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/w/dbo_t/0x1_0x2/_manifest.json", ["/w/dbo_t/0x1_0x2/_manifest.json"]),
        ("s3a://b/w/dbo_t/0x1_0x2/", ["s3a://b/w/dbo_t/0x1_0x2/_manifest.json"]),
        (
            '["/w/a", "/w/b/_manifest.json", "/w/a"]',
            ["/w/a/_manifest.json", "/w/b/_manifest.json"],
        ),
        ([None, ["/w/c/_manifest.json"]], ["/w/c/_manifest.json"]),
    ],
)
def test_manifest_uris_accept_xcom_shapes(value: Any, expected: list[str]) -> None:
    assert window_manifest_uris(value) == expected


class _FakeTaskInstance:
    """Stands in for the task instance's XCom only; the pulled value is what extract returns."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.asked: Any = None
        self.pushed: dict[str, Any] = {}

    def xcom_pull(self, task_ids: Any) -> Any:
        self.asked = task_ids
        return self.value

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_execute_builds_arguments_from_the_extract_xcom(monkeypatch: pytest.MonkeyPatch) -> None:
    submitted: list[list[str]] = []
    # The edge: spark-submit itself (run for real in the dag.test() below).
    monkeypatch.setattr(
        "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator.execute",
        lambda self, context: submitted.append(list(self.application_args)),
    )
    xcom = iter([_window("dbo_a", "/w/a").to_xcom(), "/w/b"])
    ti = _FakeTaskInstance(xcom)
    operator = CdcSparkMergeOperator(task_id="merge", extract_task_ids="extract", namespace="lake.cdc")
    assert operator.execute({"ti": ti}) == ["/w/a/_manifest.json", "/w/b/_manifest.json"]
    assert ti.asked == "extract"
    assert submitted[0][:4] == ["--manifest", "/w/a/_manifest.json", "--manifest", "/w/b/_manifest.json"]
    assert operator.py_files == merge_job_py_files()  # the job's modules, built at execute time
    # The windows go on to the watermark as read (ChangeWindow), the bare manifest URI does not.
    assert ti.pushed["merged_windows"] == [_window("dbo_a", "/w/a").to_xcom()]

    with pytest.raises(ValueError, match="no windows to merge"):
        operator.execute({"ti": _FakeTaskInstance(None)})


def test_execute_keeps_user_py_files_and_can_leave_the_job_modules_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator.execute",
        lambda self, context: None,
    )
    ti = _FakeTaskInstance("/w/a")
    mine = CdcSparkMergeOperator(
        task_id="merge", windows="/w/a", namespace="lake.cdc", py_files="/x/mine.zip"
    )
    mine.execute({"ti": ti})
    mine.execute({"ti": ti})  # a retry in the same process adds it once
    assert mine.py_files == f"/x/mine.zip,{merge_job_py_files()}"
    installed = CdcSparkMergeOperator(
        task_id="merge", windows="/w/a", namespace="lake.cdc", ship_job_modules=False
    )
    installed.execute({"ti": ti})
    assert installed.py_files is None


def _submit_writing(result: dict[str, Any] | None, returncode: int) -> Any:
    """A SparkSubmitOperator.execute that writes ``result`` as the job's result file, then fails as spark-submit does."""

    def execute(operator: Any, context: Any) -> None:
        arguments = list(operator.application_args)
        uri = arguments[arguments.index("--result-uri") + 1]
        if result is not None:
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
            Path(uri).write_text(MergeResult.from_summary(result, seconds=1.0).to_json())
        if returncode:
            raise AirflowException(f"Cannot execute: spark-submit. Error code is: {returncode}.")

    return execute


class _TaskInstanceOfARun(_FakeTaskInstance):
    dag_id, task_id, run_id, try_number = "dag", "merge", "manual__2026-01-01T00:00:00+00:00", 2


def test_the_job_result_file_fails_the_task_by_table_and_feeds_the_watermark(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The edge: spark-submit (run for real in the dag.test() and the standalone-cluster tests).
    submit = "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator.execute"
    window = str(tmp_path / "staging" / "dbo_good" / "0x1_0x2")
    result = {
        "lake.cdc.dbo_good": {"status": "committed", "applied": ["dbo_good 0x1_0x2"], "skipped": []},
        "lake.cdc.dbo_bad": {
            "status": "failed",
            "error": "target table lake.cdc.dbo_bad: column name is string in the table but int in the window",
        },
    }
    monkeypatch.setattr(submit, _submit_writing(result, 2))
    operator = CdcSparkMergeOperator(task_id="merge", windows=window, namespace="lake.cdc")
    with pytest.raises(AirflowException) as raised:
        operator.execute({"ti": _TaskInstanceOfARun(None)})
    message = str(raised.value)
    assert message.splitlines()[0] == (
        "merge: the merge failed for target table(s) lake.cdc.dbo_bad; committed: lake.cdc.dbo_good"
    )
    assert "- lake.cdc.dbo_bad: target table lake.cdc.dbo_bad: column name is string in the table" in message
    assert operator.merge_result is not None
    assert operator.merge_result.tables["lake.cdc.dbo_bad"].status == "failed"
    # The file is on the windows' staging path, named after the task instance; read, then removed.
    arguments = operator.application_args
    uri = arguments[arguments.index("--result-uri") + 1]
    assert uri.startswith(
        f"{tmp_path}/staging/_merge_results/dag__merge__manual__2026-01-01T00_00_00_00_00__try2__"
    )
    assert not Path(uri).exists()

    # No result file (the job failed before merging): spark-submit's own error.
    monkeypatch.setattr(submit, _submit_writing(None, 2))
    with pytest.raises(AirflowException, match="Error code is: 2"):
        operator.execute({"ti": _FakeTaskInstance(None)})
    assert operator.merge_result is None

    committed = {
        "lake.cdc.dbo_good": {
            **result["lake.cdc.dbo_good"],
            "applied_lsn_ranges": {"dbo_good": "0x1-0x2"},
            "rows": {"insert": 3, "delete": 1},
            "snapshot_id": 42,
        }
    }
    monkeypatch.setattr(submit, _submit_writing(committed, 0))
    ti = _FakeTaskInstance(None)
    assert operator.execute({"ti": ti}) == [f"{window}/_manifest.json"]
    good = operator.merge_result.tables["lake.cdc.dbo_good"]
    assert (good.committed, good.snapshot_id, dict(good.rows)) == (True, 42, {"insert": 3, "delete": 1})
    # The ranges each table holds after the merge, for WatermarkCommitOperator to mirror.
    # The ranges each table holds, and the window descriptions it merged (none: it was given a manifest URI).
    assert ti.pushed == {"applied_lsn_ranges": {"dbo_good": "0x1-0x2"}, "merged_windows": []}

    # A job that wrote no file (an older provider on the cluster): no ranges, the watermark follows the windows.
    monkeypatch.setattr(submit, _submit_writing(None, 0))
    ti = _FakeTaskInstance(None)
    operator.execute({"ti": ti})
    assert ti.pushed == {"applied_lsn_ranges": None, "merged_windows": []}

    # result_path puts the files elsewhere.
    elsewhere = CdcSparkMergeOperator(
        task_id="merge", windows=window, namespace="lake.cdc", result_path=str(tmp_path / "results")
    )
    monkeypatch.setattr(submit, _submit_writing(committed, 0))
    elsewhere.execute({"ti": _FakeTaskInstance(None)})
    arguments = elsewhere.application_args
    assert arguments[arguments.index("--result-uri") + 1].startswith(f"{tmp_path}/results/_merge_results/")
    assert "result_path" in CdcSparkMergeOperator.template_fields


def test_a_partly_failed_merge_pushes_the_committed_tables_windows_then_fails_and_a_retry_pushes_all(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The edge: spark-submit (run for real in tests/operators/test_partial_merge_dag.py).
    submit = "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator.execute"
    staging = tmp_path / "staging"
    good, bad = _window("dbo_good", f"{staging}/dbo_good/w1"), _window("dbo_bad", f"{staging}/dbo_bad/w1")
    good_label, bad_label = "dbo_good 0x00000000000000000001_0x00000000000000000002", "dbo_bad 0x1_0x2"
    failed = {
        "lake.cdc.dbo_good": {
            "status": "committed",
            "applied": [good_label],
            "applied_lsn_ranges": {"dbo_good": "0x1-0x2"},
        },
        "lake.cdc.dbo_bad": {
            "status": "failed",
            "failed_windows": [bad_label],
            "error": "key columns differ",
        },
    }
    monkeypatch.setattr(submit, _submit_writing(failed, 2))
    operator = CdcSparkMergeOperator(task_id="merge", extract_task_ids="extract", namespace="lake.cdc")
    ti = _TaskInstanceOfARun([good.to_xcom(), bad.to_xcom()])
    with pytest.raises(
        AirflowException, match=r"failed for target table\(s\) lake.cdc.dbo_bad; committed: lake"
    ):
        operator.execute({"ti": ti})
    # Only the committed table's window and ranges go to the watermark commit.
    assert ti.pushed.pop("failure")["capture_instances"] == ["dbo_bad"]  # for run_outcome
    assert ti.pushed == {"applied_lsn_ranges": {"dbo_good": "0x1-0x2"}, "merged_windows": [good.to_xcom()]}

    # The retry (its own XComs cleared by Airflow): dbo_good skips the window it holds, dbo_bad merges.
    retried = {
        "lake.cdc.dbo_good": {**failed["lake.cdc.dbo_good"], "applied": [], "skipped": [good_label]},
        "lake.cdc.dbo_bad": {
            "status": "committed",
            "applied": [bad_label],
            "applied_lsn_ranges": {"dbo_bad": "0x1-0x2"},
        },
    }
    monkeypatch.setattr(submit, _submit_writing(retried, 0))
    ti = _TaskInstanceOfARun([good.to_xcom(), bad.to_xcom()])
    operator.execute({"ti": ti})
    assert ti.pushed["merged_windows"] == [good.to_xcom(), bad.to_xcom()]
    assert ti.pushed["applied_lsn_ranges"] == {"dbo_good": "0x1-0x2", "dbo_bad": "0x1-0x2"}


def test_committed_windows_leave_out_every_capture_instance_a_failed_table_names() -> None:
    windows = [_window(name, f"/s/{name}/w") for name in ("dbo_a", "dbo_b", "dbo_b_v2", "dbo_c")]
    result = MergeResult.from_summary(
        {
            "lake.cdc.a": {"status": "committed", "applied": ["dbo_a 0x1_0x2"]},
            # A table fed by two capture instances (a schema switch) failed after committing one window.
            "lake.cdc.b": {
                "status": "failed",
                "applied": ["dbo_b 0x1_0x2"],
                "failed_windows": ["dbo_b_v2 0x3_0x4"],
                "applied_lsn_ranges": {"dbo_b": "0x1-0x2"},
            },
            # dbo_c: in no table of the result (the job never got to it): not committed.
        }
    )
    assert [w.capture_instance for w in committed_windows(windows, result)] == ["dbo_a"]
    assert uncommitted_instances(windows, committed_windows(windows, result)) == [
        "dbo_b",
        "dbo_b_v2",
        "dbo_c",
    ]


class _TaskInstanceOfTheCommit:
    """The commit's XCom pull of the merge's pushes (the real one runs in test_partial_merge_dag.py)."""

    def __init__(self, pushed: dict[str, Any]) -> None:
        self.pushed = pushed

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        assert task_ids == "group.merge"
        return self.pushed.get(key)


def test_the_commit_skips_when_the_merge_pushed_no_windows() -> None:
    commit = WatermarkCommitOperator(task_id="commit_watermarks", merge_task_id="group.merge")
    with pytest.raises(AirflowSkipException, match="pushed no merged windows"):
        commit.execute({"ti": _TaskInstanceOfTheCommit({})})
    nothing = _TaskInstanceOfTheCommit({"merged_windows": [], "applied_lsn_ranges": {}})
    assert commit.execute({"ti": nothing}) == []  # every table failed: nothing to commit, nothing to skip
    with pytest.raises(ValueError, match="pass windows"):
        WatermarkCommitOperator(task_id="c")


DAG_FILE = """
from __future__ import annotations

import datetime as dt
import json

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, task

from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator
from airflow_provider_sqlserver_cdc.spark import MERGE_JOB_PATH, merge_job_py_files
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

SPARK = dict(jars={jar!r}, conf={conf!r}, conn_id="spark_default")

with DAG("sqlserver_cdc_merge_test", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def extract_first():  # the extract task's XCom: one window
        source = {{"server": "s", "database": "d", "schema": "dbo", "table": "orders"}}
        return ChangeWindow(
            "dbo_orders", source, "changes", "interval", {first_lsn!r}, {last_lsn!r}, {first_dir!r}, {first!r}, "k",
            row_count=3,
        ).to_xcom()

    @task
    def extract_second():
        return {{"capture_instance": "dbo_orders", "manifest_uri": {second!r}, "row_count": 8}}

    merge = CdcSparkMergeOperator(
        task_id="merge", extract_task_ids="extract_first", namespace="lake.cdc", **SPARK
    )
    # The same job through plain SparkSubmitOperator: the job's modules as py_files, the manifest URI
    # from the XCom.
    merge_plain = SparkSubmitOperator(
        task_id="merge_plain",
        application=MERGE_JOB_PATH,
        py_files=merge_job_py_files(),
        application_args=[
            "--manifest", "{{{{ ti.xcom_pull(task_ids='extract_second')['manifest_uri'] }}}}",
            "--namespace", "lake.cdc",
        ],
        **SPARK,
    )
    extract_first() >> merge >> extract_second() >> merge_plain
"""


def current_snapshot_summary(table_dir: Path) -> dict[str, str]:
    """Read the Iceberg table's current snapshot summary from its metadata JSON (Hadoop catalog)."""
    version = (table_dir / "metadata" / "version-hint.text").read_text().strip()
    metadata = json.loads((table_dir / "metadata" / f"v{version}.metadata.json").read_text())
    current = metadata["current-snapshot-id"]
    return next(s["summary"] for s in metadata["snapshots"] if s["snapshot-id"] == current)


@pytest.mark.spark
@pytest.mark.slow
def test_merge_job_through_spark_submit_in_dag_test(airflow_db: Path, tmp_path: Path) -> None:
    log = window_builder.ChangeLog()
    base = tmp_path / "windows"
    first = window_builder.write_window(
        base,
        window_builder.WindowSpec(
            "dbo_orders",
            0x100,
            0x200,
            window_builder.flatten(
                [log.insert(id=i, name=f"n{i}", amount=decimal.Decimal(i)) for i in (1, 2, 3)]
            ),
        ),
    )
    log.lsn = 0x200
    second_rows = window_builder.flatten(
        [
            log.update({"id": 2, "name": "n2", "amount": decimal.Decimal(2)}, name="changed"),
            log.delete(id=3, name="n3", amount=decimal.Decimal(3)),
            log.insert(id=4, name="n4", amount=None),
            log.update({"id": 1, "name": "n1", "amount": decimal.Decimal(1)}, id=10),
        ]
    )
    second = window_builder.write_window(
        base, window_builder.WindowSpec("dbo_orders", 0x201, 0x300, second_rows)
    )
    warehouse = tmp_path / "warehouse"
    dags = tmp_path / "dags"
    dags.mkdir()
    dag_file = dags / "sqlserver_cdc_merge_test.py"
    dag_file.write_text(
        textwrap.dedent(DAG_FILE).format(
            jar=iceberg_runtime_jar(),
            conf=iceberg_spark_conf(warehouse),
            first=first,
            first_dir=str(Path(first).parent),
            first_lsn=window_builder.lsn_hex(0x100),
            last_lsn=window_builder.lsn_hex(0x200),
            second=second,
        )
    )
    run = run_dag_test("sqlserver_cdc_merge_test", dags_folder=dags)
    assert run.state == "success", run.output[-5000:]
    # The operator read the job's result file from the windows' staging path, then removed it.
    assert "lake.cdc.dbo_orders: committed, windows dbo_orders" in run.output, run.output[-5000:]
    assert list((base / "_merge_results").glob("*.json")) == []
    summary = current_snapshot_summary(warehouse / "cdc" / "dbo_orders")
    assert summary["sqlserver-cdc.max-applied-lsn.dbo_orders"] == window_builder.lsn_hex(0x300)
    assert summary["sqlserver-cdc.applied-lsn-ranges.dbo_orders"] == (
        f"{window_builder.lsn_hex(0x100)}-{window_builder.lsn_hex(0x300)}"
    )
    # ids 1 (key changed to 10) and 3 stay as soft-deleted rows: 1, 2, 3, 4, 10. The table is
    # merge-on-read (the default): rows replaced by the second window are position deletes.
    assert int(summary["total-records"]) - int(summary["total-position-deletes"]) == 5
    assert summary["total-position-deletes"] == "3"
