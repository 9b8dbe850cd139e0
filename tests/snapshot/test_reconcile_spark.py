"""
CdcReconcile's comparison and repair on the real pieces: the simulator (through ODBC), Spark, Iceberg.

A target replicated by snapshot + windows is corrupted (a row deleted, a row changed, a deleted row
brought back); the comparison at one consistent LSN finds exactly those keys in one leaf; the repair
re-copies that one range at a new LSN while changes keep flowing (merged before the repair), ends
equal to the source, does not overwrite the newer change, and rewrites no data file of the table.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from snapshot_source import seed, windows_after

from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.snapshot.range_copy import write_repair_window
from airflow_provider_sqlserver_cdc.snapshot.reconcile import (
    CHANGED,
    MISSING,
    UNEXPECTED,
    compare_at_consistent_point,
)
from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_capture_instance
from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args
from airflow_provider_sqlserver_cdc.spark.merge.job import run
from airflow_provider_sqlserver_cdc.spark.reconcile.job import compare_target
from airflow_provider_sqlserver_cdc.testing.dag_runs import run_dag_test
from airflow_provider_sqlserver_cdc.testing.local_iceberg import (
    iceberg_runtime_jar,
    iceberg_spark_conf,
    local_spark_session,
    release_local_spark_session,
)
from airflow_provider_sqlserver_cdc.testing.table_comparison import compare_table, target_table_name

pytestmark = pytest.mark.spark

CATALOG = "reclake"
NAMESPACE = f"{CATALOG}.cdc"
LEAF_ROWS = 16


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return tmp_path_factory.mktemp("reconcile-warehouse")


@pytest.fixture(scope="module")
def spark(warehouse):
    conf = iceberg_spark_conf(warehouse, catalog=CATALOG)
    session = local_spark_session(conf, app_name="sqlserver-cdc-reconcile-tests")
    yield session
    release_local_spark_session(session)


def merge(spark, manifests: list[str], namespace: str = NAMESPACE) -> None:
    run(spark, parse_args([*[x for uri in manifests for x in ("--manifest", uri)], "--namespace", namespace]))


def to_lsn(window_dir) -> Lsn:
    return Lsn.from_hex(json.loads((window_dir / "_manifest.json").read_text())["to_lsn"])


def data_files(spark, table: str) -> set[str]:
    return {r[0] for r in spark.sql(f"SELECT file_path FROM {table}.files WHERE content = 0").collect()}


def test_compare_finds_the_corrupted_keys_and_repair_recopies_one_range(source, spark, tmp_path):
    seed(source, rows=120)
    hook = source.hook()
    instances = {
        t.capture_instance: hook.get_capture_instance(t.capture_instance) for t in source.sample.tables
    }
    staging = tmp_path / "staging"
    marks = {}
    manifests = []
    for name, instance in instances.items():
        copy = snapshot_capture_instance(hook, instance, output=WindowOutput(str(staging), source.name))
        manifests.append(copy.extract.manifest_uri)
        marks[name] = Lsn.from_hex(copy.progress.snapshot_lsn)
    merge(spark, manifests)
    conn = source.connect()

    def side(request):
        return compare_target(spark, request)

    # every type of the sample tables (type_zoo: one column of each) digests alike on both sides
    for name, instance in instances.items():
        comparison = compare_at_consistent_point(
            hook,
            instance,
            table=target_table_name(instance, NAMESPACE),
            target_side=side,
            leaf_rows=LEAF_ROWS,
        )
        assert comparison.matches, (name, comparison.summary())
        assert comparison.source_rows == comparison.target_rows == 120
        assert comparison.ranges_compared == 1  # equal summaries: the bisection stops at the top

    orders = instances["dbo_orders"]
    table = target_table_name(orders, NAMESPACE)
    keys = [
        r[0] for r in conn.cursor().execute("SELECT order_id FROM dbo.orders ORDER BY order_id").fetchall()
    ]
    gone, dropped, changed, kept = keys[44], keys[40], keys[41], keys[42]
    # a real delete at the source, merged: the target keeps a tombstone for it
    conn.cursor().execute("DELETE FROM dbo.orders WHERE order_id = ?", gone)
    source.capture()
    (window,) = windows_after(hook, orders, marks["dbo_orders"], tmp_path / "w1", source.name)
    merge(spark, [str(window / "_manifest.json")])
    applied = to_lsn(window)

    # corrupt the target: a row deleted, a row changed, the deleted row brought back (a row the source lacks)
    spark.sql(f"DELETE FROM {table} WHERE order_id = {dropped}")
    spark.sql(f"UPDATE {table} SET status = 'corrupt' WHERE order_id = {changed}")
    spark.sql(f"UPDATE {table} SET _cdc_deleted = false, status = 'ghost' WHERE order_id = {gone}")

    comparison = compare_at_consistent_point(hook, orders, table=table, target_side=side, leaf_rows=LEAF_ROWS)
    assert not comparison.matches
    assert comparison.differing_leaves == [2], comparison.summary()  # rows 32..47 in key order
    assert {(d.key[0], d.kind) for d in comparison.differences} == {
        (dropped, MISSING),
        (changed, CHANGED),
        (gone, UNEXPECTED),
    }
    assert comparison.ranges_compared > 1  # bisected: 8 leaves, halves compared down to leaf 2
    assert comparison.changes_not_merged == 0  # the target merged every captured change: all three are damage
    report = comparison.summary(max_keys=2)
    assert (
        report["differing_keys"] == 3 and len(report["reported_keys"]) == 2 and report["keys_left_out"] == 1
    )

    files_before = data_files(spark, table)

    # changes flow while the repair runs: after its read (S2), the changed key and a correct key of the
    # same range change at the source, and that window is merged before the repair's
    def writes_after_read(lsn):
        conn.cursor().execute("UPDATE dbo.orders SET status = 'late' WHERE order_id IN (?, ?)", changed, kept)

    repair = write_repair_window(
        hook,
        orders,
        comparison,
        staging_uri=str(staging),
        database=source.name,
        on_read=writes_after_read,
    )
    assert repair is not None
    assert repair.ranges == [(2, 2)]  # one range re-copied
    assert repair.rows_read == LEAF_ROWS  # the range, not the table
    assert (repair.upserts, repair.deletes) == (2, 1)  # only the differing rows are written
    source.capture()
    (flowing,) = windows_after(hook, orders, applied, tmp_path / "w2", source.name)
    assert Lsn.from_hex(json.loads((flowing / "_manifest.json").read_text())["to_lsn"]) > Lsn.from_hex(
        repair.repair_lsn
    )
    merge(spark, [str(flowing / "_manifest.json")])
    merge(spark, [repair.manifest_uri])

    result = compare_table(spark, conn, orders, table)
    assert result.matches, result.describe()
    status = dict(
        spark.sql(f"SELECT order_id, status FROM {table} WHERE order_id IN ({changed}, {kept})").collect()
    )
    assert status == {changed: "late", kept: "late"}  # the newer change was not overwritten by the repair
    # the repair's commit rewrote no data file: every file of the untouched ranges is still live
    assert files_before <= data_files(spark, table)
    summary = spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[
        0
    ]
    assert int(summary.get("added-records", "0")) <= 2, summary  # the missing row and the tombstone
    assert summary.get("deleted-data-files", "0") == "0", summary
    again = compare_at_consistent_point(hook, orders, table=table, target_side=side, leaf_rows=LEAF_ROWS)
    assert again.matches, again.summary()
    conn.close()


DAG_FILE = """
from __future__ import annotations

