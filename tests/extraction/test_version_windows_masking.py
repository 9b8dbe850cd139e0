"""Column masking of Change Tracking windows (simulator over pyodbc + FreeTDS): snapshot and change windows alike."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from change_tracking_source import read_window, tracked_database

from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking
from airflow_provider_sqlserver_cdc.extraction.version_windows import extract_version_windows
from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook
from airflow_provider_sqlserver_cdc.snapshot.version_copy import snapshot_tracked_tables

CONN = "ct_masked"
# The tracked table and its first rows.
TABLES = (
    "CREATE TABLE dbo.members (member_id int NOT NULL PRIMARY KEY, email nvarchar(80) NULL, "
    "notes nvarchar(200) NULL, level int NULL);"
    "ALTER TABLE dbo.members ENABLE CHANGE_TRACKING;"
    "INSERT INTO dbo.members VALUES (1, N'ann@club.example', N'allergic to cats', 1), "
    "(2, N'bob@club.example', N'owes fees', 2)"
)
SALT = "ct-salt-77"
MASKING = ColumnMasking(
    {"dbo.members.member_id": "hash", "dbo.members.email": "hash", "dbo.members.notes": "drop"}, salt=SALT
)


@pytest.fixture
def source(sqlserver_simulator, monkeypatch):
    """A database ``ctclub`` with change tracking and a tracked ``dbo.members``."""
    return tracked_database(sqlserver_simulator, monkeypatch, CONN, "ctclub", TABLES)


def digest(value: object) -> str:
    return hmac.new(SALT.encode(), str(value).encode(), hashlib.sha256).hexdigest()


def test_tracked_snapshot_and_change_windows_are_masked(source, tmp_path, monkeypatch):
    watermark = f"AIRFLOW_VAR_SQLSERVER_CDC__{CONN.upper()}__CTCLUB__DBO_MEMBERS"
    hook = ChangeTrackingHook(CONN)
    [snap] = snapshot_tracked_tables(
        hook, ["dbo.members"], conn_id=CONN, base_uri=str(tmp_path), masking=MASKING
    )
    manifest, rows = read_window(snap.window_uri)
    assert manifest.masking == {"member_id": "hash", "email": "hash", "notes": "drop"}
    assert {(r["member_id"], r["email"], r["level"]) for r in rows} == {
        (digest(1), digest("ann@club.example"), 1),
        (digest(2), digest("bob@club.example"), 2),
    }
    assert all("notes" not in r for r in rows)

    source.execute(
        "UPDATE dbo.members SET email = N'ann@new.example', notes = N'moved' WHERE member_id = 1;"
        "DELETE FROM dbo.members WHERE member_id = 2",
        "ctclub",
    )
    monkeypatch.setenv(watermark, json.dumps({"lsn": snap.to_position}))
    [window] = extract_version_windows(
        hook,
        ["dbo.members"],
        conn_id=CONN,
        base_uri=str(tmp_path),
        window_mode="watermark",
        masking=MASKING,
    )
    manifest, rows = read_window(window.window_uri)
    assert manifest.masking == {"member_id": "hash", "email": "hash", "notes": "drop"}
    assert {(r["__$operation"], r["member_id"], r["email"]) for r in rows} == {
        (4, digest(1), digest("ann@new.example")),
        (1, digest(2), None),  # a delete carries only its (hashed) key
    }
    clear = ("ann@", "bob@", "allergic", "owes fees", "moved", SALT)
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix != ".parquet":  # manifests and the column history
            assert not any(text in path.read_text() for text in clear), path
    # the column history keeps the source's columns: masking is no column change for the next window
    monkeypatch.setenv(watermark, json.dumps({"lsn": window.to_position}))
    [again] = extract_version_windows(
        hook, ["dbo.members"], conn_id=CONN, base_uri=str(tmp_path), window_mode="watermark", masking=MASKING
    )
    assert again.row_count == 0
