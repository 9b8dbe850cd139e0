"""
A table without a primary key or unique index through the watermark example DAG on the simulator
(issue 35, item 2): with the default ``merge.target.keyless: changelog`` the extract and snapshot
take it (they refused it before), and the merge appends its rows to a change log, once each:
the snapshot's rows as inserts, then every change row with its LSN position and operation,
update before-images included. Real pieces only (see cdc_pipeline_harness).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from cdc_pipeline_harness import NAMESPACE, WATERMARK_DAG, PipelineHarness, table_list_variable

from sqlserver_cdc_simulator.workload.odbc_client import execute_statements as execute

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ONLY_HEAP = table_list_variable(WATERMARK_DAG, ["dbo_heap"])


def test_a_keyless_table_is_replicated_as_a_change_log(
    pipeline_harness: PipelineHarness, airflow_db: Path, request: pytest.FixtureRequest
) -> None:
    harness = pipeline_harness
    conn = harness.create_cdc_table(
        "CREATE TABLE dbo.heap (x int NULL, name nvarchar(20) NULL)",  # no primary key, no unique index
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'heap', @role_name = NULL",
        "INSERT INTO dbo.heap (x, name) VALUES (1, N'a'), (1, N'a'), (2, N'b')",
    )
    harness.run_watermark_dag_twice(
        lambda: execute(
            conn,
            "UPDATE dbo.heap SET name = N'c' WHERE x = 1",
            "DELETE FROM dbo.heap WHERE x = 2",
            "INSERT INTO dbo.heap (x, name) VALUES (3, N'd')",
        ),
        env=ONLY_HEAP,
    )

    spark = request.getfixturevalue("spark_reader")
    table = f"{NAMESPACE}.dbo_heap"
    rows = Counter((r._cdc_operation, r.x, r["name"]) for r in spark.table(table).collect())
    assert rows == Counter(
        {
            (2, 1, "a"): 2,  # the snapshot's rows, as inserts
            (2, 2, "b"): 1,
            (3, 1, "a"): 2,  # the update's before-images ...
            (4, 1, "c"): 2,  # ... and after-images, one per row of the keyless table
            (1, 2, "b"): 1,
            (2, 3, "d"): 1,
        }
    )
    properties = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert properties["sqlserver-cdc.table-mode"] == "changelog"
    conn.close()
