"""DDL on tracked tables, retention and cleanup, TRUNCATE, and the snapshot transaction's begin LSN."""

from __future__ import annotations

import time

import pyodbc
import pytest
from cdc_scenario_support import error_number, lsn

TABLE = "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, customer nvarchar(40) NULL, amount int NULL)"


@pytest.fixture
def orders(cdc_db):
    cdc_db.track(TABLE, "orders")
    return cdc_db


def _all_changes(db, instance, columns="*"):
    low = db.scalar("SELECT sys.fn_cdc_get_min_lsn(?)", instance)
    high = db.scalar("SELECT sys.fn_cdc_get_max_lsn()")
    return db.rows(f"SELECT {columns} FROM cdc.fn_cdc_get_all_changes_{instance}(?, ?, N'all')", low, high)


def _all_changes_in_a_batch(db, instance):
    """All changes of ``instance``, read in one batch that declares its LSN bounds as variables."""
    return db.execute(
        f"DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn(N'{instance}'), @t binary(10) = sys.fn_cdc_get_max_lsn(); "
        f"SELECT * FROM cdc.fn_cdc_get_all_changes_{instance}(@f, @t, N'all')"
    )


def test_add_and_drop_column_keep_the_instance_shape_and_write_ddl_history(orders):
    orders.run(
        "INSERT INTO dbo.orders VALUES (1, N'a', 10)",
        "ALTER TABLE dbo.orders ADD region nvarchar(10) NULL",
        "INSERT INTO dbo.orders (id, customer, amount, region) VALUES (2, N'b', 20, N'eu')",
        "ALTER TABLE dbo.orders DROP COLUMN amount",
        "INSERT INTO dbo.orders (id, customer, region) VALUES (3, N'c', N'us')",
    )
    orders.capture()
    cursor = _all_changes_in_a_batch(orders, "dbo_orders")
    assert [d[0] for d in cursor.description][4:] == ["id", "customer", "amount"]
    assert [tuple(r)[4:] for r in cursor.fetchall()] == [(1, "a", 10), (2, "b", 20), (3, "c", None)]
    history = orders.rows(
        "SELECT ddl_command, ddl_lsn, required_column_update FROM cdc.ddl_history ORDER BY ddl_lsn"
    )
    assert len(history) == 2
    assert "ADD region" in history[0][0] and "DROP COLUMN amount" in history[1][0]
    assert lsn(history[0][1]) < lsn(history[1][1])
    # a second instance created now captures the new shape, from its own start
    orders.enable_table("orders", capture_instance="dbo_orders_v2")
    orders.execute("INSERT INTO dbo.orders (id, customer, region) VALUES (4, N'd', N'ap')").close()
    orders.capture()
    v2 = _all_changes_in_a_batch(orders, "dbo_orders_v2")
    assert [d[0] for d in v2.description][4:] == ["id", "customer", "region"]
    assert [tuple(r)[4:] for r in v2.fetchall()] == [(4, "d", "ap")]
    assert [r[0] for r in _all_changes(orders, "dbo_orders", "id")] == [1, 2, 3, 4]


DDL_HISTORY = "EXEC sys.sp_cdc_get_ddl_history @capture_instance = N'dbo_orders'"


