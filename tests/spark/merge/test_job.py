"""The merge run against a local Iceberg catalog: creation, replays, order, deletes, snapshots, schema."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from merge_runs import EXPECTED_AFTER_TWO, contents, merge_fails, run, snapshot_count, two_windows
from window_builder import (
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

from airflow_provider_sqlserver_cdc.spark.merge.errors import (
    MergeJobError,
    SchemaEvolutionError,
    TableMergeError,
)
from airflow_provider_sqlserver_cdc.window.manifest import ManifestError

pytestmark = pytest.mark.spark


def test_create_upsert_soft_delete_and_key_change(spark: Any, base: Path, namespace: str, table: str) -> None:
    w1, w2 = two_windows(base)
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


def test_replay_is_skipped_without_a_commit(spark: Any, base: Path, namespace: str, table: str) -> None:
    w1, w2 = two_windows(base)
    run(spark, namespace, w1, w2)
    snapshots = snapshot_count(spark, table)
    result = run(spark, namespace, w2, w1)
    assert result[table]["applied"] == []
    assert len(result[table]["skipped"]) == 2
    assert snapshot_count(spark, table) == snapshots
    assert contents(spark, table) == EXPECTED_AFTER_TWO


def test_out_of_order_windows_and_overlapping_replay_give_the_same_table(
    spark: Any, base: Path, namespace: str, table: str, write_mode: str
) -> None:
    w1, w2 = two_windows(base)
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


def test_hard_deletes_remove_rows_and_refuse_out_of_order_windows(
    spark: Any, base: Path, namespace: str, table: str, write_mode: str
) -> None:
    w1, w2 = two_windows(base)
    run(spark, namespace, w1, w2, delete_mode="hard", write_mode=write_mode)
    assert contents(spark, table) == {k: v for k, v in EXPECTED_AFTER_TWO.items() if not v[0]}
    log = ChangeLog(start=0x40)
    old = write_window(base, WindowSpec("dbo_orders", 0x40, 0x60, log.insert(id=3, name="c", amount=None)))
    with pytest.raises(
        MergeJobError, match=r"starts at or below the highest applied LSN .* use --delete-mode soft"
    ):
        run(spark, namespace, old, delete_mode="hard", write_mode=write_mode)
    assert 3 not in contents(spark, table)


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


def test_a_failed_table_leaves_the_others_committed_and_a_rerun_merges_only_it(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    w1, w2 = two_windows(base)
    log = ChangeLog(start=0x1000)
    c1 = write_window(
        base, WindowSpec("sales_customers", 0x1000, 0x10FF, log.insert(id=7, name="x", amount=None))
    )
    name_as_int = Column("name", "int", pa.int32())
    conflicting = WindowSpec(
        "sales_customers",
        0x1100,
        0x11FF,
        ChangeLog(0x1100).insert(id=8, name=5),
        columns=(INT_KEY, name_as_int),
    )
    c2 = write_window(base, conflicting)
    notes = WindowSpec("sales_notes", 0x2000, 0x20FF, ChangeLog(0x2000).insert(id=1, name="n", amount=None))
    n1 = write_window(base, notes)
    doc = json.loads(Path(n1).read_text())
    doc["files"][0]["rows"] += 1
    doc["row_count"] += 1
    doc["operation_counts"]["insert"] += 1
    Path(n1).write_text(json.dumps(doc))  # a corrupt window: its files hold fewer rows than it says
    customers, notes_table = f"{namespace}.sales_customers", f"{namespace}.sales_notes"

    with pytest.raises(TableMergeError) as raised:
        run(spark, namespace, w1, c1, c2, n1, w2)
    error = raised.value
    assert error.failed_tables == [customers, notes_table]
    assert isinstance(error.failures[customers], SchemaEvolutionError)
    assert isinstance(error.failures[notes_table], ManifestError)
    first_line, *reasons, advice = str(error).splitlines()
    assert first_line == f"the merge failed for 2 of 3 target table(s): {customers}, {notes_table}"
    assert (
        reasons[0].startswith(f"- {customers} (windows sales_customers ") and "column name is" in reasons[0]
    )
    assert (
        reasons[1].startswith(f"- {notes_table} (windows sales_notes ")
        and "the Parquet files hold 1" in reasons[1]
    )
    assert advice.startswith(f"Committed: {table}. Fix the cause and re-run the task")
    # The good table committed, with its LSN ranges; the failed ones were not touched.
    assert error.result[table]["status"] == "committed"
    assert contents(spark, table) == EXPECTED_AFTER_TWO
    to_lsn = json.loads(Path(w2).read_text())["to_lsn"]
    assert error.result[table]["max_applied_lsn"] == {"dbo_orders": to_lsn}
    summary = spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[
        0
    ]
    assert summary["sqlserver-cdc.applied-lsn-ranges.dbo_orders"] == f"{lsn_hex(0x100)}-{to_lsn}"
    assert error.result[customers]["status"] == "failed"
    assert error.result[customers]["failed_windows"] == [
        f"sales_customers {lsn_hex(0x1000)}_{lsn_hex(0x10FF)}",
        f"sales_customers {lsn_hex(0x1100)}_{lsn_hex(0x11FF)}",
    ]
    assert error.result[customers]["applied"] == []
    assert not spark.catalog.tableExists(customers) and not spark.catalog.tableExists(notes_table)

    # The retry, after the windows are extracted again: only the failed tables are merged.
    snapshots = snapshot_count(spark, table)
    write_window(
        base,
        WindowSpec("sales_customers", 0x1100, 0x11FF, ChangeLog(0x1100).insert(id=8, name="y", amount=None)),
    )
    write_window(base, notes)
    result = run(spark, namespace, w1, c1, c2, n1, w2)
    assert {t: entry["status"] for t, entry in result.items()} == dict.fromkeys(
        [table, customers, notes_table], "committed"
    )
    assert result[table]["applied"] == [] and len(result[table]["skipped"]) == 2
    assert snapshot_count(spark, table) == snapshots
    assert contents(spark, customers) == {7: (False, "x", None), 8: (False, "y", None)}
    assert contents(spark, notes_table) == {1: (False, "n", None)}


@pytest.fixture
def first_merged(spark: Any, base: Path, namespace: str, table: str) -> tuple[str, int]:
    """The first of ``two_windows`` merged into ``table``: the second window, and the table's snapshots now."""
    w1, w2 = two_windows(base)
    run(spark, namespace, w1)
    return w2, snapshot_count(spark, table)


