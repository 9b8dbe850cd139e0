"""The merge job: pure parts (manifest, LSN ranges, types) and Spark runs against a local Iceberg catalog."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import logging
import random
import re
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from window_builder import (
    AMOUNT,
    INT_KEY,
    NAME,
    ChangeLog,
    Column,
    Row,
    WindowSpec,
    flatten,
    lsn,
    lsn_hex,
    write_window,
)

from airflow_provider_sqlserver_cdc.spark import MERGE_JOB_PATH, merge_job
from airflow_provider_sqlserver_cdc.spark.merge_job import (
    ManifestError,
    MergeJobError,
    MergeSettings,
    SchemaEvolutionError,
)
from airflow_provider_sqlserver_cdc.spark.net_effect import Change, ChangePosition, net_effect

# --------------------------------------------------------------------------- pure parts


def test_application_path_is_the_shipped_file() -> None:
    assert Path(MERGE_JOB_PATH).is_file()
    assert Path(MERGE_JOB_PATH).name == "merge_job.py"


def test_merge_job_imports_only_stdlib_and_pyspark() -> None:
    source = Path(MERGE_JOB_PATH).read_text()
    imported = set(re.findall(r"^\s*(?:from|import) ([a-zA-Z_][\w]*)", source, re.MULTILINE))
    assert imported <= {
        "__future__",
        "argparse",
        "json",
        "logging",
        "re",
        "sys",
        "collections",
        "contextlib",
        "dataclasses",
        "typing",
        "pyspark",
        "py4j",  # ships with pyspark
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/w/dbo_t/0x1_0x2/_manifest.json", ["/w/dbo_t/0x1_0x2/_manifest.json"]),
        ("s3a://b/w/dbo_t/0x1_0x2/", ["s3a://b/w/dbo_t/0x1_0x2/_manifest.json"]),
        (
            {"capture_instance": "dbo_t", "manifest_uri": "/w/a/_manifest.json", "rows": 3},
            ["/w/a/_manifest.json"],
        ),
        (
            '[{"manifest_uri": "/w/a"}, {"manifest_uri": "/w/b"}, "/w/a"]',
            ["/w/a/_manifest.json", "/w/b/_manifest.json"],
        ),
        ([None, ["/w/c/_manifest.json"]], ["/w/c/_manifest.json"]),
    ],
)
def test_manifest_uris_accept_xcom_shapes(value: Any, expected: list[str]) -> None:
    assert merge_job.manifest_uris(value) == expected


def test_manifest_uris_reject_an_object_without_manifest() -> None:
    with pytest.raises(MergeJobError, match="no 'manifest_uri'"):
        merge_job.manifest_uris({"capture_instance": "dbo_t"})


def test_lsn_ranges_join_adjacent_and_overlapping_windows_only() -> None:
    ranges = merge_job.add_range([], 0x10, 0x1F)
    ranges = merge_job.add_range(ranges, 0x30, 0x3F)  # gap 0x20..0x2F stays open
    assert (
        merge_job.format_ranges(ranges) == f"{lsn_hex(0x10)}-{lsn_hex(0x1F)},{lsn_hex(0x30)}-{lsn_hex(0x3F)}"
    )
    assert not merge_job.covers(ranges, 0x18, 0x32)
    ranges = merge_job.add_range(ranges, 0x20, 0x2F)
    assert ranges == [(0x10, 0x3F)]
    assert merge_job.covers(ranges, 0x18, 0x32)
    assert merge_job.parse_ranges(merge_job.format_ranges(ranges)) == ranges


def manifest_doc(**changes: Any) -> dict[str, Any]:
    doc = {
        "format_version": 1,
        "kind": "changes",
        "capture_instance": "dbo_orders",
        "source": {"schema": "dbo", "table": "orders"},
        "from_lsn": lsn_hex(1),
        "to_lsn": lsn_hex(2),
        "key_columns": ["id"],
        "columns": [INT_KEY.manifest_entry(1), NAME.manifest_entry(2)],
        "files": [{"path": "part-00000.parquet", "rows": 3, "bytes": 10}],
        "row_count": 3,
    }
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format_version": 2}, "format_version is 2"),
        ({"kind": "delta"}, "kind is 'delta'"),
        ({"to_lsn": "0x12"}, "to_lsn '0x12' is not an LSN"),
        ({"from_lsn": lsn_hex(3)}, "from_lsn is above to_lsn"),
        ({"key_columns": []}, "capture instance dbo_orders has no key columns"),
        ({"key_columns": ["nope"]}, "key column 'nope' is not among the columns"),
        ({"row_count": 4}, "row_count is 4 but the files list 3 rows"),
        ({"files": [{"path": "../x.parquet", "rows": 3}]}, "must be relative"),
    ],
)
def test_manifest_validation_names_the_problem(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match=re.escape(message)) as caught:
        merge_job.parse_manifest(json.dumps(manifest_doc(**changes)), "/w/dbo_orders/x/_manifest.json")
    assert "/w/dbo_orders/x/_manifest.json" in str(caught.value)


def test_manifest_files_resolve_against_the_window_directory() -> None:
    window = merge_job.parse_manifest(json.dumps(manifest_doc()), "s3a://b/w/dbo_orders/x/_manifest.json")
    assert [f.uri for f in window.files] == ["s3a://b/w/dbo_orders/x/part-00000.parquet"]
    assert window.label == f"dbo_orders {lsn_hex(1)}_{lsn_hex(2)}"


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        ({"sql_type": "bit"}, "BOOLEAN"),
        ({"sql_type": "tinyint"}, "INT"),
        ({"sql_type": "bigint"}, "BIGINT"),
        ({"sql_type": "numeric", "precision": 38, "scale": 10}, "DECIMAL(38,10)"),
        ({"sql_type": "money"}, "DECIMAL(19,4)"),
        ({"sql_type": "smallmoney"}, "DECIMAL(10,4)"),
        ({"sql_type": "float", "precision": 53}, "DOUBLE"),
        ({"sql_type": "float", "precision": 24}, "FLOAT"),
        ({"sql_type": "real"}, "FLOAT"),
        ({"sql_type": "datetime2", "scale": 7}, "TIMESTAMP_NTZ"),
        ({"sql_type": "smalldatetime"}, "TIMESTAMP_NTZ"),
        ({"sql_type": "datetimeoffset", "scale": 7}, "STRING"),
        ({"sql_type": "time", "scale": 3}, "STRING"),
        ({"sql_type": "uniqueidentifier"}, "STRING"),
        ({"sql_type": "xml"}, "STRING"),
        ({"sql_type": "rowversion"}, "BINARY"),
        ({"sql_type": "date"}, "DATE"),
    ],
)
def test_target_types(column: dict[str, Any], expected: str) -> None:
    assert merge_job.spark_type({"name": "c", **column}, "lake.db.t") == expected


def test_unknown_type_names_table_and_column() -> None:
    with pytest.raises(
        SchemaEvolutionError, match="target table lake.db.t: column shape has SQL type 'geometry2'"
    ):
        merge_job.spark_type(
            {"name": "shape", "sql_type": "geometry2", "arrow_type": "struct<>"}, "lake.db.t"
        )


@pytest.mark.parametrize(
    ("table", "window", "expected"),
    [
        ("int", "INT", None),
        ("bigint", "INT", None),
        ("int", "BIGINT", "BIGINT"),
        ("float", "DOUBLE", "DOUBLE"),
        ("decimal(10,2)", "DECIMAL(12,2)", "DECIMAL(12,2)"),
        ("decimal(12,2)", "DECIMAL(10,2)", None),
    ],
)
def test_widening_allowed_by_iceberg(table: str, window: str, expected: str | None) -> None:
    assert merge_job.widening(table, window) == expected


@pytest.mark.parametrize(
    ("table", "window"), [("int", "STRING"), ("decimal(10,2)", "DECIMAL(10,3)"), ("bigint", "DOUBLE")]
)
def test_widening_refused(table: str, window: str) -> None:
    with pytest.raises(ValueError):
        merge_job.widening(table, window)


def test_parse_args_builds_settings_from_xcom_json() -> None:
    settings = merge_job.parse_args(
        [
            "--manifest",
            json.dumps([{"manifest_uri": "/w/a"}]),
            "--namespace",
            "lake.cdc",
            "--target",
            "dbo_x=lake.o.x",
        ]
    )
    assert settings.manifests == ("/w/a/_manifest.json",)
    assert settings.targets == {"dbo_x": "lake.o.x"}
    assert settings.delete_mode == "soft"
    assert settings.table_properties == {}


def test_parse_args_collects_table_properties() -> None:
    settings = merge_job.parse_args(
        [
            "--manifest",
            "/w/a",
            "--table-property",
            "write.merge.distribution-mode=none",
            "--table-property",
            "comment=a=b",
        ]
    )
    assert settings.table_properties == {"write.merge.distribution-mode": "none", "comment": "a=b"}


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("write.merge.mode=copy-on-write", "set by the merge job itself"),
        ("Format-Version=3", "set by the merge job itself"),
        ("sqlserver-cdc.max-applied-lsn.dbo_x=0x00", "set by the merge job itself"),
        ("no-value", "expected KEY=VALUE"),
        ("=x", "expected KEY=VALUE"),
        ("comment=it's", "quotes and backslashes"),
    ],
)
def test_table_properties_refused(item: str, problem: str) -> None:
    with pytest.raises(MergeJobError, match=problem):
        merge_job.parse_table_properties([item])


# --------------------------------------------------------------------------- Spark


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return tmp_path / "windows"


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"\W", "_", request.node.name)
    return f"lake.{name[:40]}_{zlib.crc32(name.encode()):08x}"


def run(spark: Any, namespace: str, *manifests: str, **options: Any) -> dict[str, Any]:
    return merge_job.run(spark, MergeSettings(manifests=tuple(manifests), namespace=namespace, **options))


def contents(spark: Any, table: str) -> dict[Any, tuple]:
    """key -> (deleted, values...) without the LSN columns."""
    frame = spark.table(table)
    columns = [c for c in frame.columns if not c.startswith("_cdc_") and c != "id"]
    return {r["id"]: (r["_cdc_deleted"], *[r[c] for c in columns]) for r in frame.collect()}


def snapshot_count(spark: Any, table: str) -> int:
    return spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").first().n


def two_windows(base: Path) -> tuple[str, str]:
    log = ChangeLog()
    first = flatten(
        [
            log.insert(id=1, name="a", amount=decimal.Decimal("1.00")),
            log.insert(id=2, name="b", amount=decimal.Decimal("2.00")),
            log.insert(id=3, name="c", amount=decimal.Decimal("3.00")),
        ]
    )
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, first))
    start = log.lsn + 1
    second = flatten(
        [
            log.update({"id": 2, "name": "b", "amount": decimal.Decimal("2.00")}, name="bb"),
            log.delete(id=3, name="c", amount=decimal.Decimal("3.00")),
            log.insert(id=4, name="d", amount=None),
            log.update({"id": 1, "name": "a", "amount": decimal.Decimal("1.00")}, id=10),
        ]
    )
    w2 = write_window(base, WindowSpec("dbo_orders", start, log.lsn, second))
    return w1, w2


EXPECTED_AFTER_TWO = {
    1: (True, "a", decimal.Decimal("1.00")),
    2: (False, "bb", decimal.Decimal("2.00")),
    3: (True, "c", decimal.Decimal("3.00")),
    4: (False, "d", None),
    10: (False, "a", decimal.Decimal("1.00")),
}


@pytest.mark.spark
def test_create_upsert_soft_delete_and_key_change(spark: Any, base: Path, namespace: str) -> None:
    w1, w2 = two_windows(base)
    table = f"{namespace}.dbo_orders"
    result = run(spark, namespace, w1)
    assert contents(spark, table) == {k: (False, n, a) for k, n, a in [(1, "a", 1), (2, "b", 2), (3, "c", 3)]}
    schema = {f.name: (f.dataType.simpleString(), f.nullable) for f in spark.table(table).schema.fields}
    assert schema == {
        "id": ("int", False),
        "name": ("string", True),
        "amount": ("decimal(10,2)", True),
        "_cdc_start_lsn": ("binary", False),
        "_cdc_seqval": ("binary", False),
        "_cdc_operation": ("int", False),
        "_cdc_commit_time": ("timestamp", True),
        "_cdc_deleted": ("boolean", False),
    }
    properties = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert properties["identifier-fields"] == "[id]"
    assert result[table]["max_applied_lsn"] == {"dbo_orders": json.loads(Path(w1).read_text())["to_lsn"]}

    run(spark, namespace, w2)
    assert contents(spark, table) == EXPECTED_AFTER_TWO
    row = spark.sql(f"SELECT * FROM {table} WHERE id = 3").first()
    manifest = json.loads(Path(w2).read_text())
    assert row._cdc_operation == 1
    assert bytes(row._cdc_start_lsn) <= lsn(int(manifest["to_lsn"], 16))
    summary = (
        spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first().summary
    )
    assert summary["sqlserver-cdc.max-applied-lsn.dbo_orders"] == manifest["to_lsn"]
    assert summary["sqlserver-cdc.applied-lsn-ranges.dbo_orders"] == f"{lsn_hex(0x100)}-{manifest['to_lsn']}"


@pytest.mark.spark
def test_replay_is_skipped_without_a_commit(spark: Any, base: Path, namespace: str) -> None:
    w1, w2 = two_windows(base)
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w1, w2)
    snapshots = snapshot_count(spark, table)
    result = run(spark, namespace, w2, w1)
    assert result[table]["applied"] == []
    assert len(result[table]["skipped"]) == 2
    assert snapshot_count(spark, table) == snapshots
    assert contents(spark, table) == EXPECTED_AFTER_TWO


@pytest.mark.spark
@pytest.mark.parametrize("write_mode", merge_job.WRITE_MODES)
def test_out_of_order_windows_and_overlapping_replay_give_the_same_table(
    spark: Any, base: Path, namespace: str, write_mode: str
) -> None:
    w1, w2 = two_windows(base)
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w2, write_mode=write_mode)  # the newer window first (a backfill of w1 comes later)
    run(spark, namespace, w1, write_mode=write_mode)
    assert contents(spark, table) == EXPECTED_AFTER_TWO
    # A window that overlaps applied ranges is not "contained", so it is merged: the LSN condition
    # must make it a no-op.
    doc = json.loads(Path(w2).read_text())
    doc["from_lsn"] = lsn_hex(0x50)
    Path(w2).write_text(json.dumps(doc))
    before = spark.sql(f"SELECT * FROM {table}").collect()
    result = run(spark, namespace, w2, write_mode=write_mode)
    assert result[table]["applied"] == [f"dbo_orders {lsn_hex(0x50)}_{doc['to_lsn']}"]
    assert sorted(spark.sql(f"SELECT * FROM {table}").collect()) == sorted(before)


@pytest.mark.spark
@pytest.mark.parametrize("write_mode", merge_job.WRITE_MODES)
def test_hard_deletes_remove_rows_and_refuse_out_of_order_windows(
    spark: Any, base: Path, namespace: str, write_mode: str
) -> None:
    w1, w2 = two_windows(base)
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w1, w2, delete_mode="hard", write_mode=write_mode)
    assert contents(spark, table) == {k: v for k, v in EXPECTED_AFTER_TWO.items() if not v[0]}
    log = ChangeLog(start=0x40)
    old = write_window(base, WindowSpec("dbo_orders", 0x40, 0x60, log.insert(id=3, name="c", amount=None)))
    with pytest.raises(
        MergeJobError, match=r"starts at or below the highest applied LSN .* use --delete-mode soft"
    ):
        run(spark, namespace, old, delete_mode="hard", write_mode=write_mode)
    assert 3 not in contents(spark, table)


@pytest.mark.spark
def test_several_capture_instances_and_manifests_in_one_run(spark: Any, base: Path, namespace: str) -> None:
    w1, w2 = two_windows(base)
    log = ChangeLog(start=0x1000)
    c1 = write_window(
        base, WindowSpec("sales_customers", 0x1000, 0x1100, log.insert(id=7, name="x", amount=None))
    )
    result = run(spark, namespace, w2, c1, w1)
    assert contents(spark, f"{namespace}.dbo_orders") == EXPECTED_AFTER_TWO
    assert contents(spark, f"{namespace}.sales_customers") == {7: (False, "x", None)}
    assert result[f"{namespace}.sales_customers"]["max_applied_lsn"] == {"sales_customers": lsn_hex(0x1100)}
    assert snapshot_count(spark, f"{namespace}.dbo_orders") == 1  # both windows in one MERGE commit


@pytest.mark.spark
def test_empty_window_starts_no_merge(spark: Any, base: Path, namespace: str) -> None:
    w1, _ = two_windows(base)
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w1)
    snapshots = snapshot_count(spark, table)
    empty = write_window(base, WindowSpec("dbo_orders", 0x9000, 0x9100, []))
    result = run(spark, namespace, empty)
    assert result[table]["applied"] == [f"dbo_orders {lsn_hex(0x9000)}_{lsn_hex(0x9100)}"]
    assert snapshot_count(spark, table) == snapshots


@pytest.mark.spark
def test_invalid_window_is_refused_before_the_table_is_touched(
    spark: Any, base: Path, namespace: str
) -> None:
    w1, w2 = two_windows(base)
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w1)
    snapshots = snapshot_count(spark, table)
    doc = json.loads(Path(w2).read_text())
    doc["files"][0]["rows"] += 1
    doc["row_count"] += 1
    Path(w2).write_text(json.dumps(doc))
    with pytest.raises(ManifestError, match=r"the Parquet files hold 6 rows, the manifest .* says 7"):
        run(spark, namespace, w2)
    (Path(w2).parent / "part-00000.parquet").unlink()
    with pytest.raises(ManifestError, match="part-00000.parquet listed in .* is missing"):
        run(spark, namespace, w2)
    with pytest.raises(ManifestError, match="does not exist: the extract task did not finish"):
        run(spark, namespace, str(base / "dbo_orders" / "nowhere" / "_manifest.json"))
    assert snapshot_count(spark, table) == snapshots


@pytest.mark.spark
def test_schema_evolution(spark: Any, base: Path, namespace: str) -> None:
    w1, _ = two_windows(base)
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w1)
    wide_amount = Column("amount", "decimal", pa.decimal128(14, 2), precision=14, scale=2)
    note = Column("note", "varchar", pa.string(), max_length=20)
    log = ChangeLog(start=0x500)
    rows = flatten(
        [
            log.insert(id=20, amount=decimal.Decimal("123456789.12"), note="new"),
            log.update({"id": 2, "amount": decimal.Decimal("2.00"), "note": None}, note="changed"),
        ]
    )
    w3 = write_window(
        base, WindowSpec("dbo_orders", 0x500, log.lsn, rows, columns=(INT_KEY, wide_amount, note))
    )
    run(spark, namespace, w3)
    schema = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
    assert schema["amount"] == "decimal(14,2)"
    assert schema["note"] == "string"
    rows_by_id = {r.id: r for r in spark.table(table).collect()}
    assert rows_by_id[20].name is None and rows_by_id[20].note == "new"
    assert rows_by_id[20].amount == decimal.Decimal("123456789.12")
    assert rows_by_id[2].name == "b" and rows_by_id[2].note == "changed"  # absent column keeps its value
    assert rows_by_id[1].note is None

    snapshots = snapshot_count(spark, table)
    name_as_int = Column("name", "int", pa.int32())
    log = ChangeLog(start=0x900)
    w4 = write_window(
        base,
        WindowSpec("dbo_orders", 0x900, 0x9FF, log.insert(id=30, name=5), columns=(INT_KEY, name_as_int)),
    )
    with pytest.raises(
        SchemaEvolutionError, match=f"target table {namespace}.dbo_orders: column name is string"
    ):
        run(spark, namespace, w4)
    assert snapshot_count(spark, table) == snapshots


ALL_TYPES = (
    INT_KEY,
    Column("flag", "bit", pa.bool_()),
    Column("tiny", "tinyint", pa.int16()),
    Column("big", "bigint", pa.int64()),
    Column("price", "money", pa.decimal128(19, 4), precision=19, scale=4),
    Column("ratio", "float", pa.float64(), precision=53),
    Column("small_ratio", "real", pa.float32(), precision=24),
    Column("guid", "uniqueidentifier", pa.string()),
    Column("blob", "varbinary", pa.binary(), max_length=-1),
    Column("day", "date", pa.date32()),
    Column("at", "datetime", pa.timestamp("us")),
    Column("at7", "datetime2", pa.timestamp("ns"), scale=7),
    Column("at_offset", "datetimeoffset", pa.string(), scale=7),
    Column("clock", "time", pa.string(), scale=7),
)


@pytest.mark.spark
def test_types_are_kept_faithfully(spark: Any, base: Path, namespace: str) -> None:
    at7 = pa.array([1_700_000_000_123_456_789, -1_234_567], pa.int64()).cast(pa.timestamp("ns"))
    values = {
        "id": 1,
        "flag": True,
        "tiny": 255,
        "big": 2**62,
        "price": decimal.Decimal("922337203685477.5807"),
        "ratio": 1.5e300,
        "small_ratio": 0.5,
        "guid": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "blob": b"\x00\xff",
        "day": dt.date(1, 1, 1),
        "at": dt.datetime(2026, 3, 29, 2, 30, 0, 997000),
        "at7": at7[0].value,
        "at_offset": "2026-03-29T02:30:00.1234567+05:30",
        "clock": "23:59:59.9999999",
    }
    second = dict(values, id=2, at7=at7[1].value)
    rows = [Row(0x200, 0x20001, 2, values), Row(0x200, 0x20002, 2, second)]
    window = write_window(base, WindowSpec("dbo_types", 0x100, 0x200, rows, columns=ALL_TYPES))
    run(spark, namespace, window)
    table = f"{namespace}.dbo_types"
    schema = {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}
    assert schema == {
        "id": "int",
        "flag": "boolean",
        "tiny": "int",
        "big": "bigint",
        "price": "decimal(19,4)",
        "ratio": "double",
        "small_ratio": "float",
        "guid": "string",
        "blob": "binary",
        "day": "date",
        "at": "timestamp_ntz",
        "at7": "timestamp_ntz",
        "at_offset": "string",
        "clock": "string",
        **{name: kind.lower() for name, kind, _ in merge_job.TARGET_META_COLUMNS},
    }
    got = {r.id: r.asDict() for r in spark.table(table).collect()}
    for column in (
        "flag",
        "tiny",
        "big",
        "price",
        "ratio",
        "small_ratio",
        "guid",
        "day",
        "at",
        "at_offset",
        "clock",
    ):
        assert got[1][column] == values[column], column
    assert bytes(got[1]["blob"]) == b"\x00\xff"
    # datetime2(7) keeps microseconds: the 100 ns digit is dropped (floored, also before 1970).
    assert got[1]["at7"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456)
    assert got[2]["at7"] == dt.datetime(1969, 12, 31, 23, 59, 59, 998765)


@pytest.mark.spark
@pytest.mark.parametrize("write_mode", merge_job.WRITE_MODES)
def test_snapshot_replaces_contents_as_a_baseline(
    spark: Any, base: Path, namespace: str, write_mode: str
) -> None:
    w1, w2 = two_windows(base)
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w1, w2, write_mode=write_mode)
    to_lsn = int(json.loads(Path(w2).read_text())["to_lsn"], 16)
    snapshot_lsn = to_lsn + 0x100
    rows = [Row(snapshot_lsn, snapshot_lsn, 2, {"id": i, "name": f"s{i}", "amount": None}) for i in (2, 5)]
    snap = write_window(base, WindowSpec("dbo_orders", snapshot_lsn, snapshot_lsn, rows, kind="snapshot"))
    result = run(spark, namespace, snap, write_mode=write_mode)
    assert result[table]["max_applied_lsn"] == {"dbo_orders": lsn_hex(snapshot_lsn)}
    got = contents(spark, table)
    assert {k for k, v in got.items() if not v[0]} == {2, 5}
    assert got[2] == (False, "s2", None)
    # Rows absent from the snapshot are tombstoned at the snapshot LSN, so the old windows cannot
    # bring them back; every window below the snapshot now counts as applied.
    result = run(spark, namespace, w1, w2, write_mode=write_mode)
    assert result[table]["applied"] == []
    assert {k for k, v in contents(spark, table).items() if not v[0]} == {2, 5}


@pytest.mark.spark
def test_spark_net_effect_equals_the_python_rule(spark: Any) -> None:
    generator = random.Random(6)
    rows = []
    for number in range(400):
        start_lsn = generator.randrange(1, 40)
        seqval = generator.randrange(1, 5)
        operation = generator.choice([1, 2, 3, 4])
        rows.append(
            (
                generator.randrange(1, 15),
                f"v{number}",
                lsn(start_lsn),
                lsn(start_lsn * 100 + seqval),
                operation,
            )
        )
    unique = {(r[0], r[2], r[3], r[4]): r for r in rows}  # a position occurs once per key in a real log
    rows = list(unique.values())
    frame = spark.createDataFrame(
        [(*r, None) for r in rows],
        "id INT, v STRING, _cdc_start_lsn BINARY, _cdc_seqval BINARY, _cdc_operation INT, _cdc_commit_time TIMESTAMP",
    )
    from_spark = {
        r.id: (r._cdc_deleted, r.v, bytes(r._cdc_start_lsn), bytes(r._cdc_seqval), r._cdc_operation)
        for r in merge_job.net_effect_frame(frame, ["id"]).collect()
    }
    changes = [Change(ChangePosition(r[2], r[3], r[4]), {"id": r[0], "v": r[1]}) for r in rows]
    from_python = {
        key[0]: (c.deletes, c.values["v"], c.position.start_lsn, c.position.seqval, c.position.operation)
        for key, c in net_effect(changes, ["id"]).items()
    }
    assert from_spark == from_python
    assert any(v[0] for v in from_python.values()) and any(not v[0] for v in from_python.values())


@pytest.mark.spark
@pytest.mark.parametrize(
    ("key_ordinals", "mask", "kept"),
    [
        ([1], "07", True),  # key bit set: the update may have changed the key
        ([1], "06", False),  # only non-key columns changed
        ([1], "0100", False),  # ordinal 9 changed, in the byte before the last
        ([9], "0100", True),
        ([10], "0200", True),
        ([10], "0001", False),
        ([1, 10], "0200", True),  # composite key: any key bit keeps it
        ([10], "06", True),  # a mask too short for the key's bit is kept, to be safe
        ([1], None, True),  # no mask: kept
    ],
)
def test_before_image_filter_reads_the_update_mask_as_sql_server_lays_it_out(
    spark: Any, key_ordinals: list[int], mask: str | None, kept: bool
) -> None:
    from pyspark.sql import functions as F

    columns = tuple({"name": f"c{o}", "ordinal": o, "sql_type": "int"} for o in key_ordinals)
    window = merge_job.Window(
        uri="u", directory="d", kind="changes", capture_instance="dbo_t", from_lsn=merge_job.LSN_ZERO,
        to_lsn=merge_job.LSN_ZERO, source={}, key_columns=tuple(c["name"] for c in columns), columns=columns,
        files=(), row_count=0, document={},
    )  # fmt: skip
    frame = spark.createDataFrame(
        [(3, None if mask is None else bytes.fromhex(mask)), (4, b"\x00"), (1, b"\x00")],
        "`__$operation` INT, `__$update_mask` BINARY",
    )
    condition = merge_job.before_image_needed(window, F.col("`__$update_mask`"))
    assert [r[0] for r in frame.where(condition).collect()] == ([3, 4, 1] if kept else [4, 1])


def test_merge_sql_bounds_the_target_by_the_source_key_range() -> None:
    key_range = merge_job.KeyRange("id", -5, 42, "INT")
    statement = merge_job.merge_sql("lake.ns.t", "src", ["id", "name"], ["id"], False, key_range)
    assert "ON t.`id` = s.`id` AND t.`id` BETWEEN -5 AND 42 WHEN MATCHED" in statement
    assert "BETWEEN" not in merge_job.merge_sql("lake.ns.t", "src", ["id", "name"], ["id"], False)


def test_decimal_key_range_bounds_are_literals_of_the_column_type() -> None:
    key_range = merge_job.KeyRange("order no", -(10**37), 10**37, "DECIMAL(38,0)")
    assert key_range.condition("t.") == (
        f"t.`order no` BETWEEN CAST({-(10**37)} AS DECIMAL(38,0)) AND CAST({10**37} AS DECIMAL(38,0))"
    )


NUMERIC_KEY = Column("id", "numeric", pa.decimal128(38, 0), nullable=False, max_length=17, precision=38)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("write_mode", "key", "offset"),
    [
        *[(mode, INT_KEY, 0) for mode in merge_job.WRITE_MODES],
        ("merge-on-read", NUMERIC_KEY, 10**20),  # numeric(38,0): beyond bigint
    ],
)
def test_key_range_prunes_the_target_scan_and_keeps_rows_outside_it(
    spark: Any, base: Path, namespace: str, write_mode: str, key: Column, offset: int
) -> None:
    """Rows outside the window's key range share data files with changed rows; none may be lost."""
    columns = (key, NAME, AMOUNT)
    log = ChangeLog()
    first = flatten(log.insert(id=offset + k, name=f"n{k}", amount=None) for k in range(1, 101))
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, first, columns=columns))
    start = log.lsn + 1
    second = flatten(
        [
            log.update({"id": offset + 50, "name": "n50", "amount": None}, name="changed"),
            log.insert(id=offset + 150, name="new"),
        ]
    )
    w2 = write_window(base, WindowSpec("dbo_orders", start, log.lsn, second, columns=columns))
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w1, write_mode=write_mode)

    window = merge_job.read_manifest(spark, w2)
    plan = merge_job.TargetPlan(table, windows=[window])
    merge_job.plan_schema(None, plan, None)
    changes = merge_job.read_window(spark, window, table)
    bounds = merge_job.source_key_range(changes, plan)
    assert bounds == merge_job.KeyRange("id", offset + 50, offset + 150, plan.column_types["id"])
    merge_job.net_effect_frame(changes, ["id"]).createOrReplaceTempView("range_source")
    statement = merge_job.merge_sql(table, "range_source", ["id", "name", "amount"], ["id"], False, bounds)
    explained = spark.sql("EXPLAIN " + statement).first()[0]
    # Pushed into the Iceberg scan of the target.
    assert f"filters=id >= {offset + 50}, id <= {offset + 150}" in explained, explained
    assert merge_job.target_rows_scanned(spark, table, bounds) == 100

    run(spark, namespace, w2, write_mode=write_mode)
    rows = contents(spark, table)
    assert len(rows) == 101
    assert rows[offset + 50] == (False, "changed", None) and rows[offset + 150] == (False, "new", None)
    assert all(rows[offset + k] == (False, f"n{k}", None) for k in range(1, 101) if k != 50)


