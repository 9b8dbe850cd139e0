"""What a successful merge tells Airflow besides its XCom: asset events per target table and metrics."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_sqlserver_cdc.assets import emit_asset_events, event_extras, partition_key
from airflow_provider_sqlserver_cdc.metrics import MERGE_SECONDS, emit_rows_applied, timing
from airflow_provider_sqlserver_cdc.spark.merge.arguments import ICEBERG_TARGET, POSTGRES_TARGET
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow, ChangeWindowError


def record_merge_outputs(
    context: Mapping[str, Any],
    *,
    window_value: Any,
    result: Mapping[str, Any] | None,
    outlets: Iterable[Any],
    namespace: str | None,
    table_name_template: str,
    targets: Mapping[str, str],
    seconds: float | None,
    log: logging.Logger,
    target_kind: str = ICEBERG_TARGET,
    jdbc_url: str | None = None,
) -> dict[str, dict[str, Any]]:
    """
    Emit the asset events of the committed tables and the merge metrics; return table -> event extra.

    :param context: the merge task's context (``outlet_events``, ``data_interval_start``).
    :param window_value: the windows the merge was given (extract/snapshot XComs).
    :param result: the job's per-table result; None when the job reported none (cluster deploy mode).
    :param outlets: the merge task's outlets.
    :param namespace: ``catalog.namespace`` of the targets.
    :param table_name_template: the merge's table name template.
    :param targets: capture instance -> table overrides.
    :param seconds: how long the merge (spark-submit) took; None: each table's ``seconds`` in ``result``
        (continuous mode: the micro-batches that applied the run's windows, None when none did now).
    :param log: the task's logger.
    :param target_kind: ``iceberg`` or ``postgres`` (PostgreSQL: the ``version`` the job reports is the
        transaction id that committed the table, carried as ``transaction.xid``, not ``snapshot_id``).
    :param jdbc_url: a PostgreSQL target's URL as resolved at run time (its outlet may be an alias).

    The merge has committed when this runs: a failure here is logged as an error (the events and
    metrics of this run are missing) and does not fail the task, whose retry would merge nothing.
    """
    try:
        if result is None:
            log.info(
                "the merge job reported no per-table result: asset events carry no extra, no row metrics"
            )
            return {}
        try:
            windows = ChangeWindow.from_xcom(window_value)
        except ChangeWindowError as err:  # manifest URIs given instead of window descriptions
            log.info("no window descriptions to describe the asset events with (%s)", err)
            return {}
        extras = event_extras(
            windows, result, namespace=namespace, table_name_template=table_name_template, targets=targets
        )
        partition = partition_key(context.get("data_interval_start"))
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        for extra in extras.values():
            extra["data_interval"] = {"start": _iso(start), "end": _iso(end)}
            if target_kind == POSTGRES_TARGET:
                extra["transaction"] = {"xid": extra.pop("snapshot_id")}
                extra["snapshot_id"] = None
        outlet_events = context.get("outlet_events")
        if outlet_events is not None:
            emitted = emit_asset_events(
                outlet_events, outlets, extras, partition=partition, log=log, jdbc_url=jdbc_url
            )
            log.info("asset events (partition %s) for: %s", partition, ", ".join(emitted) or "none")
        for table, extra in extras.items():
            stream = extra["capture_instances"][-1]
            if any(r["applied_now"] for r in extra["lsn_ranges"]):
                emit_rows_applied(stream, extra["rows"])
            took = seconds if seconds is not None else result[table].get("seconds")
            if took is not None:
                timing(MERGE_SECONDS, stream, float(took))
        return extras
    except Exception:
        log.exception("the merge committed, but its asset events and metrics could not be recorded")
        return {}


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()
