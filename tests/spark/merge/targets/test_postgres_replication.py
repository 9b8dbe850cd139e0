"""
A seeded random workload on the simulator, extracted window by window and merged into PostgreSQL
(out of order, replayed), leaves every PostgreSQL table equal to its source: values and types.

Real pieces: the simulator over TDS (pyodbc + FreeTDS), the provider's extraction into Parquet
windows, the merge job in the shared Spark session, a real PostgreSQL over JDBC, and the
comparison of ``testing.postgres_comparison``. The DAG itself is left out (tests/e2e runs it).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_window
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings
from airflow_provider_sqlserver_cdc.spark.merge.job import run as run_job
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import PASSWORD_ENV, USER_ENV
from airflow_provider_sqlserver_cdc.testing.airflow_connections import connection_variable
from airflow_provider_sqlserver_cdc.testing.postgres_comparison import compare_postgres_tables
from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresServer
from airflow_provider_sqlserver_cdc.testing.table_comparison import all_match, describe_all
from airflow_provider_sqlserver_cdc.window.manifest import manifest_uri
from airflow_provider_sqlserver_cdc.window.planning import LsnWindow, ServerTimeZone
from sqlserver_cdc_simulator.workload import SAMPLE_TABLES, SampleDatabase, Workload
from sqlserver_cdc_simulator.workload.change_generator import WorkloadStats

pytestmark = pytest.mark.spark

SEED = 20261125
CONN_ID = "pg_replication_source"
DATABASE = "cdc_sample"


def test_random_workload_replicated_out_of_order_and_replayed_equals_the_source(
    spark: Any,
    sqlserver_simulator: Any,
    postgres_server: PostgresServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(connection_variable(CONN_ID), sqlserver_simulator.airflow_connection(DATABASE))
    monkeypatch.setenv(USER_ENV, postgres_server.user)
    monkeypatch.setenv(PASSWORD_ENV, postgres_server.password)
    target_db = postgres_server.create_database("replication")
    conn = sqlserver_simulator.connect()
    SampleDatabase.create(conn, DATABASE)
    workload = Workload(seed=SEED)
    for table in SAMPLE_TABLES:
        workload.insert_rows(conn, table.qualified_name, 40)
    # customers: a unique secondary key (email); type_zoo: every SQL Server type the mapping covers.
    names = [table.capture_instance for table in SAMPLE_TABLES if table.name in ("customers", "type_zoo")]
    hook = SqlServerCdcHook(CONN_ID)
    windows: list[list[str]] = []
    totals = WorkloadStats()
    with contextlib.closing(hook):
        database, instances = hook.source_database(), hook.get_named_capture_instances(names)
        start = {i.name: hook.get_min_lsn(i.name) for i in instances}
        for interval in range(4):
            if interval:
                totals.add(workload.run(conn, 40))
            sqlserver_simulator.run_capture_scan(DATABASE)
            end = hook.get_max_lsn()
            manifests = []
            for instance in instances:
                window = LsnWindow(instance.name, start[instance.name], end, "watermark").normalized()
                result = extract_window(
                    hook, instance, window, base_uri=str(tmp_path), tz=ServerTimeZone(), database=database
                )
                manifests.append(manifest_uri(result.window_uri))
                start[instance.name] = hook.increment_lsn(end)
            windows.append(manifests)

        def merge(*batches: list[str]) -> dict[str, Any]:
            settings = MergeJobSettings(
                manifests=tuple(uri for batch in batches for uri in batch),
                namespace="cdc",
                target_kind="postgres",
                jdbc_url=postgres_server.jdbc_url(target_db),
                jdbc_connections=2,
            )
            return run_job(spark, settings)

        assert totals.rows["key_update"] and totals.rows["delete"] and totals.rows["unique_key_update"], (
            totals
        )
        merge(windows[0], windows[1], windows[3])  # interval 2 missing: merged later, out of order
        with postgres_server.connect(target_db) as pg:
            pg.execute("CREATE UNIQUE INDEX customers_email ON cdc.dbo_customers (email)")
        merge(windows[2])
        result = merge(windows[1])  # a replay: every window already applied
        assert all(entry["skipped"] and not entry["applied"] for entry in result.values()), result
        with postgres_server.connect(target_db) as pg:
            comparisons = compare_postgres_tables(pg, hook, names, "cdc")
    assert all_match(comparisons), describe_all(comparisons)
    assert sum(c.source_rows for c in comparisons) > 60
    assert sum(c.deleted_rows for c in comparisons) > 0
