"""A source column narrowed or retyped is refused before the merge writes; widening goes on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

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
        (None, "SQL Server int"),  # a column without the comment (created elsewhere): not judged
    ],
)
def test_widening_and_equal_types_are_followed(recorded, window):
    assert narrowing(recorded, window) is None


def test_the_error_names_table_column_ddl_and_lsn_and_the_remedy():
    manifest = SimpleNamespace(
        capture_instance="dbo_customers",
        columns=[{"name": "Note", "sql_type": "varchar", "max_length": 20}],
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
