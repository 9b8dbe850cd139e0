"""Column masking around a switch to a table's second capture instance (simulator): the by-key back-fill."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from server_clock import local
from simulator_extraction import extract, orders_source
from variable_store import in_memory_variables

from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking, ColumnMaskingError

SALT = "switch-salt"
ENABLE_V2 = (
    "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL, "
    "@capture_instance = N'dbo_orders_v2'"
)


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    """``dbo.orders`` gains a column at 10:10; a DBA creates its second instance at 10:20."""
    in_memory_variables(monkeypatch)
    db = orders_source(sqlserver_simulator, monkeypatch)
    db.commit_at(local(10, 5), ("INSERT INTO dbo.orders VALUES (1, N'secret-a'), (2, N'secret-b')",))
    db.commit_at(local(10, 10), ("ALTER TABLE dbo.orders ADD loyalty int NULL",))
    db.commit_at(
        local(10, 15), ("UPDATE dbo.orders SET loyalty = 7, note = N'secret-a2' WHERE order_id = 1",)
    )
    db.commit_at(local(10, 20), (ENABLE_V2,))
    db.commit_at(local(10, 25), ("UPDATE dbo.orders SET loyalty = 5 WHERE order_id = 2",))
    db.capture(until=local(11, 5))
    return db


def digest(value: object) -> str:
    return hmac.new(SALT.encode(), str(value).encode(), hashlib.sha256).hexdigest()


def test_the_blind_spot_back_fill_is_masked_like_the_windows_around_it(source, tmp_path):
    masking = ColumnMasking({"dbo.orders.note": "hash"}, salt=SALT)
    windows = extract(tmp_path, masking=masking)
    backfill = next(w for w in windows if w.window_uri.endswith("_backfill"))
    manifest = json.loads(Path(backfill.manifest_uri).read_text())
    assert manifest["masking"] == {"note": "hash"}
    rows = [
        r for f in manifest["files"] for r in pq.read_table(Path(backfill.window_uri) / f["path"]).to_pylist()
    ]
    assert {r["order_id"]: r["note"] for r in rows} == {1: digest("secret-a2")}
    for window in windows:
        for path in Path(window.window_uri).iterdir():
            assert b"secret-" not in path.read_bytes() or path.suffix == ".parquet", path
            if path.suffix == ".parquet":
                notes = pq.read_table(path).column("note").to_pylist()
                assert not [n for n in notes if n and n.startswith("secret-")], path


def test_a_hashed_key_cannot_be_re_read_by_key_and_the_error_names_the_re_snapshot(source, tmp_path):
    masking = ColumnMasking({"dbo.orders.order_id": "hash"}, salt=SALT)
    with pytest.raises(ColumnMaskingError) as caught:
        extract(tmp_path, masking=masking)
    message = str(caught.value)
    for part in ("dbo.orders", "order_id", "are hashed", '"resnapshot": ["dbo_orders"]'):
        assert part in message
