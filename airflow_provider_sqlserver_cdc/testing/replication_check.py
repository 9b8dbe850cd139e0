"""
Compare every replicated table with its source: the check ``make demo`` prints and the end-to-end tests assert.

::

    hook = SqlServerCdcHook("sqlserver_cdc")
    comparisons = compare_replicated_tables(spark, hook, ["dbo_orders"], namespace="lake.cdc")
    assert all_match(comparisons), describe_all(comparisons)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.testing.table_comparison import (
    TableComparison,
    compare_each_source,
    compare_table,
    target_table_name,
)

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook


def compare_replicated_tables(
    spark: Any,
    hook: SqlServerCdcHook,
    capture_instances: Iterable[str],
    namespace: str,
    table_name_template: str = "{schema}_{table}",
    *,
    every_source_column: bool = True,
) -> list[TableComparison]:
    """
    Compare the source table of each capture instance with its Iceberg target, in order.

    Each target's metadata is read afresh (other processes commit to it); each source is read on
    a new connection of its own.

    :param spark: a SparkSession configured with the targets' catalog.
    :param hook: the CDC hook of the source database.
    :param capture_instances: the capture instances whose tables to compare.
    :param namespace: the targets' ``catalog.namespace`` (the merge job's ``--namespace``).
    :param table_name_template: the merge job's ``--table-name-template``.
    :param every_source_column: a source column the capture instance does not follow (added,
        dropped or retyped on the source) is a difference; False for instances created with a
        ``@captured_column_list`` on purpose.
    """

    def compare(conn: Any, instance: CaptureInstance) -> TableComparison:
        table = target_table_name(instance, namespace, table_name_template)
        if spark.catalog.tableExists(table):
            spark.catalog.refreshTable(table)
        source_columns = hook.get_source_columns(instance.name) if every_source_column else None
        return compare_table(spark, conn, instance, table, source_columns)

    return compare_each_source(hook, capture_instances, hook.get_capture_instance, compare)


def compare_tracked_tables(
    spark: Any,
    hook: ChangeTrackingHook,
    tables: Iterable[str],
    namespace: str,
    table_name_template: str = "{schema}_{table}",
) -> list[TableComparison]:
    """
    Compare each Change Tracking table (``schema.table``) with its Iceberg target, in order: every
    column the table has now (a tracked table is described as it is), each target read afresh.

    :param hook: the Change Tracking hook of the source database.
    """

    def compare(conn: Any, instance: CaptureInstance) -> TableComparison:
        table = target_table_name(instance, namespace, table_name_template)
        spark.catalog.refreshTable(table)
        return compare_table(spark, conn, instance, table)

    return compare_each_source(hook, tables, hook.get_tracked_table, compare)
