"""The merge job on a real Spark standalone cluster (master and worker on 127.0.0.1), submitted by CdcSparkMergeOperator.

One spark-submit, in client deploy mode (a standalone cluster runs no Python driver in cluster deploy mode;
the operator reads the job's result file from the staging path, so it does not depend on seeing the
driver's output either way): the driver runs in the spark-submit process, the MERGE's tasks
in an executor the worker starts. The job's modules go as the operator's ``py_files`` zip, the Iceberg
runtime as ``jars``; the windows and the Hadoop catalog's warehouse are local paths that the executor
reaches because it runs on this machine (on a real cluster: shared storage, README "Scale out").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from merge_runs import EXPECTED_AFTER_TWO, contents, two_windows
from window_builder import ChangeLog, WindowSpec, write_window

from airflow_provider_sqlserver_cdc.operators.spark_merge import (
    APPLIED_RANGES_XCOM_KEY,
    CdcSparkMergeOperator,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import iceberg_table
from airflow_provider_sqlserver_cdc.testing.dag_runs import interpreter_environment
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar, iceberg_spark_conf
from airflow_provider_sqlserver_cdc.testing.spark_standalone import (
    SparkStandaloneCluster,
    java_missing,
    spark_standalone_cluster,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    """A master and a worker (2 cores, 1 GiB) for the module; stopped, with their executors, afterwards."""
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    with spark_standalone_cluster(tmp_path_factory.mktemp("spark-standalone")) as running:
        yield running


class _TaskInstance:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_the_operator_merges_on_a_standalone_cluster(
    cluster: SparkStandaloneCluster,
    spark: Any,
    spark_warehouse: Path,
    base: Path,
    namespace: str,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    w1, w2 = two_windows(base)
    customers = write_window(
        base,
        WindowSpec("sales_customers", 0x1000, 0x10FF, ChangeLog(0x1000).insert(id=7, name="x", amount=None)),
    )
    for key, value in interpreter_environment().items():  # spark-submit and the driver's Python: this venv's
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", cluster.master_url)
    conf = {
        **iceberg_spark_conf(spark_warehouse),
        **cluster.application_conf(executor_memory="512m"),
        "spark.scheduler.mode": "FAIR",
        "spark.sql.shuffle.partitions": "2",
    }
    operator = CdcSparkMergeOperator(
        task_id="merge",
        windows=[w1, w2, customers],
        namespace=namespace,
        partition_buckets=2,
        concurrent_tables=2,
        conn_id="spark_cluster",
        jars=iceberg_runtime_jar(),
        conf=conf,
        driver_memory="512m",
    )
    ti = _TaskInstance()

    assert operator.execute({"ti": ti}) == [w1, w2, customers]

    # spark-submit's output (the driver's log, in client mode), as the Spark provider's hook logs it
    log = capsys.readouterr().out
    assert f"--master {cluster.master_url}" in " ".join(
        operator._hook._build_spark_submit_command(operator.application)
    )
    # The driver imported the job from the py_files zip (ahead of any installed copy on its path).
    assert f"modules from {operator.py_files}/airflow_provider_sqlserver_cdc" in log, log[-3000:]
    assert "merging 2 target tables, 2 at a time" in log
    assert f"target {table}: MERGE strategy storage-partitioned (bucket(2, `id`))" in log, log[-3000:]
    # The MERGE ran in the worker's executor, which fetched the zip and the Iceberg runtime.
    fetched = {p.name for d in cluster.executor_directories() for p in d.iterdir()}
    assert {Path(operator.py_files).name, Path(iceberg_runtime_jar()).name} <= fetched, fetched

    assert contents(spark, table) == EXPECTED_AFTER_TWO
    assert contents(spark, f"{namespace}.sales_customers") == {7: (False, "x", None)}
    spec = iceberg_table(spark, table).spec()
    assert [str(spec.fields().get(0).transform()), spec.fields().size()] == ["bucket[2]", 1]
    names = {r.tableName for r in spark.sql(f"SHOW TABLES IN {namespace}").collect()}
    assert names == {"dbo_orders", "sales_customers"}  # the staging table was dropped
    assert set(ti.pushed[APPLIED_RANGES_XCOM_KEY]) == {"dbo_orders", "sales_customers"}
    # ...read from the job's result file on the staging path (not from the driver's output), then removed.
    result = operator.merge_result
    assert result is not None and result.application_id and result.application_id.startswith("app-")
    orders = result.tables[table]
    assert orders.snapshot_id == iceberg_table(spark, table).currentSnapshot().snapshotId()
    assert orders.rows["insert"] > 0 and orders.seconds and orders.seconds > 0
    assert list((base / "_merge_results").glob("*.json")) == []
