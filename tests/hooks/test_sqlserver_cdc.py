"""SqlServerCdcHook against the SQL Server simulator, through pyodbc + FreeTDS and Driver 18, with a server zone that is not UTC."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from server_clock import OFFSET, ZONE

from airflow_provider_sqlserver_cdc.errors import (
    CaptureInstanceNotFoundError,
    CdcNotEnabledError,
    ChangeDataPermissionError,
    LsnRangeError,
    SqlServerLoginError,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_descriptions
from airflow_provider_sqlserver_cdc.spark.merge.spark_types import source_type_comment
from airflow_provider_sqlserver_cdc.window.planning import LsnWindow

# Every test runs with FreeTDS and with Microsoft's ODBC Driver 18 (the driver production users run).
pytestmark = pytest.mark.usefixtures("odbc_driver")

TYPES_DDL = """CREATE TABLE dbo.zoo (
    id int NOT NULL PRIMARY KEY, c_bit bit NULL, c_tinyint tinyint NULL, c_smallint smallint NULL,
    c_bigint bigint NULL, c_decimal decimal(38,10) NULL, c_money money NULL, c_smallmoney smallmoney NULL,
    c_real real NULL, c_float float NULL, c_char char(4) NULL, c_varchar_max varchar(max) NULL,
    c_nvarchar nvarchar(20) NULL, c_varbinary varbinary(16) NULL, c_guid uniqueidentifier NULL,
    c_date date NULL, c_time time(7) NULL, c_time3 time(3) NULL, c_datetime datetime NULL,
    c_smalldatetime smalldatetime NULL, c_dt2_7 datetime2(7) NULL, c_dt2_3 datetime2(3) NULL,
    c_dto datetimeoffset(7) NULL, c_rowversion rowversion)"""

TYPES_INSERT = """INSERT INTO dbo.zoo (id, c_bit, c_tinyint, c_smallint, c_bigint, c_decimal, c_money, c_smallmoney,
    c_real, c_float, c_char, c_varchar_max, c_nvarchar, c_varbinary, c_guid, c_date, c_time, c_time3, c_datetime,
    c_smalldatetime, c_dt2_7, c_dt2_3, c_dto)
    VALUES (1, 1, 255, -32768, 9223372036854775807, 1234567890123456789012345678.0123456789,
    -922337203685477.5808, 214748.3647, 1.5, 2.25, 'ab', 'long text', N'Ωж😀', 0x00FF10, '6f9619ff-8b86-d011-b42d-00c04fc964ff',
    '0001-01-01', '23:59:59.9999999', '01:02:03.456', '2024-02-29 13:14:15.997', '2024-02-29 13:14:00',
    '2024-01-02 03:04:05.1234567', '9999-12-31 23:59:59.999', '2024-01-02 03:04:05.1234567 -08:00')"""


def setup_database(sim, database: str = "shop") -> None:
    sim.clock.set_timezone(ZONE)
    cur = sim.connect().cursor()
    for sql in (
        f"CREATE DATABASE {database}",
        f"USE {database}",
        "EXEC sys.sp_cdc_enable_db",
        TYPES_DDL,
        "CREATE TABLE dbo.lines (order_id bigint NOT NULL, line_no smallint NOT NULL, qty int NULL, "
        "CONSTRAINT pk_lines PRIMARY KEY (order_id, line_no))",
        "CREATE TABLE dbo.heap (x int NULL, y nvarchar(10) NULL)",
        "CREATE TABLE dbo.untracked (id int NOT NULL PRIMARY KEY)",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'zoo', @role_name = NULL",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'lines', @role_name = NULL, "
        "@capture_instance = N'lines_v1'",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'heap', @role_name = NULL",
        TYPES_INSERT,
        "UPDATE dbo.zoo SET c_nvarchar = N'changed' WHERE id = 1",
        "INSERT INTO dbo.lines VALUES (1, 1, 5), (1, 2, 7)",
        "DELETE FROM dbo.lines WHERE line_no = 2",
    ):
        cur.execute(sql)
    sim.run_capture_scan(database)


def conn_json(sim, *, login=None, password=None, database="shop") -> str:
    return sim.airflow_connection(database, login=login, password=password)


@pytest.fixture
def hook(sqlserver_simulator, monkeypatch):
    setup_database(sqlserver_simulator)
    monkeypatch.setenv("AIRFLOW_CONN_SIM", conn_json(sqlserver_simulator))
    h = SqlServerCdcHook("sim")
    yield h
    h.close()


def test_server_offset_is_learned_from_the_server(hook):
    tz = hook.get_server_time_zone()
    assert tz.offset == dt.timedelta(hours=5, minutes=30)
    now = hook.get_server_now()
    assert abs(now - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)


def test_lsn_questions(hook):
    max_lsn = hook.get_max_lsn()
    min_lsn = hook.get_min_lsn("dbo_zoo")
    assert Lsn.zero() < min_lsn <= max_lsn
    assert hook.get_min_lsn("no_such_instance").is_zero
    assert hook.increment_lsn(min_lsn) > min_lsn
    assert hook.decrement_lsn(hook.increment_lsn(min_lsn)) == min_lsn
    local = hook.map_lsn_to_time(max_lsn)
    assert hook.map_time_to_lsn("largest less than or equal", local) == max_lsn
    assert hook.map_time_to_lsn("smallest greater than", local + dt.timedelta(days=1)) is None


def test_capture_instances_columns_and_keys(hook):
    names = {i.name: i for i in hook.get_capture_instances()}
    assert set(names) == {"dbo_zoo", "lines_v1", "dbo_heap"}
    assert names["lines_v1"].source == "dbo.lines"
    zoo = hook.get_capture_instance("dbo_zoo")
    types = {c.name: c.describe() for c in zoo.columns}
    assert types["c_decimal"] == "decimal(38,10)"
    assert types["c_nvarchar"] == "nvarchar(20)"
    assert types["c_varchar_max"] == "varchar(max)"
    assert types["c_time3"] == "time(3)"
    assert types["c_dto"] == "datetimeoffset(7)"
    assert [c.ordinal for c in zoo.columns] == list(range(1, len(zoo.columns) + 1))
    assert zoo.columns[0].name == "id" and zoo.columns[0].nullable is False
    assert zoo.key_columns == ("id",)
    assert hook.get_capture_instance("lines_v1").key_columns == ("order_id", "line_no")
    assert hook.get_capture_instance("dbo.lines").name == "lines_v1"
    assert hook.get_capture_instance("dbo_heap").key_columns == ()


def test_the_manifest_carries_bytes_and_the_merge_records_the_declared_type(hook):
    """``max_length`` is sys.columns.max_length (bytes: nvarchar(20) is 40); a target's comment says nvarchar(20)."""
    zoo = hook.get_capture_instance("dbo_zoo")
    columns = {c["name"]: c for c in column_descriptions(zoo)}
    assert (columns["c_nvarchar"]["max_length"], columns["c_char"]["max_length"]) == (40, 4)
    declared = {c.name: c.describe() for c in zoo.columns}
    for name in (
        "c_decimal",
        "c_char",
        "c_varchar_max",
        "c_nvarchar",
        "c_varbinary",
        "c_guid",
        "c_time3",
        "c_dt2_3",
        "c_dto",
    ):
        assert source_type_comment(columns[name]) == f"SQL Server {declared[name]}"


