"""Column-list hashing of Change Tracking tables: what changed, in words."""

from __future__ import annotations

import json

from airflow_provider_sqlserver_cdc.extraction.column_changes import column_hash, describe_column_changes


def _column(name: str, sql_type: str = "int", max_length: int = 4, nullable: bool = True) -> dict:
    return {
        "name": name,
        "sql_type": sql_type,
        "max_length": max_length,
        "precision": 10,
        "scale": 0,
        "nullable": nullable,
        "ordinal": 1,
        "arrow_type": "int32",
    }


def test_the_hash_ignores_what_is_not_the_tables_shape_and_sees_what_is():
    base = [_column("id", nullable=False), _column("name", "nvarchar", 40)]
    moved = [{**c, "ordinal": 9, "arrow_type": "x"} for c in base]
    assert column_hash(base) == column_hash(moved) and describe_column_changes(base, moved) == []
    widened = [base[0], _column("name", "nvarchar", 200)]
    assert column_hash(widened) != column_hash(base)
    assert describe_column_changes(base, widened)[0].startswith("changed name from ['nvarchar', 40")
    assert describe_column_changes(base, [*base, _column("note", "nvarchar", 40)]) == ["added note nvarchar"]
    assert describe_column_changes(base, base[:1]) == ["dropped name"]
    assert describe_column_changes(base, base[::-1]) == ["column order changed"]


def test_the_column_history_gives_the_list_as_of_a_version_and_grows_only_on_a_change(tmp_path):
    import pyarrow.fs as pafs

    from airflow_provider_sqlserver_cdc.extraction.column_changes import (
        HISTORY_NAME,
        columns_before,
        record_columns,
    )
    from airflow_provider_sqlserver_cdc.lsn import Lsn

    fs, table_dir = pafs.LocalFileSystem(), str(tmp_path)
    before = [_column("id", nullable=False)]
    after = [*before, _column("note", "nvarchar", 40)]
    assert columns_before(fs, table_dir, Lsn.from_int(9)) is None  # nothing known yet
    record_columns(fs, table_dir, Lsn.from_int(3), before, None)  # the snapshot at version 3
    record_columns(fs, table_dir, Lsn.from_int(5), before, before)  # same list: not recorded
    record_columns(fs, table_dir, Lsn.from_int(8), after, before)  # a window with a column added
    record_columns(fs, table_dir, Lsn.from_int(9), after, after)
    entries = json.loads((tmp_path / HISTORY_NAME).read_text())["entries"]
    assert [e["through"] for e in entries] == [Lsn.from_int(3).hex, Lsn.from_int(8).hex]
    assert columns_before(fs, table_dir, Lsn.from_int(2)) is None
    assert columns_before(fs, table_dir, Lsn.from_int(7)) == before  # a window after version 7 re-reads
    assert columns_before(fs, table_dir, Lsn.from_int(8)) == after
