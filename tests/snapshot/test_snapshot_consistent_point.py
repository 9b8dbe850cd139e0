from __future__ import annotations

import pyodbc
import pytest

from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
from airflow_provider_sqlserver_cdc.hooks.consistent_point import (
    ConsistentRead,
    ConsistentSnapshot,
    lsn_from_numeric,
)
from airflow_provider_sqlserver_cdc.hooks.snapshot_errors import (
    SnapshotError,
    SnapshotIsolationNotAllowedError,
    SnapshotLockTimeoutError,
    SnapshotPermissionError,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.lsn import Lsn


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
    return ConsistentSnapshot(hook, instance, ConsistentRead(lock_timeout_s=2.5))


def _driver_error(number: int, message: str) -> pyodbc.Error:
    return pyodbc.ProgrammingError(
        "42000", f"[42000] [FreeTDS][SQL Server]{message} ({number}) (SQLExecDirectW)"
    )


@pytest.mark.parametrize(
    ("number", "message", "doing", "error_type", "phrases"),
    [
        pytest.param(
            1222,
            "Lock request time out period exceeded.",
            "locking the table",
            SnapshotLockTimeoutError,
            ["dbo.orders", "dbo_orders", "2.5 s", "lock_timeout"],
            id="lock timeout names table and remedy",
        ),
        pytest.param(
            3952,
            "Snapshot isolation transaction failed accessing database 'shop'",
            "fixing the snapshot",
            SnapshotIsolationNotAllowedError,
            ["ALTER DATABASE [shop] SET ALLOW_SNAPSHOT_ISOLATION ON", "allow_table_lock_fallback=True"],
            id="snapshot not allowed gives both ways out",
        ),
        pytest.param(
            300,
            "VIEW SERVER STATE permission was denied on object 'server', database 'master'.",
            "reading the snapshot LSN",
            SnapshotPermissionError,
            ["GRANT VIEW SERVER STATE"],
            id="missing VIEW SERVER STATE is a permission error",
        ),
        pytest.param(
            207,
            "Invalid column name 'x'.",
            "reading chunk 1",
            SnapshotError,
            ["Invalid column name 'x'.", "@capture_instance"],
            id="a dropped captured column points to a new capture instance",
        ),
        pytest.param(
            8115,
            "Arithmetic overflow error.",
            "reading chunk 3",
            SnapshotError,
            ["Arithmetic overflow error.", "reading chunk 3"],
            id="other errors keep the server text",
        ),
    ],
)
def test_driver_errors_become_snapshot_errors_without_secrets(
    snapshot, number, message, doing, error_type, phrases
):
    err = snapshot.translate_error(_driver_error(number, message), doing)
    assert type(err) is error_type
    for phrase in phrases:
        assert phrase in str(err)
    assert "S3cr3t-pw" not in str(err)


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method"):
        ConsistentRead(method="nolock")
