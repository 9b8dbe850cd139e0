"""The maintenance job on history and change-log tables: compacted, their history kept whole."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from merge_runs import run
from test_history_targets import change_stream, history_of, keyless_window, log_rows, windows_of
from window_builder import ChangeLog, flatten

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import MaintenanceSettings
from airflow_provider_sqlserver_cdc.spark.maintenance.job import run as maintain

pytestmark = pytest.mark.spark


def test_history_tombstones_are_not_purged_and_a_change_log_is_compacted(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    first, second, third = change_stream()
    manifests = windows_of(base, first, second, third)
    for manifest in manifests:
        run(spark, namespace, manifest, table_modes={"dbo_orders": "history"})
    log = ChangeLog()
    for rows in ([log.insert(x=1, name="a")], [log.delete(x=1, name="a")]):
        run(spark, namespace, keyless_window(base, flatten(rows)))
    heap = f"{namespace}.dbo_heap"
    history, changes = history_of(spark, table), log_rows(spark, heap)
    everything = Lsn.from_int(0xFFFFFF)  # the source's cleanup passed every change
    settings = MaintenanceSettings(
        namespace=namespace,
        cdc_min_lsn={"dbo_orders": everything, "dbo_heap": everything},
        tombstone_margin_hours=0.0,
        force=True,
        snapshot_retention_hours=0.0,
        retain_last=1,
    )
    result = maintain(spark, settings, dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    assert result[table]["status"] == result[heap]["status"] == "maintained"
    assert result[table]["tombstones_purged"] == 0
    assert history_of(spark, table) == history  # the tombstones (deletes) are part of the history
    assert log_rows(spark, heap) == changes
