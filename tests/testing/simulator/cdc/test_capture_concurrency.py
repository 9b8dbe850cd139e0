"""Consecutive windows read while a workload commits and the capture job runs lose and repeat nothing.

This is the guarantee the provider builds on: every change with ``__$start_lsn`` up to a max LSN that
``sys.fn_cdc_get_max_lsn()`` once returned is already in the change table, so windows
``[increment(previous max), current max]`` read one after another add up to all changes.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pyodbc

from airflow_provider_sqlserver_cdc.testing.workload import (
    SAMPLE_TABLES,
    SampleDatabase,
    Workload,
    WorkloadMix,
)

TABLES = SAMPLE_TABLES[:3]  # customers, orders, order_lines


def test_consecutive_windows_during_a_workload_add_up_to_every_change(sqlserver_simulator: Any):
    database = f"cc_{uuid.uuid4().hex[:8]}"
    reader = sqlserver_simulator.connect()
    SampleDatabase.create(reader, database=database, tables=TABLES)
    cursor = reader.cursor()
    cursor.execute(f"USE [{database}]")
    # a fast capture job next to the synchronous scans below
    cursor.execute("EXEC sys.sp_cdc_change_job @pollinginterval = 1")
    cursor.execute("EXEC sys.sp_cdc_stop_job")
    cursor.execute("EXEC sys.sp_cdc_start_job")

    writer = pyodbc.connect(sqlserver_simulator.odbc_connection_string(database), autocommit=True)
    workload = Workload(seed=31, tables=TABLES, mix=WorkloadMix(max_statements=3))
    errors: list[BaseException] = []

    def write() -> None:
        try:
            workload.run(writer, transactions=250)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    thread = threading.Thread(target=write)
    thread.start()
    names = {t.capture_instance: [c.name for c in t.writable_columns] for t in TABLES}
    seen: dict[str, list[tuple[Any, ...]]] = {ci: [] for ci in names}
    previous: bytes | None = None
    windows = 0

    def read_up_to_max() -> None:
        nonlocal previous, windows
        high = cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0]
        if high is None or (previous is not None and high <= previous):
            return
        for ci, cols in names.items():
            if previous is None:
                low = cursor.execute("SELECT sys.fn_cdc_get_min_lsn(?)", ci).fetchone()[0]
            else:
                low = cursor.execute("SELECT sys.fn_cdc_increment_lsn(?)", previous).fetchone()[0]
            cursor.execute(
                f"SELECT __$start_lsn, __$seqval, __$operation, {', '.join(f'[{c}]' for c in cols)} "
                f"FROM cdc.fn_cdc_get_all_changes_{ci}(?, ?, N'all')",
                low,
                high,
            )
            seen[ci].extend(tuple(r) for r in cursor.fetchall())
        previous = high
        windows += 1

    while thread.is_alive():
        sqlserver_simulator.run_capture_scan(database)
        read_up_to_max()
        time.sleep(0.02)
    thread.join()
    assert not errors, errors
    sqlserver_simulator.run_capture_scan(database)
    read_up_to_max()
    cursor.execute("EXEC sys.sp_cdc_stop_job")
    writer.close()

    assert windows > 3
    high = cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0]
    for table in TABLES:
        ci, cols = table.capture_instance, names[table.capture_instance]
        low = cursor.execute("SELECT sys.fn_cdc_get_min_lsn(?)", ci).fetchone()[0]
        cursor.execute(
            f"SELECT __$start_lsn, __$seqval, __$operation, {', '.join(f'[{c}]' for c in cols)} "
            f"FROM cdc.fn_cdc_get_all_changes_{ci}(?, ?, N'all')",
            low,
            high,
        )
        everything = [tuple(r) for r in cursor.fetchall()]
        assert seen[ci] == everything, ci  # same rows, same order: nothing missed, nothing twice
        replica: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in everything:
            values = dict(zip(cols, row[3:], strict=True))
            key = tuple(values[k] for k in table.key)
            if row[2] == 1:
                del replica[key]
            else:
                replica[key] = values
        assert replica == workload.model[table.qualified_name], ci
    reader.close()