def test_stream_changes_keeps_every_value_exact(hook):
    zoo = hook.get_capture_instance("dbo_zoo")
    tz = hook.get_server_time_zone()
    window = LsnWindow("dbo_zoo", hook.get_min_lsn("dbo_zoo"), hook.get_max_lsn(), "watermark")
    [batch] = list(hook.stream_changes(zoo, window, tz=tz))
    assert batch.column("__$operation").to_pylist() == [2, 3, 4]
    insert = batch.slice(0, 1).to_pylist()[0]
    assert insert["c_bit"] is True and insert["c_tinyint"] == 255 and insert["c_smallint"] == -32768
    assert insert["c_bigint"] == 9223372036854775807
    assert insert["c_decimal"] == Decimal("1234567890123456789012345678.0123456789")
    assert insert["c_money"] == Decimal("-922337203685477.5808")
    assert insert["c_smallmoney"] == Decimal("214748.3647")
    assert insert["c_real"] == 1.5 and insert["c_float"] == 2.25
    assert insert["c_char"] == "ab  "
    assert insert["c_nvarchar"] == "Ωж😀"
    assert insert["c_varbinary"] == b"\x00\xff\x10"
    assert insert["c_guid"] == "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    assert insert["c_date"] == dt.date(1, 1, 1)
    assert insert["c_time"] == "23:59:59.9999999"
    assert insert["c_time3"] == "01:02:03.456"
    assert insert["c_datetime"] == dt.datetime(2024, 2, 29, 13, 14, 15, 997000)
    assert insert["c_smalldatetime"] == dt.datetime(2024, 2, 29, 13, 14)
    assert batch.schema.field("c_dt2_7").type == pa.timestamp("ns")
    assert batch.column("c_dt2_7")[0].value == (
        int(dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC).timestamp()) * 10**9 + 123456700
    )
    assert insert["c_dt2_3"] == dt.datetime(9999, 12, 31, 23, 59, 59, 999000)
    assert insert["c_dto"] == "2024-01-02T03:04:05.1234567-08:00"
    assert len(insert["c_rowversion"]) == 8
    # Commit time: the server's local time converted to UTC (the server runs at +05:30).
    commit = batch.column("__$commit_time")[0].as_py()
    local = hook.map_lsn_to_time(Lsn(insert["__$start_lsn"]))
    assert commit == (local - OFFSET).replace(tzinfo=dt.UTC)
    before, after = batch.slice(1, 2).to_pylist()
    assert (before["c_nvarchar"], after["c_nvarchar"]) == ("Ωж😀", "changed")
    assert before["__$start_lsn"] == after["__$start_lsn"]


