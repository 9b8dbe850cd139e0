"""Change Tracking reads computed columns from the table itself: their real values reach the windows (issue 36).

Unlike CDC, which captures a computed column as NULL, a Change Tracking window joins CHANGETABLE to
the source table, so a computed column holds the row's value (docs/operations.md, "Computed columns").
"""

from __future__ import annotations

from decimal import Decimal

from change_tracking_source import tracked_database, window_rows

from airflow_provider_sqlserver_cdc.extraction.version_windows import VersionWindow, extract_version_window
from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.hooks.change_tracking import ChangeTrackingHook
from airflow_provider_sqlserver_cdc.snapshot.version_copy import snapshot_tracked_tables

CONN = "ct_computed"
# The tracked table and its first rows.
TABLES = (
    "CREATE TABLE dbo.lines (id int NOT NULL PRIMARY KEY, qty int NULL, price decimal(9,2) NULL, "
    "total AS (qty * price), total_kept AS (qty * price) PERSISTED);"
    "ALTER TABLE dbo.lines ENABLE CHANGE_TRACKING;"
    "INSERT INTO dbo.lines (id, qty, price) VALUES (1, 2, 3.50), (2, 1, 10)"
)


def test_change_tracking_windows_carry_computed_values(sqlserver_simulator, monkeypatch, tmp_path):
    source = tracked_database(sqlserver_simulator, monkeypatch, CONN, "ctcalc", TABLES)
    hook = ChangeTrackingHook(CONN)
    [snap] = snapshot_tracked_tables(hook, ["dbo.lines"], conn_id=CONN, base_uri=str(tmp_path))
    assert {r["id"]: (r["total"], r["total_kept"]) for r in window_rows(snap.window_uri)} == {
        1: (Decimal("7.0000"), Decimal("7.0000")),
        2: (Decimal("10.0000"), Decimal("10.0000")),
    }
    source.execute("UPDATE dbo.lines SET qty = 4 WHERE id = 1", "ctcalc")
    table = hook.get_tracked_table("dbo.lines")
    result, empty = extract_version_window(
        hook, table, VersionWindow(1, None, "watermark"), WindowOutput(str(tmp_path), "ctcalc")
    )
    assert not empty
    assert [(r["id"], r["total"], r["total_kept"]) for r in window_rows(result.window_uri)] == [
        (1, Decimal("14.0000"), Decimal("14.0000"))
    ]