def test_empty_window_starts_no_merge(
    spark: Any, base: Path, namespace: str, table: str, first_merged: tuple[str, int]
) -> None:
    _, snapshots = first_merged
    empty = write_window(base, WindowSpec("dbo_orders", 0x9000, 0x9100, []))
    result = run(spark, namespace, empty)
    assert result[table]["applied"] == [f"dbo_orders {lsn_hex(0x9000)}_{lsn_hex(0x9100)}"]
    assert snapshot_count(spark, table) == snapshots


def test_invalid_window_is_refused_before_the_table_is_touched(
    spark: Any, base: Path, namespace: str, table: str, first_merged: tuple[str, int]
) -> None:
    w2, snapshots = first_merged
    doc = json.loads(Path(w2).read_text())
    doc["files"][0]["rows"] += 1
    doc["row_count"] += 1
    doc["operation_counts"]["insert"] += 1  # a consistent manifest, only the files disagree
    Path(w2).write_text(json.dumps(doc))
    with merge_fails(table, ManifestError, match=r"the Parquet files hold 6 rows, the manifest .* says 7"):
        run(spark, namespace, w2)
    (Path(w2).parent / "part-00000.parquet").unlink()
    with merge_fails(table, ManifestError, match="part-00000.parquet listed in .* is missing"):
        run(spark, namespace, w2)
    with pytest.raises(ManifestError, match="does not exist: the extract task did not finish"):
        run(spark, namespace, str(base / "dbo_orders" / "nowhere" / "_manifest.json"))
    assert snapshot_count(spark, table) == snapshots


def test_schema_evolution(spark: Any, base: Path, namespace: str, table: str) -> None:
    w1, _ = two_windows(base)
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
    with merge_fails(
        table, SchemaEvolutionError, match=f"target table {namespace}.dbo_orders: column name is string"
    ):
        run(spark, namespace, w4)
    assert snapshot_count(spark, table) == snapshots


def test_snapshot_replaces_contents_as_a_baseline(
    spark: Any, base: Path, namespace: str, table: str, write_mode: str
) -> None:
    w1, w2 = two_windows(base)
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


def test_window_written_by_the_extraction_writer_merges(spark: Any, tmp_path: Path, namespace: str) -> None:
    """Contract check: a window made by the real Parquet writer and manifest code of the extraction."""
    import pyarrow.fs as pafs

    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.change_reader import METADATA_FIELDS
    from airflow_provider_sqlserver_cdc.lsn import Lsn
    from airflow_provider_sqlserver_cdc.parquet.manifest_store import write_manifest
    from airflow_provider_sqlserver_cdc.parquet.type_mapping import (
        arrow_field,
        column_converter,
        column_descriptions,
    )
    from airflow_provider_sqlserver_cdc.parquet.window_writer import ParquetWindowWriter
    from airflow_provider_sqlserver_cdc.window.manifest import WindowManifest

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


