"""The bases of the operators that read the source's tables: the consistent read, the load plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.hooks.consistent_point import METHODS, SNAPSHOT_ISOLATION, ConsistentRead
from airflow_provider_sqlserver_cdc.operators.argument_checks import check_one_of
from airflow_provider_sqlserver_cdc.snapshot.load_plan import EXTRACT, SNAPSHOT, resnapshot_requests
from airflow_provider_sqlserver_cdc.source_task import SourceTaskOperator
from airflow_provider_sqlserver_cdc.task_defaults import (
    DEFAULT_ALLOW_TABLE_LOCK_FALLBACK,
    DEFAULT_LOCK_TIMEOUT_SECONDS,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


class ConsistentReadOperator(SourceTaskOperator):
    """
    An operator that reads tables at a consistent point of the source (docs/snapshot.md).

    :param method: ``snapshot_isolation`` (default; needs ALLOW_SNAPSHOT_ISOLATION ON) or
        ``table_lock`` (writers of the table wait for the whole read).
    :param allow_table_lock_fallback: use ``table_lock`` when snapshot isolation is not allowed
        instead of failing.
    :param lock_timeout: seconds to wait for the shared table lock that fixes the consistent point.
    """

    def __init__(
        self,
        *,
        method: str = SNAPSHOT_ISOLATION,
        allow_table_lock_fallback: bool = DEFAULT_ALLOW_TABLE_LOCK_FALLBACK,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_one_of("method", method, METHODS, task_id=self.task_id)
        self.method = method
        self.allow_table_lock_fallback = allow_table_lock_fallback
        self.lock_timeout = lock_timeout

    def consistent_read(self) -> ConsistentRead:
        """How the library's consistent reads (``snapshot_windows``, ``compare_at_consistent_point``) fix their point."""
        return ConsistentRead(self.method, self.lock_timeout, self.allow_table_lock_fallback)


class LoadPlanOperator(SourceTaskOperator):
    """
    The base of CdcLoadPlanOperator and ChangeTrackingLoadPlanOperator: which tables this run snapshots.

    :param resnapshot: tables to snapshot again in every run of this task (templated; usually left
        empty and given per run through ``dag_run.conf = {"resnapshot": [...]}``).
    """

    template_fields: Sequence[str] = ("sqlserver_cdc_conn_id", "database", "resnapshot")
    ui_color = "#fff2cc"

    def __init__(self, *, resnapshot: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.resnapshot = resnapshot or []

    def requested_resnapshots(self, context: Context) -> set[str]:
        """The tables to snapshot again: the ``resnapshot`` argument's and the run's ``dag_run.conf``'s."""
        return set(self.resnapshot) | resnapshot_requests(getattr(context.get("dag_run"), "conf", None))

    @staticmethod
    def push_plan(context: Context, split: dict[str, list[str]]) -> None:
        """Push the XComs ``snapshot`` and ``extract``: the tables of each, for the mapped tasks to expand over."""
        ti = context["ti"]
        ti.xcom_push(key=SNAPSHOT, value=split[SNAPSHOT])
        ti.xcom_push(key=EXTRACT, value=split[EXTRACT])
