"""
One table's trouble stays that table's, through real Airflow (``dag.test()``), spark-submit of the merge
job and Iceberg: when the job refuses one target table (its windows disagree on the key columns), the
other table commits, ``commit_watermarks`` (the factory's, ``all_done``) advances that table's
watermark Variable in the same run, the failed table's Variable does not move, the merge leaves a failure
record naming the failed table's capture instance and its error, and ``run_outcome`` (the factory's) fails
the run with a line for it: the error and what to do. After the cause is fixed, the next run merges only
the failed table's windows (the committed table skips what it holds) and advances its watermark.

The extract task is a stand-in that returns the windows' XCom (real Parquet windows written by
tests/spark/window_builder.py): the SQL Server side is not what this test is about (the example DAG
through the simulator: tests/e2e/test_production_corners.py).
"""

from __future__ import annotations

import datetime as dt
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.state import Watermark
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar, iceberg_spark_conf
from airflow_provider_sqlserver_cdc.window.change_window import watermark_key

SPARK_TESTS = Path(__file__).resolve().parents[1] / "spark"
sys.path.insert(0, str(SPARK_TESTS))

import window_builder  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAG_ID = "sqlserver_cdc_partial_merge_test"
DAG_FILE = """
from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, task

from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator
from airflow_provider_sqlserver_cdc.pipeline.factory import add_run_outcome_task, watermark_commit_task
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

WINDOWS = {windows!r}

with DAG({dag_id!r}, schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def extract():  # stands in for the extract tasks: the windows' XCom
        return [
            ChangeWindow(ci, {{"server": "s", "database": "shop", "schema": "dbo", "table": ci[4:]}}, "changes",
                         "interval", first, last, directory, manifest, key, row_count=rows).to_xcom()
            for ci, first, last, directory, manifest, key, rows in WINDOWS
        ]

    windows = extract()
    merge = CdcSparkMergeOperator(
        task_id="merge", extract_task_ids="extract", namespace="lake.cdc", jars={jar!r}, conf={conf!r},
        conn_id="spark_default", trigger_rule="all_done", retries=0,
    )
    commit = watermark_commit_task(merge)
    windows >> merge >> commit
    add_run_outcome_task(watched=[windows.operator, merge, commit], name_lists={{}}, commit=commit)
"""


def _window(base: Path, capture_instance: str, first: int, last: int, keys: tuple[str, ...] = ("id",)) -> str:
    log = window_builder.ChangeLog(first)
    rows = window_builder.flatten([log.insert(id=first + i, name=f"n{i}", amount=None) for i in (1, 2)])
    spec = window_builder.WindowSpec(capture_instance, first, last, rows, key_columns=keys)
    return window_builder.write_window(base, spec)


def _watermark(key: str) -> Watermark | None:
    from airflow.models.variable import Variable

    value = Variable.get(key, default_var=None)
    return Watermark.from_json(value, key=key) if value is not None else None


def _failure_record(task_id: str) -> Any:
    """The failure record (``operators.failure_record``) the DAG's latest run of ``task_id`` left in XCom."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_provider_sqlserver_cdc.operators.failure_record import FAILURE_XCOM_KEY

    with create_session() as session:
        row = session.scalars(
            select(XComModel)
            .where(
                XComModel.dag_id == DAG_ID, XComModel.task_id == task_id, XComModel.key == FAILURE_XCOM_KEY
            )
            .order_by(XComModel.timestamp.desc())
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def test_one_failing_table_leaves_the_others_watermark_advanced_in_the_same_run(
    airflow_db: Path, shared_fernet_key: str, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    database = f"shop_{tmp_path.name}"  # Variables of this test only
    keys = {ci: watermark_key("partial_merge", database, ci) for ci in ("dbo_good", "dbo_bad")}
    spans = {"dbo_good": [(0x100, 0x200)], "dbo_bad": [(0x100, 0x200), (0x201, 0x300)]}
    manifests = {
        ("dbo_good", 0x100): _window(staging, "dbo_good", 0x100, 0x200),
        ("dbo_bad", 0x100): _window(staging, "dbo_bad", 0x100, 0x200),
        # The job refuses the table: this window's key columns differ from the other window's.
        ("dbo_bad", 0x201): _window(staging, "dbo_bad", 0x201, 0x300, keys=("name",)),
    }
    windows = [
        (ci, window_builder.lsn_hex(a), window_builder.lsn_hex(b), str(Path(manifests[ci, a]).parent),
         manifests[ci, a], keys[ci], 2)
        for ci, ranges in spans.items() for a, b in ranges
    ]  # fmt: skip
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / f"{DAG_ID}.py").write_text(
        textwrap.dedent(DAG_FILE).format(
            dag_id=DAG_ID,
            windows=windows,
            jar=iceberg_runtime_jar(),
            conf=iceberg_spark_conf(tmp_path / "warehouse"),
        )
    )

    first = run_dag_test(DAG_ID, dags_folder=dags, logical_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert first.state == "failed", first.output[-6000:]
    states = first.task_states
    assert (states.get("merge"), states.get("commit_watermarks"), states.get("run_outcome")) == (
        "failed",
        "success",
        "failed",
    ), (states, first.output[-6000:])
    assert "merge: the merge failed for target table(s) lake.cdc.dbo_bad; committed: lake.cdc.dbo_good" in (
        first.output
    )
    assert "merged and their watermarks committed: dbo_good" in first.output
    # The merge's failure record names the failed table's capture instance and its error (not the committed
    # one's), and run_outcome's line for it says what failed and what to do.
    record = _failure_record("merge")
    assert record is not None, first.output[-6000:]
    assert (record["capture_instances"], record["error"], record["kind"]) == (
        ["dbo_bad"],
        "TablesNotMergedError",
        "merge",
    ), record
    error = record["errors"]["dbo_bad"]
    assert error.startswith("target table lake.cdc.dbo_bad: ") and "has key columns ['name']" in error, record
    assert (
        f"- dbo_bad: merge failed with TablesNotMergedError: {error} -> The watermark of dbo_bad did not "
        in (first.output)
    ), first.output[-6000:]
    assert "dbo_good: merge failed" not in first.output
    good = _watermark(keys["dbo_good"])
    assert good is not None and good.lsn == window_builder.lsn_hex(0x200), good
    assert _watermark(keys["dbo_bad"]) is None

    # The cause fixed (the window rewritten with the table's key), the next run: dbo_good skips its window,
    # dbo_bad is merged, and both Variables hold what their tables hold.
    _window(staging, "dbo_bad", 0x201, 0x300)
    second = run_dag_test(DAG_ID, dags_folder=dags, logical_date=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
    assert second.state == "success", second.output[-6000:]
    assert "lake.cdc.dbo_good: committed, windows none" in second.output, second.output[-6000:]
    after = _watermark(keys["dbo_good"])
    assert after is not None and (after.lsn, after.applied_ranges) == (good.lsn, good.applied_ranges)
    bad = _watermark(keys["dbo_bad"])
    assert bad is not None and bad.lsn == window_builder.lsn_hex(0x300), bad