def rows_then_a_few_changes(base: Path) -> tuple[str, str]:
    """Write two windows: inserts of ids 1-200, then an update of id 7 and an insert of id 300."""
    log = ChangeLog()
    first = flatten(log.insert(id=k, name=f"n{k}", amount=None) for k in range(1, 201))
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, first))
    start = log.lsn + 1
    second = flatten(
        [log.update({"id": 7, "name": "n7", "amount": None}, name="changed"), log.insert(id=300)]
    )
    return w1, write_window(base, WindowSpec("dbo_orders", start, log.lsn, second))


@pytest.mark.spark
def test_merge_on_read_filters_the_target_scan_by_the_source_keys(
    spark: Any, base: Path, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The MERGE's target scan carries a Bloom filter of the source keys, built from the checkpointed net effect."""
    w1, w2 = rows_then_a_few_changes(base)
    table = f"{namespace}.dbo_orders"
    with caplog.at_level(logging.INFO, logger=merge_job.LOG.name):
        run(spark, namespace, w1, write_mode="merge-on-read")
    assert "runtime key filter on" not in caplog.text  # the table was empty: nothing to filter

    window = merge_job.read_manifest(spark, w2)
    plan = merge_job.TargetPlan(table, windows=[window])
    merge_job.plan_schema(None, plan, None)
    changes = merge_job.read_window(spark, window, table)
    threshold = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(threshold)
    persistent_rdds = spark.sparkContext._jsc.getPersistentRDDs
    held = persistent_rdds().size()
    with merge_job.checkpointed_net_effect(changes, ["id"]) as source:
        assert persistent_rdds().size() == held + 1
        source.createOrReplaceTempView("keyed_source")
        statement = merge_job.merge_sql(table, "keyed_source", ["id", "name", "amount"], ["id"], False)
        with merge_job.session_conf(spark, merge_job.runtime_key_filter_conf(window.row_count)):
            explained = spark.sql("EXPLAIN " + statement).first()[0]
            assert spark.conf.get(threshold) == "-1"
        default_plan = spark.sql("EXPLAIN " + statement).first()[0]
    assert persistent_rdds().size() == held and spark.conf.get(threshold) == before
    bloom = re.search(r"Filter might_contain\(.*xxhash64\((id#\d+L?), 42\)\)", explained)
    assert bloom, explained
    target_scan = re.search(rf"BatchScan {re.escape(table)}\[{bloom.group(1)},", explained)
    assert target_scan, explained  # it tests the key the target's scan reads
    assert "might_contain" not in default_plan  # Spark's defaults would not add it for a small source
    sized_for_3_keys = r"bloom_filter_agg\(xxhash64\(id#\d+L?, 42\), 3, 24,"
    assert re.search(sized_for_3_keys, explained), explained

    caplog.clear()
    with caplog.at_level(logging.INFO, logger=merge_job.LOG.name):
        run(spark, namespace, w2, write_mode="merge-on-read")
    assert "runtime key filter on (200 target rows to scan, 3 change rows)" in caplog.text
    rows = contents(spark, table)
    assert len(rows) == 201 and rows[7] == (False, "changed", None) and rows[300][0] is False
    assert all(rows[k] == (False, f"n{k}", None) for k in range(1, 201) if k != 7)


@pytest.mark.spark
def test_table_properties_are_set_on_tables_the_job_creates_only(
    spark: Any, base: Path, namespace: str
) -> None:
    w1, w2 = rows_then_a_few_changes(base)
    table = f"{namespace}.dbo_orders"
    run(spark, namespace, w1, table_properties={"write.merge.distribution-mode": "none"})
    properties = merge_job.iceberg_table(spark, table).properties()
    assert properties.get("write.merge.distribution-mode") == "none"
    assert properties.get("write.merge.mode") == "merge-on-read"
    run(spark, namespace, w2, table_properties={"write.merge.distribution-mode": "hash"})
    properties = merge_job.iceberg_table(spark, table).properties()
    assert properties.get("write.merge.distribution-mode") == "none"  # an existing table keeps its own
    assert contents(spark, table)[7] == (False, "changed", None)


@pytest.mark.spark
def test_copy_on_write_targets_merge_without_the_runtime_key_filter(
    spark: Any, base: Path, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    w1, w2 = rows_then_a_few_changes(base)
    run(spark, namespace, w1, write_mode="copy-on-write")
    with caplog.at_level(logging.INFO, logger=merge_job.LOG.name):
        run(spark, namespace, w2, write_mode="copy-on-write")
    assert "MERGE of" in caplog.text and "runtime key filter on" not in caplog.text
    assert contents(spark, f"{namespace}.dbo_orders")[7] == (False, "changed", None)


@pytest.mark.spark
def test_target_rows_scanned_counts_the_records_of_the_files_the_key_range_keeps(
    spark: Any, base: Path, namespace: str
) -> None:
    log = ChangeLog()
    low = flatten(log.insert(id=k, name="x", amount=None) for k in range(1, 31))
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, low))
    start = log.lsn + 1
    high = flatten(log.insert(id=k, name="x", amount=None) for k in range(1001, 1011))
    w2 = write_window(base, WindowSpec("dbo_orders", start, log.lsn, high))
    run(spark, namespace, w1)
    run(spark, namespace, w2)  # a second data file: keys 1001-1010
    table = f"{namespace}.dbo_orders"
    assert merge_job.target_rows_scanned(spark, table, None) == 40
    assert merge_job.target_rows_scanned(spark, table, merge_job.KeyRange("id", 1005, 2000, "INT")) == 10
    assert merge_job.target_rows_scanned(spark, table, merge_job.KeyRange("id", 5000, 6000, "INT")) == 0


