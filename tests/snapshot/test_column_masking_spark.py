"""
Column masking end to end (issue 35, item 3): a table on the simulator, read through the real ODBC driver
by the snapshot and the change extraction with masking rules, merged by the real Spark job into Iceberg.

The staging holds no clear value of a masked column (nor the salt); the target holds hashed keys that
still take the later updates and deletes, the other rules' values, no dropped column, and column
comments naming each rule; the second merge into the existing table sees no schema change; a reconcile
of the masked target is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from snapshot_source import SourceDb

from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking, ColumnMaskingError
from airflow_provider_sqlserver_cdc.extraction.cdc_windows import extract_window
from airflow_provider_sqlserver_cdc.extraction.window_output import WindowOutput
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.snapshot.reconcile import compare_at_consistent_point
from airflow_provider_sqlserver_cdc.snapshot.table_copy import snapshot_capture_instance
from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args
from airflow_provider_sqlserver_cdc.spark.merge.job import run
from airflow_provider_sqlserver_cdc.spark.reconcile.job import compare_target
from airflow_provider_sqlserver_cdc.window.planning import plan_windows
from sqlserver_cdc_simulator.workload.odbc_client import execute_statements as execute

pytestmark = pytest.mark.spark

CATALOG = "masklake"
NAMESPACE = f"{CATALOG}.cdc"
SALT = "pepper-5f1e0c"
RULES = {
    "dbo.patients.id": "hash",
    "dbo.patients.email": "hash",
    "dbo.patients.name": "mask",
    "dbo.patients.phone": "truncate(3)",
    "dbo.patients.ssn": "drop",
}


def digest(value: object) -> str:
    return hmac.new(SALT.encode(), str(value).encode(), hashlib.sha256).hexdigest()


def source_rows(conn) -> dict[int, tuple]:
    cursor = conn.cursor()
    cursor.execute("SELECT id, email, name, phone, ssn, score FROM dbo.patients")
    rows = {r[0]: tuple(r) for r in cursor.fetchall()}
    cursor.close()
    return rows


def clear_values(rows: dict[int, tuple]) -> set[str]:
    """The values no staged file may hold: every email, name, full phone number and SSN."""
    return {
        str(v) for r in rows.values() for v in (r[1], r[2], r[3], r[4]) if v is not None and len(str(v)) > 3
    }


def assert_staging_holds_no_clear_value(staging: Path, clear: set[str]) -> None:
    parquet = sorted(staging.rglob("*.parquet"))
    assert parquet
    for path in staging.rglob("*"):
        if not path.is_file():
            continue
        raw = path.read_bytes()
        assert SALT.encode() not in raw, path
        if path.suffix != ".parquet":  # manifests, progress: plain text
            assert not any(value.encode() in raw for value in clear), path
    for path in parquet:
        table = pq.read_table(path)
        assert "ssn" not in table.column_names, path
        text = json.dumps(
            {
                "schema": str(table.schema.metadata),
                "fields": [str(f.metadata) for f in table.schema],
                "file": str(pq.read_metadata(path).metadata),
            }
        )
        assert SALT not in text, path
        for name in table.column_names:
            values = {str(v) for v in table.column(name).to_pylist() if v is not None}
            assert not values & clear, (path, name, values & clear)


def test_masked_columns_never_reach_staging_and_hashed_keys_still_merge(source: SourceDb, spark, tmp_path):
    conn = source.connect()
    execute(
        conn,
        "CREATE TABLE dbo.patients (id int NOT NULL PRIMARY KEY, email nvarchar(100) NULL, name nvarchar(50) NULL, "
        "phone varchar(20) NULL, ssn char(11) NULL, score int NULL)",
        "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'patients', @role_name = NULL",
    )
    for i in range(1, 13):
        execute(
            conn,
            f"INSERT INTO dbo.patients VALUES ({i}, N'person{i}@example.com', N'Person Number{i}', "
            f"'555-01{i:02d}', '123-45-{i:04d}', {i * 10})",
        )
    source.capture()
    hook = source.hook()
    instance = hook.get_capture_instance("dbo_patients")
    masking = ColumnMasking(RULES, salt=SALT)
    staging = tmp_path / "staging"

    # the snapshot: a hashed key copies in one chunk (a chunk's last key would be kept in clear)
    snap = snapshot_capture_instance(
        hook, instance, output=WindowOutput(str(staging), source.name, masking=masking), chunk_rows=5
    )
    assert len(snap.progress.chunks) == 1 and snap.extract.manifest.row_count == 12
    manifest = json.loads(Path(snap.extract.manifest_uri).read_text())
    assert manifest["masking"] == {
        "id": "hash",
        "email": "hash",
        "name": "mask",
        "phone": "truncate(3)",
        "ssn": "drop",
    }
    described = {c["name"]: c for c in manifest["columns"]}
    assert "ssn" not in described
    assert described["id"]["sql_type"] == "char" and described["id"]["source_type"] == "int"

    before = source_rows(conn)
    execute(
        conn,
        "UPDATE dbo.patients SET email = N'new3@example.com', phone = '777-0303' WHERE id = 3",
        "UPDATE dbo.patients SET score = 999 WHERE id = 4",
        "DELETE FROM dbo.patients WHERE id = 5",
        "INSERT INTO dbo.patients VALUES (100, N'late@example.com', N'Late Comer', '888-0100', '999-99-9999', 1)",
    )
    source.capture()
    after = source_rows(conn)
    tz = hook.get_server_time_zone()
    (window,) = plan_windows(
        hook,
        [instance],
        mode="watermark",
        tz=tz,
        watermarks={instance.name: Lsn.from_hex(snap.progress.snapshot_lsn)},
    )
    changes = extract_window(
        hook, instance, window, base_uri=str(staging), tz=tz, database=source.name, masking=masking
    )
    assert changes.manifest.masking == manifest["masking"]
    assert changes.manifest.operation_counts["delete"] == 1
    assert_staging_holds_no_clear_value(staging, clear_values(before) | clear_values(after))

    # two merges: the snapshot creates the table, the changes go into the existing one (no schema change)
    target = f"{NAMESPACE}.dbo_patients"
    run(spark, parse_args(["--manifest", snap.extract.manifest_uri, "--namespace", NAMESPACE]))
    run(spark, parse_args(["--manifest", changes.manifest_uri, "--namespace", NAMESPACE]))

    rows = {
        r["id"]: (r["email"], r["name"], r["phone"], r["score"])
        for r in spark.table(target).where("NOT _cdc_deleted").collect()
    }
    expected = {
        digest(i): (digest(email), "****", phone[:3], score)
        for i, email, _name, phone, _ssn, score in after.values()
    }
    assert rows == expected
    assert (
        digest(5) not in rows
        and rows[digest(3)][0] == digest("new3@example.com")
        and rows[digest(4)][3] == 999
    )

    comments = {f.name: f.metadata.get("comment") for f in spark.table(target).schema.fields}
    assert "ssn" not in comments
    assert comments["id"] == "SQL Server char(64); masked: hash of int"
    assert comments["email"] == "SQL Server char(64); masked: hash of nvarchar(100)"
    assert comments["name"] == "SQL Server nvarchar(50); masked: mask of nvarchar(50)"
    assert comments["phone"] == "SQL Server varchar(20); masked: truncate(3) of varchar(20)"
    assert comments["score"] == "SQL Server int"

    # A reconcile would compare the source's clear values with this target and repair them in clear: refused,
    # before any key is compared or any repair window is written.
    with pytest.raises(
        ColumnMaskingError, match="holds id, email, name, phone masked and lacks ssn"
    ) as refused:
        compare_at_consistent_point(
            hook, instance, table=target, target_side=lambda request: compare_target(spark, request)
        )
    assert str(refused.value).startswith("dbo_patients: ") and "out of the reconcile" in str(refused.value)
    assert not (staging / "_reconcile").exists()
    conn.close()
