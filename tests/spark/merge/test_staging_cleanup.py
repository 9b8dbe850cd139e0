"""Staging tables left by a driver that crashed mid-merge are dropped once old enough; others are left alone.

That a staged MERGE does it first: test_storage_partitioned_merge.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.spark.merge import staging_cleanup
from airflow_provider_sqlserver_cdc.spark.merge.staged_merge import staging_table_name
from airflow_provider_sqlserver_cdc.spark.merge.staging_cleanup import (
    drop_orphaned_staging_tables,
    last_change_millis,
)

pytestmark = pytest.mark.spark


def tables_in(spark: Any, namespace: str) -> set[str]:
    return {r.tableName for r in spark.sql(f"SHOW TABLES IN {namespace}").collect()}


def create(spark: Any, table: str) -> str:
    spark.sql(f"CREATE TABLE {table} (id int) USING iceberg")  # metadata only: no Spark job
    return table.rpartition(".")[2]


def test_only_the_targets_own_old_staging_tables_are_dropped(spark: Any, namespace: str, table: str) -> None:
    create(spark, table)
    orphans = {create(spark, staging_table_name(table)) for _ in range(2)}
    others = {
        create(spark, staging_table_name(f"{namespace}.dbo_customers")),  # another target's
        create(spark, f"{table}__cdc_staging_mine"),  # not a name the job gives
    }
    newest = max(last_change_millis(spark, f"{namespace}.{name}") for name in orphans)

    # Younger than the age: another merge may be using them.
    assert drop_orphaned_staging_tables(spark, table, now_millis=newest + 3_600_000) == []
    assert tables_in(spark, namespace) == {"dbo_orders", *orphans, *others}

    a_day_later = newest + int(staging_cleanup.ORPHAN_AGE.total_seconds() * 1000) + 1
    dropped = drop_orphaned_staging_tables(spark, table, now_millis=a_day_later)
    assert sorted(dropped) == sorted(f"{namespace}.{name}" for name in orphans)
    assert tables_in(spark, namespace) == {"dbo_orders", *others}
