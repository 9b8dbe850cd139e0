"""Hook behaviour that needs no server: connection strings, driver value decoding, error translation, batches."""

from __future__ import annotations

import json
import struct
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pyodbc
import pytest

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.errors import (
    CdcNotEnabledError,
    ChangeDataPermissionError,
    LsnRangeError,
    SqlServerLoginError,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import (
    CaptureJobStatus,
    SqlServerCdcHook,
    decode_datetimeoffset,
    decode_guid,
    native_error_number,
    odbc_value,
    rows_to_batch,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_converter
from airflow_provider_sqlserver_cdc.windows import ServerTimeZone

SECRET = "s3cr;et}pw"


@pytest.fixture
def conn_env(monkeypatch):
    def make(conn_id="cdc_src", **extra):
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}",
            json.dumps(
                {
                    "conn_type": "mssql",
                    "host": "db.example",
                    "port": 14330,
                    "login": "cdc_reader",
                    "password": SECRET,
                    "schema": "shop",
                    "extra": extra,
                }
            ),
        )
        return conn_id

    return make


def test_freetds_connection_string_escapes_values(conn_env):
    hook = SqlServerCdcHook(conn_env(driver="FreeTDS"))
    text = hook.odbc_connection_string()
    assert text.startswith("DRIVER={FreeTDS};SERVER=db.example;PORT=14330;TDS_Version=7.4;")
    assert "DATABASE=shop;" in text and "UID=cdc_reader;" in text
    assert "PWD={s3cr;et}}pw};" in text
    assert hook.server == "db.example:14330"
    assert SECRET not in hook.server


def test_microsoft_driver_uses_encrypt_extras(conn_env):
    hook = SqlServerCdcHook(
        conn_env(driver="ODBC Driver 18 for SQL Server", encrypt="false", trust_server_certificate=True),
        database="other",
    )
    text = hook.odbc_connection_string()
    assert "SERVER=tcp:db.example,14330;" in text
    assert "Encrypt=no;TrustServerCertificate=yes;" in text
    assert "DATABASE=other;" in text


def test_default_driver_is_an_installed_one(conn_env):
    hook = SqlServerCdcHook(conn_env())
    assert hook.odbc_driver in pyodbc.drivers()


def test_connection_failure_is_clear_and_hides_the_password(conn_env):
    hook = SqlServerCdcHook(conn_env(driver="FreeTDS"))
    hook.connection.host = "127.0.0.1"
    hook.connection.port = 1  # nothing listens there
    with pytest.raises(SqlServerLoginError) as info:
        hook.get_conn()
    assert "127.0.0.1:1" in str(info.value) and "'cdc_src'" in str(info.value)
    assert SECRET not in str(info.value)


def test_odbc_value():
    assert odbc_value("plain") == "plain"
    assert odbc_value("a;b") == "{a;b}"
    assert odbc_value("a}b") == "{a}}b}"
    assert odbc_value(" x") == "{ x}"


def test_decode_datetimeoffset_and_guid():
    raw = struct.pack("<6hI2h", 2024, 2, 29, 23, 59, 58, 123456700, -5, -30)
    value = decode_datetimeoffset(raw)
    assert value == datetime(
        2024, 2, 29, 23, 59, 58, 123456, tzinfo=timezone(-timedelta(hours=5, minutes=30))
    )
    u = uuid.uuid4()
    assert decode_guid(u.bytes_le) == u


@pytest.mark.parametrize(
    ("message", "number", "error"),
    [
        (
            "[28000] [FreeTDS][SQL Server]Login failed for user 'x'. (18456) (SQLDriverConnect)",
            18456,
            SqlServerLoginError,
        ),
        (
            "[42000] [FreeTDS][SQL Server]The SELECT permission was denied on the object 'fn_cdc_get_all_changes_dbo_t', "
            "database 'shop', schema 'cdc'. (229) (SQLExecDirectW)",
            229,
            ChangeDataPermissionError,
        ),
        (
            "[42000] [FreeTDS][SQL Server]An insufficient number of arguments were supplied for the procedure or "
            "function cdc.fn_cdc_get_all_changes_ ... . (313) (SQLExecDirectW)",
            313,
            LsnRangeError,
        ),
        (
            "[42S02] [FreeTDS][SQL Server]Invalid object name 'cdc.change_tables'. (208) (SQLExecDirectW)",
            208,
            CdcNotEnabledError,
        ),
    ],
)
def test_driver_errors_become_provider_errors(conn_env, message, number, error):
    err = pyodbc.ProgrammingError("42000", message)
    assert native_error_number(err) == number
    translated = SqlServerCdcHook(conn_env())._translate(err, "reading change data", "dbo_t")
    assert isinstance(translated, error)
    assert "db.example:14330" in str(translated)
    assert not str(translated).startswith("[")


def test_rows_to_batch_converts_commit_time_to_utc():
    cols = (
        CapturedColumn("id", 1, "int", 4, 10, 0, False),
        CapturedColumn("amount", 2, "money", 8, 19, 4, True),
    )
    instance = CaptureInstance("dbo_t", "dbo", "t", Lsn.zero(), columns=cols)
    hook = SqlServerCdcHook("unused")
    schema = hook.changes_schema(instance)
    lsn = bytes.fromhex("0000002A000001F00003")
    rows = [
        (
            lsn,
            bytes.fromhex("0000002A000001F00002"),
            2,
            b"\x03",
            datetime(2026, 3, 1, 12, 0, 0, 3000),
            7,
            Decimal("1.5"),
        ),
        (
            lsn,
            bytes.fromhex("0000002A000001F00004"),
            1,
            b"\x03",
            datetime(2026, 3, 1, 12, 0, 0, 3000),
            8,
            None,
        ),
    ]
    tz = ServerTimeZone(offset=timedelta(hours=-5))
    batch = rows_to_batch(rows, schema, [column_converter(c) for c in cols], tz)
    assert batch.schema.names == [
        "__$start_lsn",
        "__$seqval",
        "__$operation",
        "__$update_mask",
        "__$commit_time",
        "id",
        "amount",
    ]
    assert batch.column("__$commit_time").type == pa.timestamp("us", tz="UTC")
    assert batch.column("__$commit_time")[0].as_py() == datetime(2026, 3, 1, 17, 0, 0, 3000, tzinfo=UTC)
    assert batch.column("amount").to_pylist() == [Decimal("1.5000"), None]
    assert batch.column("__$operation").to_pylist() == [2, 1]


def test_capture_job_status_describes_a_stopped_job():
    now = datetime(2026, 3, 1, 12, 0)
    stopped = CaptureJobStatus(
        True, 5, now, Lsn.from_hex("0x0000002A000001F00003"), now - timedelta(minutes=10)
    )
    assert not stopped.seems_running
    assert "STOPPED" in stopped.describe() and "600 s behind" in stopped.describe()
    running = CaptureJobStatus(True, 5, now, Lsn.zero(), now - timedelta(seconds=3))
    assert running.seems_running and "appears to be running" in running.describe()
    missing = CaptureJobStatus(False, None, now, Lsn.zero(), None)
    assert "no capture job is configured" in missing.describe()