@pytest.mark.parametrize(
    ("target_rows", "change_rows", "pays"),
    [(400, 100, True), (399, 100, False), (None, 100, False), (0, 1, False)],
)
def test_runtime_key_filter_pays_from_four_target_rows_per_change_row(
    target_rows: int | None, change_rows: int, pays: bool
) -> None:
    assert merge_job.runtime_key_filter_pays(target_rows, change_rows) is pays


def test_runtime_key_filter_is_sized_for_the_change_rows_within_sparks_cap() -> None:
    small = merge_job.runtime_key_filter_conf(1000)
    assert small["spark.sql.optimizer.runtime.bloomFilter.expectedNumItems"] == "1000"
    assert small["spark.sql.optimizer.runtime.bloomFilter.numBits"] == "8000"
    huge = merge_job.runtime_key_filter_conf(10**9)
    assert huge["spark.sql.optimizer.runtime.bloomFilter.numBits"] == str(merge_job.BLOOM_FILTER_MAX_BITS)


@pytest.mark.parametrize("key_type", ["STRING", "DECIMAL(18,2)", "TIMESTAMP_NTZ", "BINARY"])
def test_source_key_range_is_only_for_whole_number_keys(key_type: str) -> None:
    plan = merge_job.TargetPlan("lake.ns.t", key_columns=("code",), column_types={"code": key_type})
    assert merge_job.source_key_range(None, plan) is None  # and no Spark job


