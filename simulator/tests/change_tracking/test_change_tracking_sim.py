"""Change Tracking in the simulator, through pyodbc + FreeTDS as production code talks to it.

Expected behaviour is SQL Server's as documented in MicrosoftDocs/sql-docs
(relational-databases/system-functions/changetable-transact-sql.md,
change-tracking-current-version-transact-sql.md, change-tracking-min-valid-version-transact-sql.md,
track-changes/work-with-change-tracking-sql-server.md) and its error catalogue.
"""

from __future__ import annotations

import datetime as dt
import re
import threading

import pyodbc
import pytest

CHANGES = """
SELECT CT.SYS_CHANGE_VERSION, CT.SYS_CHANGE_CREATION_VERSION, CT.SYS_CHANGE_OPERATION, CT.id, T.a, T.b
FROM CHANGETABLE(CHANGES dbo.t, ?) AS CT LEFT OUTER JOIN dbo.t AS T ON T.id = CT.id
ORDER BY CT.id
"""


def _number(error: pyodbc.Error) -> int:
    found = re.search(r"\((\d+)\)", str(error))
    return int(found.group(1)) if found else -1


@pytest.fixture
def ct(sqlserver_simulator):
    """A database with change tracking on and a tracked table dbo.t (id, a, b); a pyodbc cursor on it."""
    sqlserver_simulator.execute("CREATE DATABASE ctdb")
    sqlserver_simulator.execute(
        "ALTER DATABASE ctdb SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS, AUTO_CLEANUP = ON);"
        "ALTER DATABASE ctdb SET ALLOW_SNAPSHOT_ISOLATION ON"
    )
    conn = sqlserver_simulator.connect("ctdb")
    cursor = conn.cursor()
    cursor.execute("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, a nvarchar(20) NULL, b int NULL)")
    cursor.execute("ALTER TABLE dbo.t ENABLE CHANGE_TRACKING WITH (TRACK_COLUMNS_UPDATED = ON)")
    yield cursor
    conn.close()


def _version(cursor) -> int:
    return cursor.execute("SELECT CHANGE_TRACKING_CURRENT_VERSION()").fetchone()[0]


def test_versions_count_committed_transactions_on_tracked_tables(ct):
    assert _version(ct) == 0
    ct.execute("INSERT INTO dbo.t VALUES (1, N'x', 1), (2, N'y', 2)")
    ct.execute("CREATE TABLE dbo.untracked (id int PRIMARY KEY)")
    ct.execute("INSERT INTO dbo.untracked VALUES (1)")  # not tracked: no new version
    assert _version(ct) == 1
    ct.execute("BEGIN TRANSACTION")
    ct.execute("UPDATE dbo.t SET b = 10 WHERE id = 1")
    ct.execute("DELETE FROM dbo.t WHERE id = 2")
    ct.execute("COMMIT")
    assert _version(ct) == 2
    ct.execute("BEGIN TRANSACTION; UPDATE dbo.t SET b = 11 WHERE id = 1; ROLLBACK")
    assert _version(ct) == 2  # a rolled back transaction has no version
    rows = ct.execute(CHANGES, 0).fetchall()
    assert [tuple(r) for r in rows] == [(2, 1, "I", 1, "x", 10), (2, 1, "D", 2, None, None)]
    rows = ct.execute(CHANGES, 1).fetchall()
    assert [tuple(r) for r in rows] == [(2, 1, "U", 1, "x", 10), (2, 1, "D", 2, None, None)]
    assert ct.execute(CHANGES, 2).fetchall() == []


def test_net_changes_follow_the_documented_rules(ct):
    ct.execute("INSERT INTO dbo.t VALUES (1, N'x', 1), (2, N'y', 2), (3, N'z', 3)")  # v1
    ct.execute("UPDATE dbo.t SET id = 20 WHERE id = 2")  # v2: a key update is a delete and an insert
    ct.execute("DELETE FROM dbo.t WHERE id = 3")  # v3
    ct.execute("INSERT INTO dbo.t VALUES (3, N'again', 30)")  # v4: delete + insert of a key = update
    ct.execute("UPDATE dbo.t SET b = 100 WHERE id = 1")  # v5
    rows = {
        r.id: (r.SYS_CHANGE_OPERATION, r.SYS_CHANGE_VERSION, r.SYS_CHANGE_CREATION_VERSION)
        for r in ct.execute(CHANGES, 1)
    }
    assert rows == {1: ("U", 5, 1), 2: ("D", 2, 1), 3: ("U", 4, 4), 20: ("I", 2, 2)}
    # relative to the baseline: inserted at v1, updated at v5; from 0 it is an insert
    assert [r.SYS_CHANGE_OPERATION for r in ct.execute(CHANGES, 0) if r.id == 1] == ["I"]
    # NULL baseline: every tracked change
    assert len(ct.execute(CHANGES, None).fetchall()) == 4


