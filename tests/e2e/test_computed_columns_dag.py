"""
Computed columns through the watermark example DAG on the simulator (issue 36, item 3): CDC captures
a computed column as NULL (MicrosoftDocs/sql-docs, docs/relational-databases/track-changes/
track-data-changes-sql-server.md, "Data Type Considerations for Change Data Capture"), so the
pipeline leaves it out of the target, snapshot and change windows alike, and says so in the task
log. The target never holds a NULL where the source has a value; every other column equals the
source. Real pieces only (see cdc_pipeline_harness).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from cdc_pipeline_harness import NAMESPACE, WATERMARK_DAG, PipelineHarness, table_list_variable

from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.testing.replication_check import compare_replicated_tables
from airflow_provider_sqlserver_cdc.testing.table_comparison import describe_all
from sqlserver_cdc_simulator.workload.odbc_client import execute_statements as execute

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ONLY_PRICED = table_list_variable(WATERMARK_DAG, ["dbo_priced"])
COMPUTED = ("total", "total_kept", "label", "doubled")


def test_computed_columns_are_absent_from_the_target_never_null(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    conn = harness.create_cdc_table(
        # computed columns between the others: the captured columns' ordinals (update-mask bits) have gaps
        "CREATE TABLE dbo.priced (id int NOT NULL PRIMARY KEY, qty int NOT NULL, total AS (qty * price), "
        "price decimal(9,2) NULL, total_kept AS (qty * price) PERSISTED, name nvarchar(20) NULL, "
        "label AS (UPPER(name)))",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'priced', @role_name = NULL",
        "INSERT INTO dbo.priced (id, qty, price, name) VALUES (1, 2, 3.50, N'ann'), (2, 1, 10, N'bob'), "
        "(3, 5, NULL, N'cid')",
    )
    # The first run snapshots the table (a plain SELECT, which would see the computed values). Then
    # changes: CDC captures the computed columns of every one of these rows as NULL; a computed column
    # added or dropped is no schema change for the pipeline (never replicated), so the second run goes
    # on under extract.on_schema_change: fail (the example DAG's default).
    first, second = harness.run_watermark_dag_twice(
        lambda: execute(
            conn,
            "INSERT INTO dbo.priced (id, qty, price, name) VALUES (4, 3, 1.25, N'dee')",
            "UPDATE dbo.priced SET qty = 7, name = N'anna' WHERE id = 1",
            "ALTER TABLE dbo.priced ADD doubled AS (qty * 2)",
            "ALTER TABLE dbo.priced DROP COLUMN label",
            "UPDATE dbo.priced SET price = 2 WHERE id = 3",
            "DELETE FROM dbo.priced WHERE id = 2",
        ),
        env=ONLY_PRICED,
    )
    assert "computed columns total, total_kept, label are left out of the target" in first.output
    assert "computed columns total, total_kept, label are left out of the target" in second.output
    for window in harness.window_dirs("dbo_priced"):
        names = [c["name"] for c in json.loads((window / "_manifest.json").read_text())["columns"]]
        assert not set(COMPUTED) & set(names), (window.name, names)

    spark = request.getfixturevalue("spark_reader")
    target = spark.table(f"{NAMESPACE}.dbo_priced")
    assert not set(COMPUTED) & {f.name for f in target.schema.fields}
    rows = {r.id: (r.qty, r.price, r.name) for r in target.where("NOT _cdc_deleted").collect()}
    assert rows == {
        1: (7, Decimal("3.50"), "anna"),
        3: (5, Decimal("2.00"), "cid"),
        4: (3, Decimal("1.25"), "dee"),
    }
    hook = SqlServerCdcHook(harness.conn_id)
    try:
        comparisons = compare_replicated_tables(spark, hook, ["dbo_priced"], NAMESPACE)
    finally:
        hook.close()
    assert all(c.matches for c in comparisons), describe_all(comparisons, limit=10)
    conn.close()
