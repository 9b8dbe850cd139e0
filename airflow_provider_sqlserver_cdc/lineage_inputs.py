"""
Source tables as a task's lineage inputs through Airflow's hook-lineage collector.

A source table's asset is ``mssql://<host>:<port>/<database>/<schema>/<table>`` (the scheme of the
``microsoft-mssql`` provider, ``assets.mssql_asset_uri``), and the host is known only when the task
runs (from its connection): the DAG declares no source inlets, since the factory reads no connection
at parse time. The extract and snapshot tasks report each window's source table to the collector
instead (the Airflow-native route for assets known at run time), with the source hook as the
lineage context; the collector hands them to the registered readers (the OpenLineage provider's,
for one). Without a reader Airflow's collector is a no-op. Lineage never fails a task.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.assets import mssql_asset_uri

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

LOG = logging.getLogger(__name__)


def source_uris(windows: Iterable[ChangeWindow]) -> list[str]:
    """The ``mssql://`` URIs of the windows' source tables, each once (windows without a server: none)."""
    uris: list[str] = []
    for window in windows:
        source = window.source
        if not source.get("server"):
            continue
        uri = mssql_asset_uri(
            source["server"], source.get("database", ""), source.get("schema", ""), source.get("table", "")
        )
        if uri not in uris:
            uris.append(uri)
    return uris


def report_source_inputs(hook: Any, windows: Iterable[ChangeWindow], collector: Any = None) -> list[str]:
    """Add the windows' source tables to the hook-lineage collector as inputs; return their URIs.

    :param hook: the source hook that read them (the lineage context).
    :param windows: the windows the task wrote.
    :param collector: the collector; default Airflow's (``airflow.sdk.lineage.get_hook_lineage_collector``).
    """
    uris = source_uris(windows)
    try:
        if collector is None:
            from airflow.sdk.lineage import get_hook_lineage_collector

            collector = get_hook_lineage_collector()
        for uri in uris:
            collector.add_input_asset(context=hook, uri=uri)
    except Exception as err:  # lineage is information: the windows are written
        LOG.warning("could not report the source tables %s to the hook-lineage collector: %s", uris, err)
    return uris