def test_sys_change_columns_and_is_column_in_mask(ct):
    ct.execute("INSERT INTO dbo.t VALUES (1, N'x', 1)")
    ct.execute("UPDATE dbo.t SET b = 2 WHERE id = 1")
    row = ct.execute(
        "SELECT CT.SYS_CHANGE_COLUMNS,"
        " CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID('dbo.t'), 'b', 'ColumnId'), CT.SYS_CHANGE_COLUMNS),"
        " CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID('dbo.t'), 'a', 'ColumnId'), CT.SYS_CHANGE_COLUMNS)"
        " FROM CHANGETABLE(CHANGES dbo.t, 1) AS CT"
    ).fetchone()
    assert row[0] is not None and (row[1], row[2]) == (True, False)
    ct.execute("UPDATE dbo.t SET a = N'q', b = 3 WHERE id = 1")  # every non-key column: NULL
    assert (
        ct.execute("SELECT SYS_CHANGE_COLUMNS FROM CHANGETABLE(CHANGES dbo.t, 2) AS CT").fetchone()[0] is None
    )


def test_changetable_version_returns_the_rows_latest_version(ct):
    ct.execute("INSERT INTO dbo.t VALUES (1, N'x', 1), (2, N'y', 2)")
    ct.execute("UPDATE dbo.t SET b = 5 WHERE id = 2")
    rows = ct.execute(
        "SELECT SYS_CHANGE_VERSION, id FROM CHANGETABLE(VERSION dbo.t, (id), (2)) AS v"
    ).fetchall()
    assert [tuple(r) for r in rows] == [(2, 2)]
    assert ct.execute("SELECT * FROM CHANGETABLE(VERSION dbo.t, (id), (99)) AS v").fetchall() == []


def test_snapshot_transaction_sees_version_and_rows_together(ct, sqlserver_simulator):
    ct.execute("INSERT INTO dbo.t VALUES (1, N'x', 1)")
    ct.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    ct.execute("BEGIN TRANSACTION")
    before = _version(ct)
    other = sqlserver_simulator.connect("ctdb")
    other.cursor().execute("INSERT INTO dbo.t VALUES (2, N'y', 2)")  # commits while the snapshot is open
    assert _version(other.cursor()) == before + 1
    assert _version(ct) == before  # the snapshot's version ...
    assert [r.id for r in ct.execute(CHANGES, 0)] == [1]  # ... and its changes and rows agree
    assert ct.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 1
    ct.execute("COMMIT")
    ct.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
    assert [r.id for r in ct.execute(CHANGES, 0)] == [1, 2]
    other.close()


def test_version_commits_atomically_with_the_rows(ct, sqlserver_simulator):
    """Readers racing a writer never see a version without its rows, nor rows without their version."""
    stop = threading.Event()
    errors: list[str] = []

    def write() -> None:
        conn = sqlserver_simulator.connect("ctdb")
        cursor = conn.cursor()
        for i in range(1, 60):
            cursor.execute("INSERT INTO dbo.t VALUES (?, N'w', ?)", i, i)
        conn.close()
        stop.set()

    writer = threading.Thread(target=write)
    writer.start()
    ct.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    while not stop.is_set():
        ct.execute("BEGIN TRANSACTION")
        version = _version(ct)
        changes = ct.execute(
            "SELECT COUNT(*), MAX(SYS_CHANGE_VERSION) FROM CHANGETABLE(CHANGES dbo.t, 0) AS c"
        ).fetchone()
        rows = ct.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0]
        ct.execute("COMMIT")
        if changes[0] != rows or (changes[1] or 0) != version:
            errors.append(f"version {version}, changes {tuple(changes)}, rows {rows}")
    writer.join()
    assert errors == []


def test_catalog_views(ct, sqlserver_simulator):
    ct.execute("INSERT INTO dbo.t VALUES (1, N'x', 1)")
    row = ct.execute(
        "SELECT is_track_columns_updated_on, min_valid_version, begin_version, cleanup_version "
        "FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID('dbo.t')"
    ).fetchone()
    assert tuple(row) == (True, 0, 0, 0)
    row = ct.execute(
        "SELECT is_auto_cleanup_on, retention_period, retention_period_units_desc "
        "FROM sys.change_tracking_databases WHERE database_id = DB_ID()"
    ).fetchone()
    assert tuple(row) == (1, 2, "DAYS")
    commits = ct.execute("SELECT commit_ts, commit_time FROM sys.dm_tran_commit_table").fetchall()
    assert [r.commit_ts for r in commits] == [1]


def test_retention_cleanup_raises_the_min_valid_version(ct, sqlserver_simulator):
    clock = sqlserver_simulator.clock
    clock.set(dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC), frozen=True)
    ct.execute("INSERT INTO dbo.t VALUES (1, N'x', 1)")  # v1
    clock.advance(dt.timedelta(days=1))
    ct.execute("UPDATE dbo.t SET b = 2 WHERE id = 1")  # v2
    min_valid = "SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID('dbo.t'))"
    assert ct.execute(min_valid).fetchone()[0] == 0
    clock.advance(dt.timedelta(days=1, hours=1))  # v1 is past the 2-day retention, v2 is not
    assert ct.execute(min_valid).fetchone()[0] == 1
    rows = ct.execute(CHANGES, 0).fetchall()
    assert [(r.SYS_CHANGE_VERSION, r.SYS_CHANGE_OPERATION) for r in rows] == [(2, "U")]
    clock.advance(dt.timedelta(days=3))
    ct.execute("EXEC sys.sp_flush_CT_internal_table_on_demand @TableToClean = 'dbo.t'")
    assert ct.execute(min_valid).fetchone()[0] == 2
    assert ct.execute(CHANGES, 2).fetchall() == []


