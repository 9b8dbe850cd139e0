"""Capture like the Agent's capture job: asynchrony, LSNs, operations, masks, time mapping, jobs."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from cdc_scenario_support import lsn

TABLE = """CREATE TABLE dbo.items (
    id int NOT NULL PRIMARY KEY,
    name nvarchar(40) NULL,
    qty int NULL,
    notes nvarchar(max) NULL
)"""


@pytest.fixture
def items(cdc_db):
    """dbo.items enabled for CDC, with the capture job stopped so scans happen only on request."""
    cdc_db.track(TABLE, "items")
    return cdc_db


def _ct_rows(db):
    return db.rows(
        "SELECT __$start_lsn, __$end_lsn, __$seqval, __$operation, __$update_mask, id, name, qty, notes, __$command_id "
        "FROM cdc.dbo_items_CT ORDER BY __$start_lsn, __$seqval, __$operation"
    )


def test_change_appears_only_after_the_next_scan(items):
    items.execute("INSERT INTO dbo.items (id, name, qty) VALUES (1, N'a', 5)").close()
    assert _ct_rows(items) == []
    items.capture()
    rows = _ct_rows(items)
    assert [(r[3], r[5], r[6]) for r in rows] == [(2, 1, "a")]


def test_one_transaction_shares_its_commit_lsn_and_orders_by_seqval(items):
    items.execute(
        "INSERT INTO dbo.items (id, name, qty, notes) VALUES (1, N'a', 5, N'long'), (2, N'b', 6, NULL)"
    ).close()
    writer = items.connect()
    writer.autocommit = False
    cursor = writer.cursor()
    cursor.execute("INSERT INTO dbo.items (id, name, qty) VALUES (3, N'c', 7)")
    cursor.execute("UPDATE dbo.items SET qty = 50 WHERE id = 1")
    cursor.execute("DELETE FROM dbo.items WHERE id = 2")
    writer.commit()
    writer.close()
    items.capture()
    rows = _ct_rows(items)
    first, second = lsn(rows[0][0]), lsn(rows[2][0])
    assert lsn(rows[1][0]) == first and first < second
    tx = rows[2:]
    assert {lsn(r[0]) for r in tx} == {second}
    assert [r[3] for r in tx] == [2, 3, 4, 1]
    seqvals = [lsn(r[2]) for r in tx]
    assert seqvals[0] < seqvals[1] == seqvals[2] < seqvals[3]
    assert all(s < second for s in seqvals)  # operations are logged before their commit
    assert all(r[1] is None for r in rows)  # __$end_lsn
    # masks: four captured columns; inserts/deletes all bits, the update only qty (ordinal 3)
    assert [bytes(r[4]) for r in tx] == [b"\x0f", b"\x04", b"\x04", b"\x0f"]
    # an unchanged nvarchar(max) column is NULL in the before-image, kept in the after-image
    assert tx[1][8] is None and tx[2][8] == "long"
    # command ids: the update's two images share one
    assert tx[1][9] == tx[2][9]
    assert all(len(r[0]) == 10 and len(r[2]) == 10 for r in rows)


def test_update_of_the_primary_key_is_a_delete_and_an_insert(items):
    items.execute("INSERT INTO dbo.items (id, name, qty) VALUES (1, N'a', 5)").close()
    items.execute("UPDATE dbo.items SET id = 10 WHERE id = 1").close()
    items.capture()
    rows = _ct_rows(items)
    assert [(r[3], r[5], r[6]) for r in rows] == [(2, 1, "a"), (1, 1, "a"), (2, 10, "a")]
    assert lsn(rows[1][0]) == lsn(rows[2][0])


@pytest.fixture
def kolkata_clock(items):
    """On the simulator, a server clock in UTC+05:30, so local time differs from UTC (restored after)."""
    if not items.backend.simulated:
        yield
        return
    clock = items.backend.simulator.clock
    previous = clock.timezone_name
    clock.set_timezone("Asia/Kolkata")
    yield
    clock.set_timezone(previous)


def test_lsn_time_mapping_records_commit_time_in_server_local_time(items, kolkata_clock):
    items.execute("INSERT INTO dbo.items (id) VALUES (1)").close()
    now_local = items.scalar("SELECT GETDATE()")
    now_utc = items.scalar("SELECT SYSUTCDATETIME()")
    utc_offset = round((now_local - now_utc).total_seconds() / 60)
    items.capture()
    start = items.scalar("SELECT TOP 1 __$start_lsn FROM cdc.dbo_items_CT")
    end_time = items.scalar("SELECT tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn = ?", start)
    begin_lsn = items.scalar("SELECT tran_begin_lsn FROM cdc.lsn_time_mapping WHERE start_lsn = ?", start)
    assert isinstance(end_time, dt.datetime)
    assert abs((end_time - now_local).total_seconds()) < 30
    if items.backend.simulated:
        assert utc_offset == 330 and abs((end_time - now_utc).total_seconds() - 330 * 60) < 30
    assert lsn(begin_lsn) < lsn(start)
    assert items.scalar("SELECT sys.fn_cdc_map_lsn_to_time(?)", start) == end_time


def test_quiet_period_rows_advance_the_high_water_mark_and_its_time(items):
    if not items.backend.simulated:
        pytest.skip("moves the server clock")
    items.backend.freeze_clock()
    items.capture()
    first = lsn(items.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
    first_time = items.scalar("SELECT sys.fn_cdc_map_lsn_to_time(sys.fn_cdc_get_max_lsn())")
    items.capture()
    assert lsn(items.scalar("SELECT sys.fn_cdc_get_max_lsn()")) == first  # clock frozen, nothing changed
    items.backend.advance_clock(60)
    items.capture()
    second = lsn(items.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
    second_time = items.scalar("SELECT sys.fn_cdc_map_lsn_to_time(sys.fn_cdc_get_max_lsn())")
    assert second > first
    assert (second_time - first_time).total_seconds() == pytest.approx(60, abs=0.01)
    assert items.scalar("SELECT tran_id FROM cdc.lsn_time_mapping WHERE start_lsn = ?", second) == b"\x00"


def test_one_scan_records_how_far_it_read_past_its_last_change(items):
    # cdc.lsn_time_mapping: "Entries may also be logged for which there are no change tables entries.
    # This allows the table to record the completion of LSN processing in periods of low or no change
    # activity." A scan with one change followed by untracked work records the completion past that work.
    items.execute("CREATE TABLE dbo.audit (id int NOT NULL PRIMARY KEY)").close()
    items.execute("INSERT INTO dbo.items (id, name) VALUES (1, N'a')").close()
    time.sleep(0.05)  # keep the next commit off the change's datetime tick (1/300 s)
    items.execute("INSERT INTO dbo.audit VALUES (1)").close()
    after_untracked = items.scalar("SELECT GETDATE()")
    items.capture()
    change = lsn(_ct_rows(items)[0][0])
    high = lsn(items.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
    assert high > change
    assert items.scalar("SELECT tran_id FROM cdc.lsn_time_mapping WHERE start_lsn = ?", high) == b"\x00"
    # the window ending after the untracked commit is known to be complete
    reached = items.scalar(
        "SELECT sys.fn_cdc_map_time_to_lsn('smallest greater than or equal', ?)", after_untracked
    )
    assert lsn(reached) == high


def _wait_for(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_background_job_captures_and_a_stopped_job_freezes_the_max_lsn(items):
    items.run(
        "EXEC sys.sp_cdc_change_job @job_type = N'capture', @pollinginterval = 1",
        "EXEC sys.sp_cdc_start_job @job_type = N'capture'",
        "INSERT INTO dbo.items (id) VALUES (1)",
    )
    assert _wait_for(lambda: len(_ct_rows(items)) == 1)
    items.execute("EXEC sys.sp_cdc_stop_job @job_type = N'capture'").close()
    time.sleep(1.5)
    frozen = lsn(items.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
    items.execute("INSERT INTO dbo.items (id) VALUES (2)").close()
    time.sleep(2.5)
    assert lsn(items.scalar("SELECT sys.fn_cdc_get_max_lsn()")) == frozen
    assert len(_ct_rows(items)) == 1
    items.execute("EXEC sys.sp_cdc_start_job @job_type = N'capture'").close()
    assert _wait_for(lambda: len(_ct_rows(items)) == 2)
    assert lsn(items.scalar("SELECT sys.fn_cdc_get_max_lsn()")) > frozen
    items.execute("EXEC sys.sp_cdc_stop_job @job_type = N'capture'").close()


def test_cdc_jobs_and_change_job(items):
    jobs = {
        r[0]: r[1:]
        for r in items.rows(
            "SELECT job_type, maxtrans, maxscans, continuous, pollinginterval, retention, threshold "
            "FROM msdb.dbo.cdc_jobs WHERE database_id = DB_ID()"
        )
    }
    assert jobs["capture"][:2] == (500, 10) and jobs["capture"][2] in (1, True) and jobs["capture"][3] == 5
    assert jobs["cleanup"][4:] == (4320, 5000)
    items.execute(
        "EXEC sys.sp_cdc_change_job @job_type = N'capture', @maxtrans = 42, @pollinginterval = 2"
    ).close()
    items.execute("EXEC sys.sp_cdc_change_job @job_type = N'cleanup', @retention = 60").close()
    assert items.rows(
        "SELECT maxtrans, pollinginterval FROM msdb.dbo.cdc_jobs WHERE database_id = DB_ID() AND job_type = N'capture'"
    ) == [(42, 2)]
    assert (
        items.scalar(
            "SELECT retention FROM msdb.dbo.cdc_jobs WHERE database_id = DB_ID() AND job_type = N'cleanup'"
        )
        == 60
    )


def test_log_scan_sessions_report_scans(items):
    items.execute("INSERT INTO dbo.items (id) VALUES (1)").close()
    items.capture()
    rows = items.rows("SELECT session_id, scan_phase, tran_count FROM sys.dm_cdc_log_scan_sessions")
    assert any(r[0] == 0 and r[1] == "Aggregate" for r in rows)
    assert sum(r[2] for r in rows if r[0] != 0) >= 1


def test_dropping_the_database_ends_its_capture_job(backend):
    if not backend.simulated:
        pytest.skip("inspects the simulator's capture job")
    from sqlserver_cdc_simulator.cdc.registration import capture_job_running

    admin = backend.connect()
    cursor = admin.cursor()
    cursor.execute("CREATE DATABASE cdc_dropped")
    cursor.execute("USE cdc_dropped")
    cursor.execute("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY)")
    cursor.execute("EXEC sys.sp_cdc_enable_db")
    cursor.execute(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL"
    )
    cursor.execute("EXEC sys.sp_cdc_change_job @pollinginterval = 1")
    cursor.execute("EXEC sys.sp_cdc_stop_job")
    cursor.execute("EXEC sys.sp_cdc_start_job")
    engine = backend.simulator.engine
    database = engine.database("cdc_dropped")
    job = database.flags["cdc_capture_job"]
    assert capture_job_running(engine, "cdc_dropped")
    cursor.execute("USE master")
    cursor.execute("DROP DATABASE cdc_dropped")
    admin.close()
    assert _wait_for(lambda: not job.running, timeout=5)
