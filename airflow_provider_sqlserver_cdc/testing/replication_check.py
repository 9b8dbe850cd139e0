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
    compare_table,
    target_table_name,
)

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook


def compare_replicated_tables(
    spark: Any,
    hook: SqlServerCdcHook,
    capture_instances: Iterable[str],
    namespace: str,
    table_name_template: str = "{schema}_{table}",
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
    """
    comparisons = []
    for name in capture_instances:
        instance = hook.get_capture_instance(name)
        table = target_table_name(instance, namespace, table_name_template)
        if spark.catalog.tableExists(table):
            spark.catalog.refreshTable(table)
        conn = hook.new_connection()
        try:
            comparisons.append(compare_table(spark, conn, instance, table))
        finally:
            conn.close()
    return comparisons