def test_stream_changes_batches_are_bounded(hook, sqlserver_simulator):
    cur = sqlserver_simulator.connect("shop").cursor()
    for i in range(10, 60):
        cur.execute("INSERT INTO dbo.lines VALUES (?, 1, ?)", i, i)
    sqlserver_simulator.run_capture_scan("shop")
    lines = hook.get_capture_instance("lines_v1")
    window = LsnWindow("lines_v1", hook.get_min_lsn("lines_v1"), hook.get_max_lsn(), "watermark")
    sizes = [
        b.num_rows for b in hook.stream_changes(lines, window, tz=hook.get_server_time_zone(), batch_size=16)
    ]
    assert max(sizes) == 16 and sum(sizes) == 53


def test_cdc_not_enabled_on_database(sqlserver_simulator, monkeypatch):
    cur = sqlserver_simulator.connect().cursor()
    cur.execute("CREATE DATABASE plain")
    monkeypatch.setenv("AIRFLOW_CONN_SIM", conn_json(sqlserver_simulator, database="plain"))
    hook = SqlServerCdcHook("sim")
    with pytest.raises(CdcNotEnabledError, match=r"not enabled on database 'plain'.*sys\.sp_cdc_enable_db"):
        hook.get_capture_instance("dbo_orders")


def test_table_not_tracked_and_unknown_instance(hook):
    with pytest.raises(CdcNotEnabledError, match=r"dbo\.untracked is not tracked.*sys\.sp_cdc_enable_table"):
        hook.get_capture_instance("dbo_untracked")
    with pytest.raises(CaptureInstanceNotFoundError, match=r"'dbo_nothing'.*dbo_heap, dbo_zoo, lines_v1"):
        hook.get_capture_instance("dbo_nothing")


