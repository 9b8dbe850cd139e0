"""The MERGE statement."""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.spark.merge.key_filter import KeyRange
from airflow_provider_sqlserver_cdc.spark.merge.statements import merge_sql


def test_merge_sql_bounds_the_target_by_the_source_key_range() -> None:
    key_range = KeyRange("id", -5, 42, "INT")
    statement = merge_sql("lake.ns.t", "src", ["id", "name"], ["id"], False, key_range)
    assert "ON t.`id` = s.`id` AND t.`id` BETWEEN -5 AND 42 WHEN MATCHED" in statement
    assert "BETWEEN" not in merge_sql("lake.ns.t", "src", ["id", "name"], ["id"], False)
