"""
The example DAG with a PostgreSQL target (``merge.target.kind: jdbc`` through the YAML's
environment variables): the snapshot run and a random interval leave every PostgreSQL table equal
to its source. Real spark-submit: the target's login reaches the job only through spark-submit's
environment. (Replays and out-of-order windows into PostgreSQL are proven without the DAG, in
tests/spark/merge/targets: each DAG run here costs a spark-submit.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cdc_pipeline_harness import CAPTURE_INSTANCES, PipelineHarness, create_sample_source

from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.testing.local_iceberg import iceberg_runtime_jar
from airflow_provider_sqlserver_cdc.testing.postgres_comparison import compare_postgres_tables
from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresServer, postgres_jdbc_jar
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from airflow_provider_sqlserver_cdc.testing.workload import Workload

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_example_dag_replicates_into_postgresql(
    pipeline_harness: PipelineHarness, postgres_server: PostgresServer, airflow_db: Path
) -> None:
    harness = pipeline_harness
    database = postgres_server.create_database("e2e_target")
    harness.env.update(
        {
            "SQLSERVER_CDC_TARGET_KIND": "jdbc",
            "SQLSERVER_CDC_TARGET_CONN_ID": "pg_e2e",
            "SQLSERVER_CDC_NAMESPACE": "cdc",
            "SQLSERVER_CDC_SPARK_JARS": f"{iceberg_runtime_jar()},{postgres_jdbc_jar()}",
            connection_variable("pg_e2e"): postgres_server.airflow_connection(database),
        }
    )
    harness.start_intervals(hours_ago=2)
    start = harness.interval_start
    workload = Workload(seed=20261125)
    conn = create_sample_source(harness, workload, 25)
    for k in (0, 1):
        harness.write_interval(k, workload, conn, 40)
        harness.close_interval(k)
        result = harness.run(start(k + 1))
        assert result.state == "success", result.output[-6000:]
    assert postgres_server.password not in result.output
    hook = SqlServerCdcHook(harness.conn_id)
    try:
        with postgres_server.connect(database) as pg:
            comparisons = compare_postgres_tables(pg, hook, CAPTURE_INSTANCES, "cdc")
    finally:
        hook.close()
    conn.close()
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    assert all(c.source_rows > 0 for c in comparisons)
