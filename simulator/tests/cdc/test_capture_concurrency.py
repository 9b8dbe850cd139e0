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

from sqlserver_cdc_simulator.workload import (
    SAMPLE_TABLES,
    SampleDatabase,
    Workload,
    WorkloadMix,
    read_all_changes,
    replay_changes,
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
    seen: dict[str, list[tuple[Any, ...]]] = {t.capture_instance: [] for t in TABLES}
    previous: bytes | None = None
    windows = 0

    def read_up_to_max() -> None:
        nonlocal previous, windows
        high = cursor.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchone()[0]
        if high is None or (previous is not None and high <= previous):
            return
        for table in TABLES:
            low = None
            if previous is not None:
                low = cursor.execute("SELECT sys.fn_cdc_increment_lsn(?)", previous).fetchone()[0]
            seen[table.capture_instance].extend(read_all_changes(cursor, table, low, high))
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
        everything = read_all_changes(cursor, table, high=high)
        # same rows, same order: nothing missed, nothing twice
        assert seen[table.capture_instance] == everything, table.capture_instance
        assert replay_changes(table, everything) == workload.model[table.qualified_name], (
            table.capture_instance
        )
    reader.close()
