"""A source column narrowed or retyped is refused before the merge writes; widening goes on."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from merge_runs import contents, merge_fails, run, snapshot_count
from window_builder import INT_KEY, NAME, ChangeLog, Column, WindowSpec, write_window

from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError
from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan
from airflow_provider_sqlserver_cdc.spark.merge.source_type_changes import check_source_types, narrowing


@pytest.mark.parametrize(
    ("recorded", "window"),
    [
        ("SQL Server varchar(50)", "SQL Server varchar(20)"),
        ("SQL Server nvarchar(max)", "SQL Server nvarchar(200)"),
        ("SQL Server bigint", "SQL Server int"),
        ("SQL Server decimal(10,2)", "SQL Server decimal(8,2)"),
        ("SQL Server decimal(10,2)", "SQL Server decimal(10,3)"),  # fewer integer digits
        ("SQL Server datetime2(7)", "SQL Server datetime2(3)"),
        ("SQL Server int", "SQL Server nvarchar(20)"),
        ("SQL Server text", "SQL Server varchar(50)"),  # text holds as much as varchar(max)
        ("SQL Server ntext", "SQL Server nvarchar(4000)"),
        ("SQL Server image", "SQL Server varbinary(8000)"),
        ("SQL Server nvarchar(200)", "SQL Server sysname"),  # sysname is nvarchar(128)
        ("SQL Server uniqueidentifier", "SQL Server varchar(36)"),
    ],
)
def test_narrowing_and_retyping_cannot_be_followed(recorded, window):
    assert narrowing(recorded, window)


@pytest.mark.parametrize(
    ("recorded", "window"),
    [
        ("SQL Server varchar(20)", "SQL Server varchar(50)"),
        ("SQL Server varchar(20)", "SQL Server varchar(max)"),
        ("SQL Server int", "SQL Server bigint"),
        ("SQL Server decimal(8,2)", "SQL Server decimal(12,2)"),
        ("SQL Server int", "SQL Server int"),
        ("SQL Server varchar(50)", "SQL Server text"),
        ("SQL Server text", "SQL Server varchar(max)"),
        ("SQL Server sysname", "SQL Server nvarchar(128)"),
        ("SQL Server nvarchar(100)", "SQL Server sysname"),
        ("SQL Server uniqueidentifier", "SQL Server uniqueidentifier"),
        (None, "SQL Server int"),  # a column without the comment (created elsewhere): not judged
    ],
)
def test_widening_and_equal_types_are_followed(recorded, window):
    assert narrowing(recorded, window) is None


def test_the_error_names_table_column_ddl_and_lsn_and_the_remedy():
    manifest = SimpleNamespace(
        capture_instance="dbo_customers",
        columns=[{"name": "Note", "sql_type": "varchar", "max_length": 20}],
        lsn_range=(0x0A, 0x0B),
        backfill=None,
        ddl_events=[
            {
                "command": "ALTER TABLE dbo.customers ALTER COLUMN note varchar(20)",
                "lsn": "0x0A",
                "time": None,
            }
        ],
    )
    plan = TargetPlan("lake.cdc.dbo_customers", windows=[SimpleNamespace(manifest=manifest, label="w")])
    with pytest.raises(SchemaEvolutionError) as info:
        check_source_types(plan, {"note": "SQL Server varchar(50)"})
    message = str(info.value)
    for part in (
        "lake.cdc.dbo_customers",
        "Note",
        "varchar(50) -> varchar(20)",
        "ALTER COLUMN note",
        "0x0A",
        "resnapshot",
    ):
        assert part in message


@pytest.mark.spark
def test_a_narrowed_column_stops_the_merge_of_its_table_and_nothing_is_written(spark, base, namespace):
    log = ChangeLog(start=0x100)
    first = write_window(
        base, WindowSpec("dbo_orders", 0x100, 0x1FF, log.insert(id=1, name="a"), columns=(INT_KEY, NAME))
    )
    run(spark, namespace, first)
    table = f"{namespace}.dbo_orders"
    before, snapshots = contents(spark, table), snapshot_count(spark, table)

    narrow = Column("name", "nvarchar", NAME.arrow_type, max_length=40)
    log = ChangeLog(start=0x200)
    second = write_window(
        base, WindowSpec("dbo_orders", 0x200, 0x2FF, log.insert(id=2, name="b"), columns=(INT_KEY, narrow))
    )
    manifest = json.loads(Path(second).read_text())
    manifest["ddl_events"] = [
        {
            "command": "ALTER TABLE dbo.orders ALTER COLUMN name nvarchar(20)",
            "lsn": "0x00000000000000000201",
            "time": None,
        }
    ]
    Path(second).write_text(json.dumps(manifest))
    with merge_fails(
        table, SchemaEvolutionError, match=r"name of dbo_orders cannot be followed: it was narrowed"
    ):
        run(spark, namespace, second)
    assert snapshot_count(spark, table) == snapshots and contents(spark, table) == before
