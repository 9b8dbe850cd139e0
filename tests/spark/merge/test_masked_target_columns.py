"""A target column is masked or in clear for good: windows that switch it are refused before the merge writes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError
from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan
from airflow_provider_sqlserver_cdc.spark.merge.source_type_changes import check_source_types
from airflow_provider_sqlserver_cdc.spark.merge.spark_types import source_type_comment

CLEAR = {"name": "phone", "sql_type": "varchar", "max_length": 20}
MASKED = {**CLEAR, "masked": "truncate(3)", "source_type": "varchar(20)"}


def plan_of(column: dict) -> TargetPlan:
    manifest = SimpleNamespace(
        capture_instance="dbo_customers",
        columns=[column],
        lsn_range=(0x0A, 0x0B),
        backfill=None,
        ddl_events=None,
    )
    return TargetPlan("lake.cdc.dbo_customers", windows=[SimpleNamespace(manifest=manifest, label="w")])


def test_the_comment_names_the_rule_and_the_same_masking_every_run_is_no_change():
    comment = source_type_comment(MASKED)
    assert comment == "SQL Server varchar(20); masked: truncate(3) of varchar(20)"
    assert check_source_types(plan_of(MASKED), {"phone": comment}) == []
    assert check_source_types(plan_of(CLEAR), {"phone": "SQL Server varchar(20)"}) == []


@pytest.mark.parametrize(
    ("column", "recorded", "problem"),
    [
        (
            MASKED,
            "SQL Server varchar(20)",
            "the windows mask it (truncate(3)) but the table holds its values in clear",
        ),
        (CLEAR, "SQL Server varchar(20); masked: truncate(3) of varchar(20)", "the table holds it masked"),
    ],
)
def test_masking_switched_on_an_existing_target_is_refused_naming_the_resnapshot(column, recorded, problem):
    with pytest.raises(SchemaEvolutionError) as info:
        check_source_types(plan_of(column), {"phone": recorded})
    message = str(info.value)
    for part in (
        "lake.cdc.dbo_customers",
        "phone",
        problem,
        '"resnapshot": ["dbo_customers"]',
        "column-masking.md",
    ):
        assert part in message