@pytest.mark.spark
def test_net_effect_sorts_the_changes_once(spark: Any) -> None:
    """After configure_session, the net effect has no partial window-group limit (an extra full sort)."""
    merge_job.configure_session(spark)
    frame = spark.createDataFrame(
        [(1, b"\x01", b"\x01", 2, None)],
        "id INT, _cdc_start_lsn BINARY, _cdc_seqval BINARY, _cdc_operation INT, _cdc_commit_time TIMESTAMP",
    )
    plan = merge_job.net_effect_frame(frame, ["id"])._jdf.queryExecution().executedPlan().toString()
    assert "WindowGroupLimit" not in plan
    assert plan.count("Sort [") == 1, plan


@pytest.mark.spark
def test_before_images_that_keep_the_key_are_dropped_and_the_result_is_unchanged(
    spark: Any, base: Path, namespace: str
) -> None:
    """SQL Server's update mask marks the columns an update changed; a before-image matters only for a key change."""
    name_only, key_and_name = b"\x02", b"\x03"  # ordinals: id 1, name 2, amount 3
    changes = [
        Row(0x110, 0x11001, 2, {"id": 1, "name": "a", "amount": None}),
        Row(0x110, 0x11002, 2, {"id": 2, "name": "b", "amount": None}),
        Row(0x120, 0x12001, 3, {"id": 1, "name": "a", "amount": None}, update_mask=name_only),
        Row(0x120, 0x12001, 4, {"id": 1, "name": "a2", "amount": None}, update_mask=name_only),
        Row(0x130, 0x13001, 3, {"id": 2, "name": "b", "amount": None}, update_mask=key_and_name),
        Row(0x130, 0x13001, 4, {"id": 7, "name": "b7", "amount": None}, update_mask=key_and_name),
    ]
    manifest = write_window(base, WindowSpec("dbo_orders", 0x100, 0x130, changes))
    window = merge_job.read_manifest(spark, manifest)
    read = merge_job.read_window(spark, window, f"{namespace}.dbo_orders")
    positions = sorted((r.id, r._cdc_operation) for r in read.collect())
    assert positions == [(1, 2), (1, 4), (2, 2), (2, 3), (7, 4)]  # only id 1's before-image is gone

    run(spark, namespace, manifest)
    assert contents(spark, f"{namespace}.dbo_orders") == {
        1: (False, "a2", None),
        2: (True, "b", None),  # the key change's before-image still deletes the old key
        7: (False, "b7", None),
    }