def test_composite_key_and_a_changed_key_is_refused(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
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
    with merge_fails(table, SchemaEvolutionError, match=f"target table {table}: its identifier fields are"):
        run(spark, namespace, w3)


def test_windows_continuing_the_applied_lsn_coalesce_into_one_range(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    log = ChangeLog()
    first = log.insert(id=1, name="a", amount=None)
    end1 = log.lsn
    w1 = write_window(base, WindowSpec("dbo_orders", 0x100, end1, first))
    log.lsn += 0x100  # other tables' commits: no change of this instance in between
    start2 = log.lsn + 1
    second = log.insert(id=2, name="b", amount=None)
    w2 = write_window(base, WindowSpec("dbo_orders", start2, log.lsn, second, applied_through=end1))
    first_result = run(spark, namespace, w1)
    assert first_result[table]["applied_lsn_ranges"] == {"dbo_orders": f"{lsn_hex(0x100)}-{lsn_hex(end1)}"}
    result = run(spark, namespace, w2)
    assert result[table]["applied_lsn_ranges"] == {"dbo_orders": f"{lsn_hex(0x100)}-{lsn_hex(log.lsn)}"}
    summary = (
        spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first().summary
    )
    assert summary["sqlserver-cdc.applied-lsn-ranges.dbo_orders"] == f"{lsn_hex(0x100)}-{lsn_hex(log.lsn)}"
    assert run(spark, namespace, w2)[table]["skipped"] == [f"dbo_orders {lsn_hex(start2)}_{lsn_hex(log.lsn)}"]


def test_window_continuing_an_lsn_the_table_lacks_is_refused(
    spark: Any, base: Path, namespace: str, table: str, first_merged: tuple[str, int]
) -> None:
    _, snapshots = first_merged
    ahead = write_window(
        base,
        WindowSpec(
            "dbo_orders",
            0x9000,
            0x9010,
            [Row(0x9010, 0x901001, 2, {"id": 9, "name": "z"})],
            applied_through=0x8000,
        ),
    )
    with merge_fails(table, MergeJobError, "Variable is ahead of the table") as raised:
        run(spark, namespace, ahead)
    assert "resnapshot" in str(raised.value) and lsn_hex(0x8000) in str(raised.value)
    assert snapshot_count(spark, table) == snapshots


def test_two_merges_of_one_table_started_at_once_lose_no_change(
    spark: Any, base: Path, namespace: str, table: str, write_mode: str
) -> None:
    log = ChangeLog()
    rows = flatten(log.insert(id=k, name=f"n{k}", amount=None) for k in range(1, 41))
    first = write_window(base, WindowSpec("dbo_orders", 0x100, log.lsn, rows))
    windows = []
    for keys, name in ((range(1, 26), "a"), (range(15, 41), "b")):  # keys 15-25 changed by both
        start = log.lsn + 1
        changes = flatten(log.update({"id": k, "name": f"n{k}", "amount": None}, name=name) for k in keys)
        windows.append(write_window(base, WindowSpec("dbo_orders", start, log.lsn, changes)))
    run(spark, namespace, first, write_mode=write_mode)

    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def merge(manifest: str) -> None:
        barrier.wait()
        try:
            run(spark, namespace, manifest, write_mode=write_mode)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=merge, args=(w,)) for w in windows]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # Keys 15-25: window b's change is the newer one, whichever merge committed last.
    expected = {k: (False, "a" if k < 15 else "b", None) for k in range(1, 41)}
    assert contents(spark, table) == expected
    summary = (
        spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").first().summary
    )
    assert summary["sqlserver-cdc.applied-lsn-ranges.dbo_orders"] == f"{lsn_hex(0x100)}-{lsn_hex(log.lsn)}"
    assert run(spark, namespace, *windows, write_mode=write_mode)[table]["applied"] == []


def test_each_committed_table_reports_its_snapshot_id(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    """The result carries the table's current snapshot id (the asset event's ``snapshot_id``, assets.py)."""
    w1, w2 = two_windows(base)
    first = run(spark, namespace, w1)
    current = spark.sql(
        f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()[0]
    assert first[table]["version"] == str(current)
    again = run(spark, namespace, w1)  # already applied: nothing committed, the same snapshot
    assert again[table]["applied"] == [] and again[table]["version"] == str(current)
    assert run(spark, namespace, w2)[table]["version"] != str(current)