def test_login_failure_names_the_connection_not_the_password(sqlserver_simulator, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SIM", conn_json(sqlserver_simulator, password="wrong-Secret-1"))
    with pytest.raises(SqlServerLoginError) as info:
        SqlServerCdcHook("sim").get_max_lsn()
    assert "Login failed for user 'sa'" in str(info.value) and "'sim'" in str(info.value)
    assert "wrong-Secret-1" not in str(info.value)


def test_gating_role_denies_change_data(sqlserver_simulator, monkeypatch):
    setup_database(sqlserver_simulator)
    cur = sqlserver_simulator.connect("shop").cursor()
    for sql in (
        "CREATE ROLE cdc_readers",
        "CREATE TABLE dbo.secret (id int NOT NULL PRIMARY KEY, v int NULL)",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'secret', @role_name = N'cdc_readers'",
        "INSERT INTO dbo.secret VALUES (1, 1)",
        "CREATE LOGIN reader WITH PASSWORD = 'Reader-pw-1!'",
        "CREATE USER reader FOR LOGIN reader",
    ):
        cur.execute(sql)
    sqlserver_simulator.run_capture_scan("shop")
    monkeypatch.setenv(
        "AIRFLOW_CONN_SIM", conn_json(sqlserver_simulator, login="reader", password="Reader-pw-1!")
    )
    hook = SqlServerCdcHook("sim")
    secret = hook.get_capture_instance("dbo_secret")
    window = LsnWindow("dbo_secret", secret.start_lsn, hook.get_max_lsn(), "watermark")
    with pytest.raises(ChangeDataPermissionError, match=r"dbo_secret.*gating role"):
        list(hook.stream_changes(secret, window, tz=hook.get_server_time_zone()))


def test_range_outside_the_instance_is_an_lsn_range_error(hook):
    zoo = hook.get_capture_instance("dbo_zoo")
    window = LsnWindow("dbo_zoo", Lsn.from_hex("0x00000001000000010001"), hook.get_max_lsn(), "watermark")
    with pytest.raises(LsnRangeError, match=r"dbo_zoo.*sys\.fn_cdc_get_min_lsn"):
        list(hook.stream_changes(zoo, window, tz=hook.get_server_time_zone()))


def test_capture_job_status_reports_a_stopped_job(hook, sqlserver_simulator):
    cur = sqlserver_simulator.connect("shop").cursor()
    cur.execute("EXEC sys.sp_cdc_stop_job @job_type = N'capture'")
    sqlserver_simulator.clock.advance(dt.timedelta(minutes=20))
    status = hook.get_capture_job_status()
    assert status.configured is True and status.polling_interval_s == 5
    assert not status.seems_running
    assert status.lag >= dt.timedelta(minutes=20)
    assert "STOPPED" in status.describe()


def test_arrow_odbc_and_pyodbc_readers_give_identical_batches(hook, sqlserver_simulator):
    cur = sqlserver_simulator.connect("shop").cursor()
    cur.execute("INSERT INTO dbo.zoo (id, c_nvarchar, c_varchar_max) VALUES (2, NULL, REPLICATE('z', 5000))")
    cur.execute("UPDATE dbo.zoo SET c_dto = NULL, c_dt2_7 = '1900-01-01 00:00:00.0000001' WHERE id = 2")
    sqlserver_simulator.run_capture_scan("shop")
    zoo = hook.get_capture_instance("dbo_zoo")
    tz = hook.get_server_time_zone()
    window = LsnWindow("dbo_zoo", hook.get_min_lsn("dbo_zoo"), hook.get_max_lsn(), "watermark")
    columnar = pa.Table.from_batches(list(hook.stream_changes(zoo, window, tz=tz, reader="arrow-odbc")))
    rows = pa.Table.from_batches(list(hook.stream_changes(zoo, window, tz=tz, reader="pyodbc")))
    assert columnar.num_rows == rows.num_rows == 6
    assert columnar.schema == rows.schema
    assert columnar.equals(rows), [
        name for name in rows.column_names if not columnar.column(name).equals(rows.column(name))
    ]
    assert columnar.column("c_varchar_max")[3].as_py() == "z" * 5000


def test_arrow_odbc_reads_wide_text_and_binary_columns_within_its_buffer_limit(hook, sqlserver_simulator):
    cur = sqlserver_simulator.connect("shop").cursor()
    cur.execute(
        "CREATE TABLE dbo.wide (id int NOT NULL PRIMARY KEY, a nvarchar(4000) NULL, b varchar(8000) NULL, "
        "c varbinary(8000) NULL)"
    )
    cur.execute(
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'wide', @role_name = NULL"
    )
    for i in range(30):
        cur.execute(
            "INSERT INTO dbo.wide VALUES (?, ?, ?, ?)", i, "é😀" * 1333, "x" * 8000, bytes([i]) * 8000
        )
    sqlserver_simulator.run_capture_scan("shop")
    wide = hook.get_capture_instance("dbo_wide")
    window = LsnWindow("dbo_wide", hook.get_min_lsn("dbo_wide"), hook.get_max_lsn(), "watermark")
    # 20,000 rows of these columns would need far more than the 64 MiB buffer: arrow-odbc lowers the rows per batch.
    table = pa.Table.from_batches(list(hook.stream_changes(wide, window, tz=hook.get_server_time_zone())))
    assert table.num_rows == 30
    assert table.column("a")[29].as_py() == "é😀" * 1333
    assert table.column("b")[0].as_py() == "x" * 8000
    assert table.column("c")[29].as_py() == bytes([29]) * 8000
