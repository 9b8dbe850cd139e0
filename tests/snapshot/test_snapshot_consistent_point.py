from __future__ import annotations

import pyodbc
import pytest

from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.snapshot.consistent_point import ConsistentSnapshot, lsn_from_numeric
from airflow_provider_sqlserver_cdc.snapshot.errors import (
    SnapshotError,
    SnapshotIsolationNotAllowedError,
    SnapshotLockTimeoutError,
    SnapshotPermissionError,
)


def test_numeric_lsn_converts_to_the_binary_form():
    # VLF 0x2A, block 0x1F0, slot 3 -> 42 * 10^15 + 496 * 10^5 + 3 (the DMVs' numeric(25,0) form)
    assert lsn_from_numeric(42 * 10**15 + 496 * 10**5 + 3) == Lsn.from_hex("0x0000002A000001F00003")


def test_numeric_lsn_accepts_decimal_and_rejects_out_of_range():
    from decimal import Decimal

    assert lsn_from_numeric(Decimal("1000000000000001")) == Lsn.from_hex("0x00000001000000000001")
    with pytest.raises(ValueError):
        lsn_from_numeric(-1)
    with pytest.raises(ValueError):
        lsn_from_numeric(2**32 * 10**15)


@pytest.fixture
def snapshot(monkeypatch):
    # Only the error texts are under test here: no server is contacted.
    monkeypatch.setenv(
        "AIRFLOW_CONN_SNAP_SRC",
        '{"conn_type": "mssql", "host": "db.example", "port": 1433, "schema": "shop", "login": "u", "password": "S3cr3t-pw"}',
    )
    hook = SqlServerCdcHook("snap_src")
    instance = CaptureInstance("dbo_orders", "dbo", "orders", Lsn.zero())
    return ConsistentSnapshot(hook, instance, lock_timeout_s=2.5)


def _driver_error(number: int, message: str) -> pyodbc.Error:
    return pyodbc.ProgrammingError(
        "42000", f"[42000] [FreeTDS][SQL Server]{message} ({number}) (SQLExecDirectW)"
    )


def test_lock_timeout_error_names_table_and_remedy(snapshot):
    err = snapshot.translate_error(
        _driver_error(1222, "Lock request time out period exceeded."), "locking the table"
    )
    assert isinstance(err, SnapshotLockTimeoutError)
    text = str(err)
    assert "dbo.orders" in text and "dbo_orders" in text and "2.5 s" in text and "lock_timeout" in text


def test_snapshot_not_allowed_error_gives_both_ways_out(snapshot):
    err = snapshot.translate_error(
        _driver_error(3952, "Snapshot isolation transaction failed accessing database 'shop'"),
        "fixing the snapshot",
    )
    assert isinstance(err, SnapshotIsolationNotAllowedError)
    assert "ALTER DATABASE [shop] SET ALLOW_SNAPSHOT_ISOLATION ON" in str(err)
    assert "allow_table_lock_fallback=True" in str(err)


def test_missing_view_server_state_is_a_permission_error(snapshot):
    err = snapshot.translate_error(
        _driver_error(300, "VIEW SERVER STATE permission was denied on object 'server', database 'master'."),
        "reading the snapshot LSN",
    )
    assert isinstance(err, SnapshotPermissionError)
    assert "GRANT VIEW SERVER STATE" in str(err)


def test_a_dropped_captured_column_points_to_a_new_capture_instance(snapshot):
    err = snapshot.translate_error(_driver_error(207, "Invalid column name 'x'."), "reading chunk 1")
    assert type(err) is SnapshotError
    assert "Invalid column name 'x'." in str(err) and "@capture_instance" in str(err)


def test_other_errors_keep_the_server_text_without_secrets(snapshot):
    err = snapshot.translate_error(_driver_error(8115, "Arithmetic overflow error."), "reading chunk 3")
    assert type(err) is SnapshotError
    assert "Arithmetic overflow error." in str(err) and "reading chunk 3" in str(err)
    assert "S3cr3t-pw" not in str(err)


def test_unknown_method_is_refused(snapshot):
    with pytest.raises(ValueError, match="method"):
        ConsistentSnapshot(snapshot.hook, snapshot.instance, method="nolock")
