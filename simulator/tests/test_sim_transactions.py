"""Transactions, savepoints, SNAPSHOT isolation and lock hints between concurrent connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pymssql
import pyodbc
import pytest

DRIVER_ERRORS = (pyodbc.Error, pymssql.Error)


def _count(cur: Any, table: str = "dbo.t") -> int:
    cur.execute(f"SELECT COUNT(*) FROM {table}")
    return cur.fetchone()[0]


@pytest.fixture
def table(cursor_after: Any) -> Any:
    return cursor_after(
        "CREATE TABLE dbo.t (id int PRIMARY KEY, v int NOT NULL)", "INSERT INTO dbo.t VALUES (1, 10), (2, 20)"
    )


def test_begin_commit_rollback_and_trancount(table: Any) -> None:
    cur = table
    cur.execute("BEGIN TRAN")
    cur.execute("INSERT INTO dbo.t VALUES (3, 30)")
    cur.execute("SELECT @@TRANCOUNT")
    assert cur.fetchone()[0] == 1
    cur.execute("ROLLBACK TRAN")
    assert _count(cur) == 2
    cur.execute("BEGIN TRANSACTION")
    cur.execute("BEGIN TRANSACTION")
    cur.execute("INSERT INTO dbo.t VALUES (3, 30)")
    cur.execute("COMMIT TRANSACTION")
    cur.execute("SELECT @@TRANCOUNT")
    assert cur.fetchone()[0] == 1
    cur.execute("COMMIT")
    cur.execute("SELECT @@TRANCOUNT")
    assert cur.fetchone()[0] == 0
    assert _count(cur) == 3


def test_save_transaction_rolls_back_to_the_savepoint(table: Any) -> None:
    cur = table
    cur.execute("BEGIN TRAN")
    cur.execute("INSERT INTO dbo.t VALUES (3, 30)")
    cur.execute("SAVE TRANSACTION before_four")
    cur.execute("INSERT INTO dbo.t VALUES (4, 40)")
    cur.execute("UPDATE dbo.t SET v = 0")
    cur.execute("ROLLBACK TRANSACTION before_four")
    cur.execute("COMMIT")
    cur.execute("SELECT id, v FROM dbo.t ORDER BY id")
    assert [tuple(r) for r in cur.fetchall()] == [(1, 10), (2, 20), (3, 30)]


def test_failed_statement_inside_a_transaction_keeps_earlier_work(table: Any) -> None:
    cur = table
    cur.execute("BEGIN TRAN")
    cur.execute("INSERT INTO dbo.t VALUES (3, 30)")
    with pytest.raises(DRIVER_ERRORS):
        cur.execute("INSERT INTO dbo.t VALUES (4, 40), (1, 99)")
    cur.execute("COMMIT")
    cur.execute("SELECT id FROM dbo.t ORDER BY id")
    assert [r[0] for r in cur.fetchall()] == [1, 2, 3]


def test_driver_transactions_commit_and_rollback(sql_backend: Any, driver: str) -> None:
    setup = _setup(sql_backend, "CREATE TABLE dbo.t (id int PRIMARY KEY)")
    if driver == "pyodbc":
        conn = sql_backend.pyodbc(autocommit=False)  # Transaction Manager requests
    else:
        conn = sql_backend.pymssql(autocommit=False)  # BEGIN TRAN / COMMIT TRAN text
    cur = conn.cursor()
    cur.execute("INSERT INTO dbo.t VALUES (1)")
    conn.rollback()
    cur.execute("INSERT INTO dbo.t VALUES (2)")
    conn.commit()
    conn.close()
    assert [r[0] for r in setup.execute("SELECT id FROM dbo.t").fetchall()] == [2]


def test_uncommitted_rows_are_invisible_to_a_snapshot_reader(sql_backend: Any) -> None:
    writer = sql_backend.pyodbc(autocommit=False)
    reader = sql_backend.pyodbc()
    writer.execute("CREATE TABLE dbo.t (id int PRIMARY KEY)")
    writer.commit()
    writer.execute("INSERT INTO dbo.t VALUES (1)")
    reader.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    assert reader.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 0
    writer.commit()
    assert reader.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 1


def test_snapshot_transaction_sees_a_point_in_time_while_others_write(sql_backend: Any, driver: str) -> None:
    setup = _setup(
        sql_backend,
        "CREATE TABLE dbo.t (id int PRIMARY KEY, v int)",
        "INSERT INTO dbo.t VALUES (1, 1), (2, 2)",
    )
    conn = sql_backend.pyodbc() if driver == "pyodbc" else sql_backend.pymssql()
    cur = conn.cursor()
    cur.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    cur.execute("BEGIN TRAN")
    cur.execute("SELECT SUM(v) FROM dbo.t")
    assert cur.fetchone()[0] == 3
    setup.execute("INSERT INTO dbo.t VALUES (3, 3)")
    setup.execute("UPDATE dbo.t SET v = 100 WHERE id = 1")
    setup.execute("DELETE FROM dbo.t WHERE id = 2")
    cur.execute("SELECT id, v FROM dbo.t ORDER BY id")
    assert [tuple(r) for r in cur.fetchall()] == [(1, 1), (2, 2)]
    cur.execute("COMMIT")
    cur.execute("SELECT id, v FROM dbo.t ORDER BY id")
    assert [tuple(r) for r in cur.fetchall()] == [(1, 100), (3, 3)]


def test_snapshot_update_conflict_is_error_3960(sql_backend: Any) -> None:
    setup = _setup(
        sql_backend, "CREATE TABLE dbo.t (id int PRIMARY KEY, v int)", "INSERT INTO dbo.t VALUES (1, 1)"
    )
    snap = sql_backend.pyodbc()
    snap.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    snap.execute("BEGIN TRAN")
    snap.execute("SELECT v FROM dbo.t").fetchall()
    setup.execute("UPDATE dbo.t SET v = 2 WHERE id = 1")
    with pytest.raises(pyodbc.Error) as err:
        snap.execute("UPDATE dbo.t SET v = 3 WHERE id = 1")
    assert "(3960)" in str(err.value)
    assert snap.execute("SELECT @@TRANCOUNT").fetchone()[0] == 0


def _setup(sql_backend: Any, *statements: str) -> Any:
    """An autocommit pyodbc connection that has run ``statements`` (the tables a test starts from)."""
    conn = sql_backend.pyodbc()
    for sql in statements:
        conn.execute(sql)
    return conn


def _run_in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except Exception as e:  # reported to the test
            result["error"] = e
        result["done_at"] = time.monotonic()

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, result


def _assert_waits_for(statement: Callable[[], int], release: Callable[[], None], reason: str) -> None:
    """
    Run ``statement`` in a thread; check that it waits until ``release()`` and then changes one row.

    :param statement: runs the blocked statement and returns its row count.
    :param release: ends what blocks it (a commit).
    :param reason: the message when the statement does not wait.
    """
    thread, result = _run_in_thread(statement)
    time.sleep(0.4)
    assert "done_at" not in result, reason
    released_at = time.monotonic()
    release()
    thread.join(10)
    assert result.get("value") == 1, result.get("error")
    assert result["done_at"] >= released_at


def test_tablock_holdlock_blocks_writers_until_commit(sql_backend: Any, driver: str) -> None:
    setup = _setup(sql_backend, "CREATE TABLE dbo.t (id int PRIMARY KEY)", "INSERT INTO dbo.t VALUES (1)")
    holder = (
        sql_backend.pyodbc(autocommit=False) if driver == "pyodbc" else sql_backend.pymssql(autocommit=False)
    )
    hcur = holder.cursor()
    hcur.execute("SELECT COUNT(*) FROM dbo.t WITH (TABLOCK, HOLDLOCK)")
    assert hcur.fetchone()[0] == 1
    writer = sql_backend.pyodbc()
    writer.execute("SET LOCK_TIMEOUT 20000")
    _assert_waits_for(
        lambda: writer.execute("INSERT INTO dbo.t VALUES (2)").rowcount,
        holder.commit,
        "the INSERT should wait for the table lock",
    )
    assert setup.execute("SELECT COUNT(*) FROM dbo.t").fetchone()[0] == 2


def test_writer_waits_for_another_writer_of_the_same_row(sql_backend: Any) -> None:
    setup = _setup(
        sql_backend, "CREATE TABLE dbo.t (id int PRIMARY KEY, v int)", "INSERT INTO dbo.t VALUES (1, 0)"
    )
    first = sql_backend.pyodbc(autocommit=False)
    first.execute("UPDATE dbo.t SET v = v + 1 WHERE id = 1")
    second = sql_backend.pyodbc(autocommit=False)
    second.execute("SET LOCK_TIMEOUT 20000")
    _assert_waits_for(
        lambda: second.execute("UPDATE dbo.t SET v = v + 10 WHERE id = 1").rowcount,
        first.commit,
        "the UPDATE should wait for the other writer's row lock",
    )
    second.commit()
    assert setup.execute("SELECT v FROM dbo.t").fetchone()[0] == 11


def test_lock_timeout_is_error_1222(sql_backend: Any) -> None:
    _setup(sql_backend, "CREATE TABLE dbo.t (id int PRIMARY KEY)")
    holder = sql_backend.pyodbc(autocommit=False)
    holder.execute("SELECT * FROM dbo.t WITH (TABLOCKX, HOLDLOCK)").fetchall()
    other = sql_backend.pyodbc()
    other.execute("SET LOCK_TIMEOUT 200")
    with pytest.raises(pyodbc.Error) as err:
        other.execute("INSERT INTO dbo.t VALUES (1)")
    assert "(1222)" in str(err.value)
    holder.rollback()


def test_snapshot_reader_finds_rows_by_key_after_others_change_or_delete_them(sql_backend: Any) -> None:
    setup = _setup(
        sql_backend,
        "CREATE TABLE dbo.t (id int PRIMARY KEY, v nvarchar(5))",
        "INSERT INTO dbo.t VALUES (1, N'one'), (2, N'two')",
    )
    snap = sql_backend.pyodbc()
    snap.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
    snap.execute("BEGIN TRAN")
    assert snap.execute("SELECT v FROM dbo.t WHERE id = ?", 1).fetchone()[0] == "one"
    setup.execute("UPDATE dbo.t SET id = 5 WHERE id = 1")
    setup.execute("DELETE FROM dbo.t WHERE id = 2")
    setup.execute("INSERT INTO dbo.t VALUES (2, N'new')")
    assert snap.execute("SELECT v FROM dbo.t WHERE id = ?", 1).fetchone()[0] == "one"
    assert snap.execute("SELECT v FROM dbo.t WHERE id = 2").fetchone()[0] == "two"
    assert snap.execute("SELECT COUNT(*) FROM dbo.t WHERE id = 5").fetchone()[0] == 0
    snap.execute("COMMIT")
    assert snap.execute("SELECT v FROM dbo.t WHERE id = 5").fetchone()[0] == "one"
    assert snap.execute("SELECT v FROM dbo.t WHERE id = 2").fetchone()[0] == "new"
    assert snap.execute("SELECT COUNT(*) FROM dbo.t WHERE id = 1").fetchone()[0] == 0


def test_deadlock_victim_gets_error_1205_and_the_other_transaction_proceeds(sql_backend: Any) -> None:
    setup = _setup(
        sql_backend,
        "CREATE TABLE dbo.t (id int PRIMARY KEY, v int)",
        "INSERT INTO dbo.t VALUES (1, 0), (2, 0)",
    )
    first = sql_backend.pyodbc(autocommit=False)
    second = sql_backend.pyodbc(autocommit=False)
    first.execute("UPDATE dbo.t SET v = 1 WHERE id = 1")
    second.execute("UPDATE dbo.t SET v = 2 WHERE id = 2")
    thread, result = _run_in_thread(lambda: first.execute("UPDATE dbo.t SET v = 1 WHERE id = 2").rowcount)
    time.sleep(0.3)
    with pytest.raises(pyodbc.Error) as err:
        second.execute("UPDATE dbo.t SET v = 2 WHERE id = 1")
    assert "(1205)" in str(err.value)
    thread.join(10)
    assert result.get("value") == 1, result.get("error")
    first.commit()
    assert [tuple(r) for r in setup.execute("SELECT id, v FROM dbo.t ORDER BY id").fetchall()] == [
        (1, 1),
        (2, 1),
    ]