@pytest.mark.spark
def test_window_written_by_the_extraction_writer_merges(spark: Any, tmp_path: Path, namespace: str) -> None:
    """Contract check: a window made by the real Parquet writer and manifest code of the extraction."""
    import pyarrow.fs as pafs

    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.change_reader import METADATA_FIELDS
    from airflow_provider_sqlserver_cdc.lsn import Lsn
    from airflow_provider_sqlserver_cdc.parquet.manifest import (
        WindowManifest,
        column_descriptions,
        write_manifest,
    )
    from airflow_provider_sqlserver_cdc.parquet.type_mapping import arrow_field, column_converter
    from airflow_provider_sqlserver_cdc.parquet.window_writer import ParquetWindowWriter

    columns = (
        CapturedColumn("order_id", 1, "int", 4, 10, 0, False),
        CapturedColumn("total", 2, "money", 8, 19, 4),
        CapturedColumn("placed", 3, "datetime2", 8, 27, 7),
        CapturedColumn("placed_local", 4, "datetimeoffset", 10, 34, 7),
        CapturedColumn("at", 5, "time", 5, 16, 7),
        CapturedColumn("ref", 6, "uniqueidentifier", 16, 0, 0),
        CapturedColumn("note", 7, "nvarchar", -1, 0, 0),
    )
    instance = CaptureInstance(
        "dbo_orders", "dbo", "orders", Lsn.from_hex(lsn_hex(1)), columns=columns, key_columns=("order_id",)
    )
    driver_values = {
        "order_id": [1, 2, 2],
        "total": [decimal.Decimal("10.5000"), decimal.Decimal("3.2500"), decimal.Decimal("4.0000")],
        "placed": ["2026-03-29 02:30:00.1234567"] * 3,
        "placed_local": ["2026-03-29 02:30:00.1234567 +05:30"] * 3,
        "at": ["23:59:59.1234567"] * 3,
        "ref": ["6f9619ff-8b86-d011-b42d-00c04fc964ff"] * 3,
        "note": ["é", None, "updated"],
    }
    arrays = [
        pa.array([lsn(0x20), lsn(0x30), lsn(0x30)]),
        pa.array([lsn(0x2001), lsn(0x3001), lsn(0x3001)]),
        pa.array([2, 3, 4], pa.int32()),
        pa.array([b"\x7f", b"\x01", b"\x01"]),
        pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * 3, pa.timestamp("us", tz="UTC")),
        *[column_converter(c)(driver_values[c.name]) for c in columns],
    ]
    schema = pa.schema(METADATA_FIELDS + [arrow_field(c) for c in columns])
    window_dir = str(tmp_path / "windows" / "dbo_orders" / f"{lsn_hex(0x10)}_{lsn_hex(0x40)}")
    filesystem = pafs.LocalFileSystem()
    with ParquetWindowWriter(filesystem, window_dir, schema) as writer:
        writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
    manifest = WindowManifest(
        kind="changes",
        capture_instance="dbo_orders",
        source={"server": "sim", "database": "shop", "schema": "dbo", "table": "orders"},
        from_lsn=lsn_hex(0x10),
        to_lsn=lsn_hex(0x40),
        from_time=None,
        to_time=None,
        mode="interval",
        row_filter_option="all update old",
        key_columns=["order_id"],
        columns=column_descriptions(instance),
        files=writer.files,
        row_count=3,
        operation_counts={"delete": 0, "insert": 1, "update_before": 1, "update_after": 1},
    )
    manifest_path = write_manifest(filesystem, window_dir, manifest)
    run(spark, namespace, manifest_path)
    got = {r.order_id: r.asDict() for r in spark.table(f"{namespace}.dbo_orders").collect()}
    assert got[1]["total"] == decimal.Decimal("10.5000")
    assert got[1]["placed"] == dt.datetime(2026, 3, 29, 2, 30, 0, 123456)
    assert got[1]["placed_local"] == "2026-03-29T02:30:00.1234567+05:30"
    assert got[1]["at"] == "23:59:59.1234567"
    assert got[1]["ref"] == "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    assert got[1]["note"] == "é"
    assert (got[2]["note"], got[2]["total"], got[2]["_cdc_operation"]) == (
        "updated",
        decimal.Decimal("4.0000"),
        4,
    )


