"""The MERGE-or-rewrite rule on a target's file statistics (no Spark: the numbers are given)."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import TargetFiles, choose_strategy

#: 5M rows in 40 files, every file within the window's key range (uniformly spread keys).
WHOLE_RANGE = TargetFiles(files=40, rows=5_000_000, touched_files=40, touched_rows=5_000_000)


@pytest.mark.parametrize(
    ("files", "change_rows", "write_mode", "rewrite"),
    [
        # 1M changes with before-images: a merge-on-read MERGE still wins (it writes the changed rows only),
        (WHOLE_RANGE, 1_700_000, "merge-on-read", False),
        (WHOLE_RANGE, 6_000_000, "merge-on-read", True),  # unless the window outnumbers the table,
        (WHOLE_RANGE, 1_700_000, "copy-on-write", True),  # a copy-on-write one rewrites every file it touches
        (WHOLE_RANGE, 17_000, "copy-on-write", False),  # a 10k window: the MERGE touches a few files
        # Recent keys: the key range keeps a fifth of the rows from the MERGE's scan.
        (TargetFiles(40, 5_000_000, 8, 1_000_000), 1_700_000, "copy-on-write", False),
        (TargetFiles(0, 0, 0, 0), 100, "merge-on-read", False),  # an empty table: nothing to rewrite
        (TargetFiles(2, 50_000, 2, 50_000), 170_000, "merge-on-read", False),  # small: both are quick
    ],
)
def test_auto_rewrites_when_the_window_is_heavy_and_spans_most_rows(
    files: TargetFiles, change_rows: int, write_mode: str, rewrite: bool
) -> None:
    choice = choose_strategy("auto", files, change_rows, write_mode)
    assert choice.rewrite is rewrite
    assert f"{change_rows} change rows" in choice.reason


def test_a_setting_forces_either_and_still_logs_the_numbers() -> None:
    assert choose_strategy("merge", WHOLE_RANGE, 1_700_000, "merge-on-read").rewrite is False
    forced = choose_strategy("rewrite", WHOLE_RANGE, 10, "merge-on-read")
    assert forced.rewrite is True
    assert forced.reason.startswith("--merge-strategy rewrite; 10 change rows = 0.0% of 5000000 target rows")
    assert "overlaps 40 of 40 data files, 100% of the rows" in forced.reason
