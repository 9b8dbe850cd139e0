"""History and change-log targets fed by the library's extraction from the SQL Server simulator.

The windows are extracted as the extract task does (``extract_windows``, through ODBC), with a table
without a primary key beside a keyed one; the merge job merges them out of order and again. The
expected history and change log are computed in Python from the windows' own change rows (the
source's change table), by the rule of ``test_history_targets.expected_history``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from merge_runs import run
from test_history_targets import expected_history, history_of, log_rows
from window_builder import Row

from airflow_provider_sqlserver_cdc import state
from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_windows
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from sqlserver_cdc_simulator.clocked_database import ClockedCdcDatabase

pytestmark = pytest.mark.spark

DAY = dt.datetime(2026, 3, 2)  # server-local, UTC: interval bounds are server times
TABLES = {
    "orders": "id int NOT NULL PRIMARY KEY, name varchar(40) NULL, amount decimal(10,2) NULL",
    "heap": "x int NULL, name varchar(20) NULL",  # no primary key, no unique index
}


def at(hh: int, mm: int) -> dt.datetime:
    return DAY.replace(hour=hh, minute=mm)


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    values: dict[str, str] = {}

    class Variables:  # the watermark Variables, which only the DAG's watermark task would write
        get = staticmethod(lambda k, default=None: values.get(k, default))
        set = staticmethod(values.__setitem__)

    monkeypatch.setattr(state, "_variable", lambda: Variables)
    monkeypatch.setenv("AIRFLOW_CONN_SIM", sqlserver_simulator.airflow_connection("shop"))
    return ClockedCdcDatabase(sqlserver_simulator, "shop", TABLES, time_zone="UTC", start=at(9, 0))


def extract(base: Path, hour: int) -> dict[str, str]:
    """Extract the hour's interval of both tables, the keyless one allowed; return capture instance -> manifest."""
    hook = SqlServerCdcHook("sim")
    try:
        windows = extract_windows(
            hook,
            ["dbo_orders", "dbo_heap"],
            conn_id="sim",
            base_uri=str(base),
            data_interval_start=at(hour, 0).replace(tzinfo=dt.UTC),
            data_interval_end=at(hour + 1, 0).replace(tzinfo=dt.UTC),
            require_keys=False,
        )
    finally:
        hook.close()
    return {w.capture_instance: w.manifest_uri for w in windows}


def change_rows(manifest: str, columns: tuple[str, ...]) -> list[Row]:
    """The change rows of a window's Parquet files, as the window builder's rows."""
    rows = []
    for part in sorted(Path(manifest).parent.glob("part-*.parquet")):
        for record in pq.read_table(part).to_pylist():
            committed = record["__$commit_time"]
            rows.append(
                Row(
                    int.from_bytes(record["__$start_lsn"], "big"),
                    int.from_bytes(record["__$seqval"], "big"),
                    record["__$operation"],
                    {c: record[c] for c in columns},
                    committed if committed.tzinfo else committed.replace(tzinfo=dt.UTC),
                )
            )
    return rows


def test_history_and_keyless_change_log_from_the_simulator_merged_out_of_order(
    source, spark, base, namespace
):
    source.commit_at(
        at(10, 5),
        ("INSERT INTO dbo.orders VALUES (1, 'ann', 3.00), (2, 'bob', 4.00), (3, 'cy', NULL)",),
        ("INSERT INTO dbo.heap VALUES (1, 'a'), (1, 'a'), (2, 'b')",),
    )
    source.commit_at(at(10, 20), ("UPDATE dbo.orders SET name = 'ann2' WHERE id = 1",))
    source.commit_at(
        at(11, 5),
        ("DELETE FROM dbo.orders WHERE id = 2",),
        ("UPDATE dbo.heap SET name = 'c' WHERE x = 1",),
    )
    source.commit_at(at(11, 30), ("UPDATE dbo.orders SET amount = 5.50 WHERE id = 3",))
    source.commit_at(
        at(12, 10),
        ("INSERT INTO dbo.orders VALUES (2, 'bob again', NULL)",),
        ("DELETE FROM dbo.heap WHERE x = 2",),
        ("UPDATE dbo.orders SET id = 10 WHERE id = 1",),  # a primary-key change
    )
    source.capture(until=at(13, 5))
    hours = [extract(base, hour) for hour in (10, 11, 12)]
    orders = [h["dbo_orders"] for h in hours]
    heap = [h["dbo_heap"] for h in hours]
    modes = {"table_modes": {"dbo_orders": "history"}}  # dbo_heap: a change log, as it has no key

    for hour in (2, 0, 1):  # the newest hour first, then the backfills
        run(spark, namespace, orders[hour], heap[hour], **modes)
    run(spark, namespace, *orders, *heap, **modes)  # a replay of everything: skipped

    history = f"{namespace}.dbo_orders"
    expected = expected_history([r for m in orders for r in change_rows(m, ("id", "name", "amount"))])
    assert history_of(spark, history) == expected
    current = {r.id: r["name"] for r in spark.sql(f"SELECT * FROM {history} WHERE _is_current").collect()}
    assert current == {2: "bob again", 3: "cy", 10: "ann2"}
    closed = spark.sql(
        f"SELECT CAST(_valid_to AS STRING) AS t FROM {history} WHERE id = 1 AND NOT _cdc_deleted AND name = 'ann2'"
    ).first()
    assert closed.t == "2026-03-02 12:10:00"  # the key change closed the old key's version at its commit time

    heap_rows = [r for m in heap for r in change_rows(m, ("x", "name"))]
    expected_log = Counter(
        (r.start_lsn, r.seqval, r.operation, r.values["x"], r.values["name"]) for r in heap_rows
    )
    assert log_rows(spark, f"{namespace}.dbo_heap") == expected_log
    assert sorted(k[2] for k in expected_log.elements()) == [1, 2, 2, 2, 3, 3, 4, 4]  # before-images kept