@pytest.mark.spark
def test_composite_key_and_a_changed_key_is_refused(spark: Any, base: Path, namespace: str) -> None:
    region = Column("region", "char", pa.string(), nullable=False, max_length=2)
    columns = (region, INT_KEY, NAME)
    log = ChangeLog()
    first = flatten([log.insert(region="EU", id=1, name="a"), log.insert(region="US", id=1, name="b")])
    w1 = write_window(
        base, WindowSpec("dbo_orders", 0x100, 0x1FF, first, columns=columns, key_columns=("region", "id"))
    )
    log.lsn = 0x200
    second = log.update({"region": "US", "id": 1, "name": "b"}, name="bb")
    w2 = write_window(
        base, WindowSpec("dbo_orders", 0x200, 0x2FF, second, columns=columns, key_columns=("region", "id"))
    )
    run(spark, namespace, w1)
    run(spark, namespace, w2)
    table = f"{namespace}.dbo_orders"
    assert sorted((r.region, r.id, r.name) for r in spark.table(table).collect()) == [
        ("EU", 1, "a"),
        ("US", 1, "bb"),
    ]
    log.lsn = 0x300
    w3 = write_window(
        base,
        WindowSpec(
            "dbo_orders",
            0x300,
            0x3FF,
            log.insert(region="EU", id=2, name="c"),
            columns=columns,
            key_columns=("id",),
        ),
    )
    with pytest.raises(SchemaEvolutionError, match=f"target table {table}: its identifier fields are"):
        run(spark, namespace, w3)
