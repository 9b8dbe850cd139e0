"""TargetTablesOperator: how the merge's target tables are named, for the operators that merge or read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_sqlserver_cdc.task_defaults import DEFAULT_TABLE_NAME_TEMPLATE

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance


class TargetTablesOperator(BaseOperator):
    """
    The base of CdcSparkMergeOperator and CdcReconcileOperator: the target table of each capture instance.

    :param namespace: ``catalog.namespace`` holding the target tables (PostgreSQL: the schema). (templated)
    :param table_name_template: target name from the capture instance's source table: ``{schema}``,
        ``{table}``, ``{database}``, ``{capture_instance}``; default ``{schema}_{table}``. (templated)
    :param targets: capture instance -> ``catalog.namespace.table``, overriding the template. (templated)
    """

    def __init__(
        self,
        *,
        namespace: str | None = None,
        table_name_template: str = DEFAULT_TABLE_NAME_TEMPLATE,
        targets: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.namespace = namespace
        self.table_name_template = table_name_template
        self.targets = dict(targets or {})

    def target_table_for(self, instance: CaptureInstance, database: str) -> str:
        """The target table the merge job writes for ``instance`` (its ``--target``, else namespace and template)."""
        if instance.name in self.targets:
            return self.targets[instance.name]
        name = self.table_name_template.format(
            schema=instance.source_schema,
            table=instance.source_table,
            database=database,
            capture_instance=instance.name,
        )
        return f"{self.namespace}.{name}"