def test_get_ddl_history_reports_an_added_column_once_the_capture_job_has_read_it(orders):
    orders.execute("INSERT INTO dbo.orders VALUES (1, N'a', 10)").close()
    before = orders.scalar("SELECT GETDATE()")
    statement = "ALTER TABLE dbo.orders ADD region nvarchar(10) NULL"
    orders.execute(statement).close()
    after = orders.scalar("SELECT GETDATE()")
    orders.execute(
        "INSERT INTO dbo.orders (id, customer, amount, region) VALUES (2, N'b', 20, N'eu')"
    ).close()
    # the capture job is stopped: cdc.ddl_history is written by the log scan, not by the ALTER itself
    assert orders.rows(DDL_HISTORY) == []
    orders.capture()
    cursor = orders.execute(DDL_HISTORY)
    assert [d[0] for d in cursor.description] == [
        "source_schema",
        "source_table",
        "capture_instance",
        "required_column_update",
        "ddl_command",
        "ddl_lsn",
        "ddl_time",
    ]
    rows = [tuple(r) for r in cursor.fetchall()]
    cursor.close()
    assert len(rows) == 1
    schema, table, instance, required_update, command, ddl_lsn, ddl_time = rows[0]
    assert (schema, table, instance) == ("dbo", "orders", "dbo_orders")
    assert required_update is False  # bit 0: adding a column leaves the change table as it is
    assert command.strip() == statement
    assert isinstance(ddl_lsn, (bytes, bytearray)) and len(ddl_lsn) == 10
    inserts = [lsn(r[0]) for r in _all_changes(orders, "dbo_orders", "__$start_lsn")]
    assert inserts[0] < lsn(ddl_lsn) < inserts[1]
    assert lsn(ddl_lsn) <= lsn(orders.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
    assert before <= ddl_time <= after
    # the same row in the system table the procedure reads
    assert orders.rows(
        "SELECT source_object_id, object_id, required_column_update, ddl_command, ddl_lsn, ddl_time "
        "FROM cdc.ddl_history"
    ) == [
        (
            orders.scalar("SELECT OBJECT_ID(N'dbo.orders')"),
            orders.scalar("SELECT OBJECT_ID(N'cdc.dbo_orders_CT')"),
            False,
            command,
            ddl_lsn,
            ddl_time,
        )
    ]


def test_a_captured_column_type_change_reaches_the_change_table_and_sets_required_column_update(orders):
    orders.execute("INSERT INTO dbo.orders VALUES (1, N'a', 10)").close()
    widen = "ALTER TABLE dbo.orders ALTER COLUMN amount bigint NULL"
    orders.execute(widen).close()
    orders.execute("INSERT INTO dbo.orders VALUES (2, N'b', 5000000000)").close()
    not_null = "ALTER TABLE dbo.orders ALTER COLUMN customer nvarchar(40) NOT NULL"
    orders.execute(not_null).close()
    orders.capture()
    history = [(r[3], r[4].strip()) for r in orders.rows(DDL_HISTORY)]
    # only the data type change needed the change table's column altered
    assert sorted(history, key=lambda r: r[1]) == [(True, widen), (False, not_null)]
    assert orders.rows(
        "SELECT column_name, column_type FROM cdc.captured_columns ORDER BY column_ordinal"
    ) == [("id", "int"), ("customer", "nvarchar"), ("amount", "bigint")]
    assert orders.rows(
        "SELECT t.name, c.max_length FROM sys.columns AS c JOIN sys.types AS t ON t.user_type_id = c.user_type_id "
        "WHERE c.object_id = OBJECT_ID(N'cdc.dbo_orders_CT') AND c.name = N'amount'"
    ) == [("bigint", 8)]
    assert _all_changes(orders, "dbo_orders", "id, amount") == [(1, 10), (2, 5000000000)]


def test_truncate_of_a_tracked_table_fails_with_4711(orders):
    with pytest.raises(pyodbc.Error) as excinfo:
        orders.execute("TRUNCATE TABLE dbo.orders")
    assert error_number(excinfo) == 4711
    assert "because it is published for replication or enabled for Change Data Capture" in str(excinfo.value)


def test_cleanup_change_table_moves_the_low_water_mark_and_old_ranges_raise_313(orders):
    orders.execute("INSERT INTO dbo.orders VALUES (1, N'a', 10)").close()
    orders.capture()
    old_low = orders.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")
    # commits sharing a datetime tick (1/300 s) share a low-water mark: keep the two apart
    time.sleep(0.05)
    orders.execute("INSERT INTO dbo.orders VALUES (2, N'b', 20)").close()
    orders.capture()
    new_low = orders.scalar("SELECT MAX(__$start_lsn) FROM cdc.dbo_orders_CT")
    orders.execute(
        "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', @low_water_mark = ?, @threshold = 5000",
        new_low,
    ).close()
    assert lsn(orders.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")) == lsn(new_low)
    assert [r[0] for r in orders.rows("SELECT id FROM cdc.dbo_orders_CT")] == [2]
    high = orders.scalar("SELECT sys.fn_cdc_get_max_lsn()")
    with pytest.raises(pyodbc.Error) as excinfo:
        orders.execute(
            "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(?, ?, N'all')", old_low, high
        ).fetchall()
    assert error_number(excinfo) == 313
    assert [r[0] for r in _all_changes(orders, "dbo_orders", "id")] == [2]


def test_cleanup_with_an_lsn_not_in_the_mapping_fails_with_22964(orders):
    with pytest.raises(pyodbc.Error) as excinfo:
        orders.execute(
            "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', @low_water_mark = ?",
            bytes.fromhex("00000001000000010001"),
        )
    assert error_number(excinfo) == 22964


def test_retention_cleanup_job_moves_the_low_water_mark(orders):
    if not orders.backend.simulated:
        pytest.skip("needs the server clock to move by the retention period")
    orders.execute("INSERT INTO dbo.orders VALUES (1, N'a', 10)").close()
    orders.capture()
    orders.backend.advance_clock(3 * 60)
    orders.execute("INSERT INTO dbo.orders VALUES (2, N'b', 20)").close()
    orders.capture()
    orders.execute("EXEC sys.sp_cdc_change_job @job_type = N'cleanup', @retention = 2").close()
    orders.execute("EXEC sys.sp_MScdc_cleanup_job").close()
    assert [r[0] for r in orders.rows("SELECT id FROM cdc.dbo_orders_CT")] == [2]
    low = lsn(orders.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')"))
    assert low == lsn(orders.scalar("SELECT MIN(__$start_lsn) FROM cdc.dbo_orders_CT"))


def test_snapshot_transaction_begin_lsn_is_consistent_with_cdc_lsns(orders):
    orders.execute(f"ALTER DATABASE [{orders.name}] SET ALLOW_SNAPSHOT_ISOLATION ON").close()
    orders.execute("INSERT INTO dbo.orders VALUES (1, N'a', 10)").close()
    orders.capture()
    before = lsn(orders.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
    reader = orders.connect()
    try:
        reader.autocommit = False
        cursor = reader.cursor()
        cursor.execute("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
        cursor.execute("SELECT COUNT(*) FROM dbo.orders").fetchall()
        cursor.execute("SAVE TRANSACTION snapshot_point")
        row = cursor.execute(
            "SELECT database_transaction_begin_lsn FROM sys.dm_tran_database_transactions "
            "WHERE transaction_id = CURRENT_TRANSACTION_ID() AND database_id = DB_ID()"
        ).fetchone()
        reader.rollback()
    finally:
        reader.close()
    assert row is not None, "the snapshot transaction has no begin LSN after SAVE TRANSACTION"
    begin_numeric = row[0]
    assert begin_numeric is not None
    value = int(begin_numeric)
    vlf, rest = divmod(value, 10**15)
    block, slot = divmod(rest, 10**5)
    begin = vlf.to_bytes(4, "big") + block.to_bytes(4, "big") + slot.to_bytes(2, "big")
    orders.execute("INSERT INTO dbo.orders VALUES (2, N'b', 20)").close()
    orders.capture()
    after = lsn(orders.scalar("SELECT MAX(__$start_lsn) FROM cdc.dbo_orders_CT"))
    assert before < begin < after
