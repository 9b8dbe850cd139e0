"""Reading windows: file URIs, the before-image filter on the update mask, Parquet rows as the target needs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from merge_runs import contents, run
from window_builder import INT_KEY, NAME, Row, WindowSpec, write_window

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.spark.merge import window_reader
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import (
    Window,
    before_image_needed,
    check_rows,
    load_window,
    read_window,
)
from airflow_provider_sqlserver_cdc.window.manifest import WindowManifest


def test_manifest_files_resolve_against_the_window_directory(tmp_path: Path) -> None:
    rows = [Row(0x2, 0x201, 2, {"id": 1, "name": "a"})]
    written = write_window(tmp_path, WindowSpec("dbo_orders", 1, 2, rows, columns=(INT_KEY, NAME)))
    uri = "s3a://b/w/dbo_orders/x/_manifest.json"
    window = Window(uri, WindowManifest.from_json(Path(written).read_text(), uri))
    assert [f.uri for f in window.files] == ["s3a://b/w/dbo_orders/x/part-00000.parquet"]
    assert window.label == f"dbo_orders {Lsn.from_int(1)}_{Lsn.from_int(2)}"


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
        ([3], "04", True),  # each bit of the last byte's low hex digit
        ([3], "FB", False),
        ([4], "08", True),
        ([4], "F7", False),
        ([5], "10", True),  # bits 4-7: the byte's high hex digit
        ([5], "EF", False),
        ([8], "80", True),
        ([8], "7F", False),
        ([16], "8000", True),
        ([16], "7FFF", False),
        ([1], None, True),  # no mask: kept
    ],
)
def test_before_image_filter_reads_the_update_mask_as_sql_server_lays_it_out(
    spark: Any, key_ordinals: list[int], mask: str | None, kept: bool
) -> None:
    from pyspark.sql import functions as F

    columns = tuple({"name": f"c{o}", "ordinal": o, "sql_type": "int"} for o in key_ordinals)
    manifest = WindowManifest(
        kind="changes", capture_instance="dbo_t", source={}, from_lsn=Lsn.zero().hex, to_lsn=Lsn.zero().hex,
        from_time=None, to_time=None, mode="interval", row_filter_option="all update old",
        key_columns=[c["name"] for c in columns], columns=list(columns),
    )  # fmt: skip
    window = Window("u", manifest)
    frame = spark.createDataFrame(
        [(3, None if mask is None else bytes.fromhex(mask)), (4, b"\x00"), (1, b"\x00")],
        "`__$operation` INT, `__$update_mask` BINARY",
    )
    condition = before_image_needed(window, F.col("`__$update_mask`"))
    assert [r[0] for r in frame.where(condition).collect()] == ([3, 4, 1] if kept else [4, 1])


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
    window = load_window(spark, manifest)
    read = read_window(spark, window, f"{namespace}.dbo_orders")
    positions = sorted((r.id, r._cdc_operation) for r in read.collect())
    assert positions == [(1, 2), (1, 4), (2, 2), (2, 3), (7, 4)]  # only id 1's before-image is gone

    # The check of the window reads its key bounds too: every row's key, the key change's old one included.
    checked = check_rows(spark, window, f"{namespace}.dbo_orders")
    assert checked.key_bounds == (1, 7)
    assert (
        sorted((r.id, r._cdc_operation) for r in checked.rows.collect()) == positions
    )  # as read_window reads
    with pytest.MonkeyPatch.context() as patch:  # footers without statistics: a Spark job reads the rows
        patch.setattr(window_reader, "footer_figures", lambda *args: None)
        assert check_rows(spark, window, f"{namespace}.dbo_orders").key_bounds == (1, 7)
    by_name = load_window(
        spark,
        write_window(
            base / "by_name", WindowSpec("dbo_orders", 0x100, 0x130, changes, key_columns=("name",))
        ),
    )
    assert check_rows(spark, by_name, f"{namespace}.dbo_orders").key_bounds is None  # not a whole number

    run(spark, namespace, manifest)
    assert contents(spark, f"{namespace}.dbo_orders") == {
        1: (False, "a2", None),
        2: (True, "b", None),  # the key change's before-image still deletes the old key
        7: (False, "b7", None),
    }
