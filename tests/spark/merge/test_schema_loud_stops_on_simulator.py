"""Loud stops below the DAG: a narrowing ALTER COLUMN on the simulator stops the merge, and the target is unchanged.

The windows are extracted from the simulator by the library (``extract_windows``), as the extract
task does, and merged by the merge job in the shared Spark session. SQL Server and the simulator
propagate a captured column's type change to the change table (about-change-data-capture-sql-server.md,
"Handling Changes to Source Tables"), so the window after the ALTER carries the narrower type and
the ALTER in its ``ddl_events``; the merge refuses it before writing (``spark/merge/source_type_changes``).

A rename cannot be made on the source here: the simulator refuses ``sp_rename`` (40517) because
Microsoft's pages say nothing about it on a tracked table, see
simulator/tests/cdc/test_schema_change_docs.py.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from merge_runs import contents, merge_fails, run, snapshot_count
from variable_store import in_memory_variables

from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_windows
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase

pytestmark = pytest.mark.spark

DAY = dt.datetime(2026, 3, 2)  # server-local, UTC: interval bounds are server times


def at(hh: int, mm: int) -> dt.datetime:
    return DAY.replace(hour=hh, minute=mm)


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    in_memory_variables(
        monkeypatch
    )  # the watermark Variables, which only the DAG's watermark task would write
    monkeypatch.setenv("AIRFLOW_CONN_SIM", sqlserver_simulator.airflow_connection("shop"))
    tables = {"orders": "id int NOT NULL PRIMARY KEY, name varchar(40) NULL, qty int NULL"}
    return ClockedCdcDatabase(sqlserver_simulator, "shop", tables, time_zone="UTC", start=at(9, 0))


def extract(base: Path, hour: int) -> list[str]:
    """Extract the hour's interval of ``dbo_orders``; return the manifests."""
    hook = SqlServerCdcHook("sim")
    try:
        windows = extract_windows(
            hook,
            ["dbo_orders"],
            conn_id="sim",
            base_uri=str(base),
            data_interval_start=at(hour, 0).replace(tzinfo=dt.UTC),
            data_interval_end=at(hour + 1, 0).replace(tzinfo=dt.UTC),
        )
    finally:
        hook.close()
    return [w.manifest_uri for w in windows]


def test_a_narrowed_column_stops_the_merge_naming_table_ddl_and_lsn_and_the_target_is_unchanged(
    source, spark, base, namespace
):
    source.commit_at(at(10, 5), ("INSERT INTO dbo.orders VALUES (1, 'ann', 3), (2, 'bob', 4)",))
    source.capture(until=at(11, 5))
    run(spark, namespace, *extract(base, 10))
    table = f"{namespace}.dbo_orders"
    before, snapshots = contents(spark, table), snapshot_count(spark, table)
    assert before == {1: (False, "ann", 3), 2: (False, "bob", 4)}

    narrow = "ALTER TABLE dbo.orders ALTER COLUMN name varchar(10) NULL"  # the stored names fit
    source.commit_at(at(11, 10), (narrow,))
    source.commit_at(at(11, 15), ("UPDATE dbo.orders SET qty = 5 WHERE id = 1",))
    source.capture(until=at(12, 5))
    manifests = extract(base, 11)
    (manifest,) = [json.loads(Path(m).read_text()) for m in manifests]
    (event,) = manifest["ddl_events"]
    assert event["command"].strip() == narrow

    with merge_fails(
        table, SchemaEvolutionError, match=r"column name of dbo_orders cannot be followed"
    ) as raised:
        run(spark, namespace, *manifests)
    message = str(raised.value.failures[table])
    for part in (table, "varchar(40) -> varchar(10)", narrow, event["lsn"], "resnapshot"):
        assert part in message, (part, message)
    assert snapshot_count(spark, table) == snapshots and contents(spark, table) == before