def test_truncate_resets_the_tables_change_information(ct):
    """manage-change-tracking-sql-server.md, TRUNCATE TABLE: the truncated rows are not tracked and the minimum
    valid version is updated, so a client's check "indicates that the version is too old and a
    reinitialization is required" (a client that synced just before would otherwise miss the deletes)."""
    ct.execute("INSERT INTO dbo.t VALUES (1, N'x', 1)")
    ct.execute("INSERT INTO dbo.t VALUES (2, N'x', 1)")
    synced = _version(ct)  # a client's last sync, right before the truncate
    ct.execute("TRUNCATE TABLE dbo.t")
    min_valid = ct.execute("SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID('dbo.t'))").fetchone()[0]
    assert synced < min_valid  # the documented check: reinitialize
    assert ct.execute(CHANGES, 0).fetchall() == []
    reinitialized = _version(ct)  # a client that reinitializes now is valid again
    assert reinitialized >= min_valid
    ct.execute("INSERT INTO dbo.t VALUES (3, N'x', 1)")
    assert [r[3] for r in ct.execute(CHANGES, reinitialized).fetchall()] == [3]


@pytest.mark.parametrize(
    ("statement", "number"),
    [
        ("SELECT * FROM CHANGETABLE(CHANGES dbo.plain, 0) AS c", 22105),
        ("ALTER TABLE dbo.plain DISABLE CHANGE_TRACKING", 4998),
        ("ALTER TABLE dbo.t ENABLE CHANGE_TRACKING", 4996),
        ("ALTER TABLE dbo.nokey ENABLE CHANGE_TRACKING", 4997),
        ("ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON", 5088),
        ("ALTER DATABASE CURRENT SET CHANGE_TRACKING = OFF", 22115),
        ("SELECT * FROM CHANGETABLE(CHANGES dbo.t, 0)", 22104),  # changetable-transact-sql.md: alias required
        ("SELECT * FROM CHANGETABLE(CHANGES dbo.t, 0) WHERE 1 = 1", 22104),
        ("WITH CHANGE_TRACKING_CONTEXT (NULL) UPDATE dbo.t SET b = 1", 40517),  # "cannot be NULL"
    ],
)
def test_documented_errors(ct, statement, number):
    ct.execute("CREATE TABLE dbo.plain (id int PRIMARY KEY)")
    ct.execute("CREATE TABLE dbo.nokey (id int)")
    with pytest.raises(pyodbc.Error) as excinfo:
        ct.execute(statement)
    assert _number(excinfo.value) == number


def test_database_without_change_tracking(sqlserver_simulator):
    sqlserver_simulator.execute("CREATE DATABASE plaindb")
    conn = sqlserver_simulator.connect("plaindb")
    cursor = conn.cursor()
    cursor.execute("CREATE TABLE dbo.t (id int PRIMARY KEY)")
    assert cursor.execute("SELECT CHANGE_TRACKING_CURRENT_VERSION()").fetchone()[0] is None
    assert (
        cursor.execute("SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID('dbo.t'))").fetchone()[0] is None
    )
    with pytest.raises(pyodbc.Error) as excinfo:
        cursor.execute("ALTER TABLE dbo.t ENABLE CHANGE_TRACKING")
    assert _number(excinfo.value) == 1718
    cursor.execute("ALTER DATABASE plaindb SET CHANGE_TRACKING = ON")
    cursor.execute("ALTER TABLE dbo.t ENABLE CHANGE_TRACKING")
    cursor.execute("ALTER TABLE dbo.t DISABLE CHANGE_TRACKING")
    cursor.execute("ALTER DATABASE plaindb SET CHANGE_TRACKING = OFF")
    assert cursor.execute("SELECT COUNT(*) FROM sys.change_tracking_databases").fetchone()[0] == 0
    conn.close()


def test_commit_table_needs_view_server_state(ct, sqlserver_simulator):
    ct.execute("CREATE LOGIN ct_reader WITH PASSWORD = 'Reader-Pw-1!'")
    ct.execute("CREATE USER ct_reader FOR LOGIN ct_reader")
    odbc = sqlserver_simulator.odbc_connection_string("ctdb").replace("UID=sa;", "UID=ct_reader;")
    odbc = odbc.replace(f"PWD={sqlserver_simulator.password};", "PWD=Reader-Pw-1!;")
    reader = pyodbc.connect(odbc, autocommit=True)
    with pytest.raises(pyodbc.Error) as excinfo:
        reader.execute("SELECT commit_ts FROM sys.dm_tran_commit_table").fetchall()
    assert _number(excinfo.value) == 300
    ct.execute("GRANT VIEW SERVER STATE TO ct_reader")
    assert reader.execute("SELECT COUNT(*) FROM sys.dm_tran_commit_table").fetchval() == 0
    reader.close()