import datetime as dt
import json

from airflow.sdk import DAG, task

from airflow_provider_sqlserver_cdc.operators.reconcile import CdcReconcileOperator

with DAG("sqlserver_cdc_reconcile_test", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    reconcile = CdcReconcileOperator(
        task_id="reconcile",
        capture_instance="dbo_orders",
        namespace={namespace!r},
        staging_path={staging!r},
        repair=True,
        leaf_rows={leaf_rows},
        sqlserver_cdc_conn_id={conn_id!r},
        conn_id="spark_default",
        jars={jar!r},
        conf={conf!r},
    )

    @task
    def report(summary):
        print("RECONCILE_SUMMARY " + json.dumps(summary))

    report(reconcile.output)
"""


@pytest.mark.slow
def test_operator_compares_and_repairs_through_spark_submit_in_dag_test(
    source, spark, warehouse, airflow_db, tmp_path
):
    seed(source, rows=60)
    hook = source.hook()
    orders = hook.get_capture_instance("dbo_orders")
    staging = tmp_path / "staging"
    copy = snapshot_capture_instance(hook, orders, output=WindowOutput(str(staging), source.name))
    namespace = f"{CATALOG}.dagtest"  # a table of its own: the other test's dbo_orders holds other LSNs
    merge(spark, [copy.extract.manifest_uri], namespace)
    table = target_table_name(orders, namespace)
    conn = source.connect()
    keys = [
        r[0] for r in conn.cursor().execute("SELECT order_id FROM dbo.orders ORDER BY order_id").fetchall()
    ]
    spark.sql(f"UPDATE {table} SET status = 'corrupt' WHERE order_id = {keys[5]}")
    spark.sql(f"DELETE FROM {table} WHERE order_id = {keys[50]}")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "reconcile_dag.py").write_text(
        textwrap.dedent(DAG_FILE).format(
            namespace=namespace,
            staging=str(staging),
            leaf_rows=LEAF_ROWS,
            conn_id=source.conn_id,
            jar=iceberg_runtime_jar(),
            conf=iceberg_spark_conf(warehouse, catalog=CATALOG),
        )
    )
    run = run_dag_test("sqlserver_cdc_reconcile_test", dags_folder=dags)
    assert run.state == "success", run.output[-5000:]
    line = next(x for x in run.output.splitlines() if "RECONCILE_SUMMARY " in x)
    summary = json.loads(line.split("RECONCILE_SUMMARY ", 1)[1])
    assert summary["differing_keys"] == 2 and summary["differences_by_kind"] == {
        MISSING: 1,
        UNEXPECTED: 0,
        CHANGED: 1,
    }
    assert {k["key"][0] for k in summary["reported_keys"]} == {str(keys[5]), str(keys[50])}
    assert summary["repair"]["ranges"] == [[0, 0], [3, 3]] and summary["repair"]["upserts"] == 2
    assert "changed (leaf 0)" in run.output  # the differing keys are in the task's log
    assert list((staging / "_reconcile" / "_requests").iterdir()) == []  # request and result removed
    spark.sql(f"REFRESH TABLE {table}")
    result = compare_table(spark, conn, orders, table)
    conn.close()
    assert result.matches, result.describe()
