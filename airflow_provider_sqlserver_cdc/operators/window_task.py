"""WindowTaskMixin: the run glue of CdcExtractOperator and CdcSnapshotOperator (windows in, XCom out)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.capture_instance import capture_instance_names
from airflow_provider_sqlserver_cdc.hooks.source_hook import SourceHookMixin

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow


class WindowTaskMixin(SourceHookMixin):
    """
    Run a library function that writes one window per capture instance; return its XCom.

    The operator using it sets ``capture_instance``, ``base_path`` and ``require_key_columns``
    besides the source-connection arguments of :class:`SourceHookMixin`.
    """

    capture_instance: str | list[str]
    base_path: str
    require_key_columns: bool

    def write_windows(
        self, context: Context, write: Callable[..., list[ChangeWindow]], **options: Any
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """
        Call ``write`` with the source hook and the task's common arguments; return the windows' XCom.

        :param context: the task's context.
        :param write: ``extract_windows`` or ``snapshot_windows``.
        :param options: the operator's own arguments of ``write``.
        :return: ``ChangeWindow.to_xcom()`` of the window, or the list of them when
            ``capture_instance`` is a list.
        """
        with self.source_hook() as hook:
            windows = write(
                hook,
                capture_instance_names(self.capture_instance),
                conn_id=self.sqlserver_cdc_conn_id,
                base_uri=self.base_path,
                require_keys=self.require_key_columns,
                dag_id=getattr(self, "dag_id", None),
                run_id=getattr(context.get("dag_run"), "run_id", None),
                log=getattr(self, "log", None),
                **options,
            )
        values = [w.to_xcom() for w in windows]
        return values[0] if isinstance(self.capture_instance, str) else values
