"""History (SCD type 2) and change-log targets against a local Iceberg catalog (docs/history-targets.md).

The expected history is computed in plain Python from the source's change rows (``expected_history``),
so the test states the rule independently of the Spark code.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from merge_runs import merge_fails, run
from window_builder import EPOCH, NAME, ChangeLog, Column, Row, WindowSpec, flatten, lsn_hex, write_window

from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError

pytestmark = pytest.mark.spark
D = decimal.Decimal
HISTORY = {"table_modes": {"dbo_orders": "history"}}


def commit_time(row: Row) -> str:
    """The commit time the window builder gives a row, as Spark prints a UTC timestamp."""
    value = (row.commit_time or EPOCH + dt.timedelta(seconds=row.start_lsn % 3600)).astimezone(dt.UTC)
    fraction = f".{value.microsecond:06d}".rstrip("0") if value.microsecond else ""
    return value.strftime("%Y-%m-%d %H:%M:%S") + fraction


def expected_history(rows: list[Row]) -> dict[tuple, tuple]:
    """(id, lsn, seqval, operation) -> (name, amount, deleted, valid_from, valid_to, is_current).

    Every change of a key is a version ordered by (lsn, seqval, operation), closed by the key's next
    change; a before-image is left out when the same change has an after-image of the same key.
    """
    by_key: dict[Any, list[Row]] = defaultdict(list)
    for row in rows:
        by_key[row.values["id"]].append(row)
    history = {}
    for key, changes in by_key.items():
        after = {(r.start_lsn, r.seqval) for r in changes if r.operation == 4}
        kept = sorted(
            {(r.start_lsn, r.seqval, r.operation): r for r in changes}.values(),
            key=lambda r: (r.start_lsn, r.seqval, r.operation),
        )
        kept = [r for r in kept if not (r.operation == 3 and (r.start_lsn, r.seqval) in after)]
        for index, row in enumerate(kept):
            following = kept[index + 1] if index + 1 < len(kept) else None
            deleted = row.operation in (1, 3)
            history[(key, row.start_lsn, row.seqval, row.operation)] = (
                row.values["name"],
                row.values["amount"],
                deleted,
                commit_time(row),
                commit_time(following) if following else None,
                following is None and not deleted,
            )
    return history


def history_of(spark: Any, table: str) -> dict[tuple, tuple]:
    frame = spark.sql(
        f"SELECT id, conv(hex(_cdc_start_lsn), 16, 10) AS lsn, conv(hex(_cdc_seqval), 16, 10) AS seqval, "
        f"_cdc_operation AS op, name, amount, _cdc_deleted, CAST(_valid_from AS STRING) AS valid_from, "
        f"CAST(_valid_to AS STRING) AS valid_to, _is_current FROM {table}"
    )
    rows = frame.collect()
    got = {
        (r.id, int(r.lsn), int(r.seqval), r.op): (
            r["name"],
            r.amount,
            r._cdc_deleted,
            r.valid_from,
            r.valid_to,
            r._is_current,
        )
        for r in rows
    }
    assert len(got) == len(rows), "a version appears twice"
    return got


def change_stream() -> tuple[list[Row], list[Row], list[Row]]:
    """Three windows' rows: inserts, updates (one keeping its key's bit out of the mask), deletes,
    a re-insert, a primary-key change and a key changed twice in one window."""
    log = ChangeLog()
    first = flatten(
        [
            log.transaction(*[(2, {"id": i, "name": f"n{i}", "amount": D(f"{i}.00")}) for i in range(1, 7)]),
            log.update({"id": 1, "name": "n1", "amount": D("1.00")}, name="n1b"),
            log.delete(id=2, name="n2", amount=D("2.00")),
        ]
    )
    second = flatten(
        [
            log.insert(id=2, name="n2 again", amount=None),  # re-insert of a deleted key
            # an update whose mask has only the name's bit: the reader drops its before-image
            [
                dataclasses.replace(r, update_mask=b"\x02")
                for r in log.update({"id": 3, "name": "n3", "amount": D("3.00")}, name="n3b")
            ],
            log.update({"id": 4, "name": "n4", "amount": D("4.00")}, id=40),  # the key changes: 4 closes
            log.update({"id": 1, "name": "n1b", "amount": D("1.00")}, amount=D("1.50")),
            log.update({"id": 1, "name": "n1b", "amount": D("1.50")}, name="n1c"),
        ]
    )
    third = flatten(
        [
            log.delete(id=5, name="n5", amount=D("5.00")),
            log.update({"id": 40, "name": "n4", "amount": D("4.00")}, name="n40"),
            log.insert(id=7, name="n7", amount=D("7.00")),
            log.delete(id=1, name="n1c", amount=D("1.50")),
        ]
    )
    return first, second, third


def windows_of(base: Path, *parts: list[Row]) -> list[str]:
    manifests = []
    for rows in parts:
        first, last = min(r.start_lsn for r in rows), max(r.start_lsn for r in rows)
        manifests.append(write_window(base, WindowSpec("dbo_orders", first, last, rows)))
    return manifests


def test_history_equals_a_replay_of_the_change_log_in_any_order_and_after_replays(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    first, second, third = change_stream()
    w1, w2, w3 = windows_of(base, first, second, third)
    expected = expected_history(first + second + third)

    run(spark, namespace, w3, **HISTORY)  # the newest window first: w1 and w2 come as backfills
    run(spark, namespace, w1, **HISTORY)
    assert history_of(spark, table) == expected_history(first + third)
    run(spark, namespace, w2, **HISTORY)
    assert history_of(spark, table) == expected
    # A replay of every window is skipped; a window that overlaps what the table holds adds nothing twice.
    result = run(spark, namespace, w2, w1, w3, **HISTORY)
    assert result[table]["applied"] == [] and len(result[table]["skipped"]) == 3
    overlap = write_window(
        base, WindowSpec("dbo_orders", 0x10, max(r.start_lsn for r in third), first + second + third)
    )
    run(spark, namespace, overlap, **HISTORY)
    assert history_of(spark, table) == expected

    # Merged in order, in one run, the history is the same; the current-state table beside it holds
    # exactly the current versions.
    in_order = f"{namespace}.orders_in_order"
    current = f"{namespace}.orders_current"
    run(spark, namespace, w1, w2, w3, targets={"dbo_orders": in_order}, **HISTORY)
    assert history_of(spark, in_order) == expected
    run(spark, namespace, w1, w2, w3, targets={"dbo_orders": current})
    live = {
        r.id: (r["name"], r.amount)
        for r in spark.sql(f"SELECT * FROM {current} WHERE NOT _cdc_deleted").collect()
    }
    versions = {
        r.id: (r["name"], r.amount) for r in spark.sql(f"SELECT * FROM {table} WHERE _is_current").collect()
    }
    assert (
        versions
        == live
        == {
            2: ("n2 again", None),
            3: ("n3b", D("3.00")),
            6: ("n6", D("6.00")),
            7: ("n7", D("7.00")),
            40: ("n40", D("4.00")),
        }
    )

    properties = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert properties["sqlserver-cdc.table-mode"] == "history"
    identifier = set(properties["identifier-fields"].strip("[]").split(","))
    assert identifier == {"id", "_cdc_start_lsn", "_cdc_seqval", "_cdc_operation"}
    # A history table is not merged as a current-state table (one row per key would be overwritten).
    log = ChangeLog(start=0x9000)
    later = write_window(
        base, WindowSpec("dbo_orders", 0x9000, 0x9100, log.insert(id=8, name="x", amount=None))
    )
    with merge_fails(table, MergeJobError, "holds a history table"):
        run(spark, namespace, later)


def test_a_snapshot_opens_versions_and_closes_the_keys_it_lacks(
    spark: Any, base: Path, namespace: str, table: str
) -> None:
    first, _, _ = change_stream()
    (w1,) = windows_of(base, first)
    run(spark, namespace, w1, **HISTORY)
    snapshot_lsn = 0x5000
    rows = [Row(snapshot_lsn, snapshot_lsn, 2, {"id": i, "name": f"s{i}", "amount": None}) for i in (3, 9)]
    snap = write_window(base, WindowSpec("dbo_orders", snapshot_lsn, snapshot_lsn, rows, kind="snapshot"))
    run(spark, namespace, snap, **HISTORY)
    current = {r.id: r["name"] for r in spark.sql(f"SELECT * FROM {table} WHERE _is_current").collect()}
    assert current == {3: "s3", 9: "s9"}
    # Keys 1, 4, 5 and 6 were live and are absent from the snapshot: a tombstone at its LSN closes each.
    tombstones = spark.sql(
        f"SELECT id FROM {table} WHERE _cdc_deleted AND _cdc_start_lsn = X'{lsn_hex(snapshot_lsn)[2:]}'"
    ).collect()
    assert sorted(r.id for r in tombstones) == [1, 4, 5, 6]
    open_versions = spark.sql(
        f"SELECT count(*) AS n FROM {table} WHERE _valid_to IS NULL AND NOT _cdc_deleted"
    ).first()
    assert open_versions.n == 2


KEYLESS_COLUMNS = (Column("x", "int", pa.int32(), max_length=4, precision=10), NAME)


def keyless_window(base: Path, rows: list[Row], first: int | None = None, last: int | None = None) -> str:
    first = min(r.start_lsn for r in rows) if first is None else first
    last = max(r.start_lsn for r in rows) if last is None else last
    spec = WindowSpec("dbo_heap", first, last, rows, columns=KEYLESS_COLUMNS, key_columns=())
    return write_window(base, spec)


def log_rows(spark: Any, table: str) -> Counter:
    frame = spark.sql(
        f"SELECT conv(hex(_cdc_start_lsn), 16, 10) AS lsn, conv(hex(_cdc_seqval), 16, 10) AS seqval, "
        f"_cdc_operation AS op, x, name FROM {table}"
    )
    return Counter((int(r.lsn), int(r.seqval), r.op, r.x, r["name"]) for r in frame.collect())


def expected_log(rows: list[Row]) -> Counter:
    return Counter(
        (r.start_lsn, r.seqval, r.operation, r.values.get("x"), r.values.get("name")) for r in rows
    )


def test_keyless_table_is_a_change_log_each_row_once_after_replays(
    spark: Any, base: Path, namespace: str
) -> None:
    log = ChangeLog()
    first = flatten(
        [
            log.transaction((2, {"x": 1, "name": "a"}), (2, {"x": 1, "name": "a"})),  # the same row twice
            log.update({"x": 1, "name": "a"}, name="b"),  # both images are kept
        ]
    )
    second = flatten([log.delete(x=1, name="a"), log.insert(x=None, name="c")])
    third = flatten([log.insert(x=2, name="d")])
    w1, w2 = keyless_window(base, first), keyless_window(base, second)
    table = f"{namespace}.dbo_heap"
    run(spark, namespace, w2)  # chosen automatically: the windows have no key columns
    run(spark, namespace, w1)
    assert log_rows(spark, table) == expected_log(first + second)
    result = run(spark, namespace, w1, w2)
    assert result[table]["applied"] == []
    # A window overlapping what the table holds appends only the rows outside its applied ranges.
    overlap = keyless_window(base, first + second + third)
    run(spark, namespace, overlap)
    assert log_rows(spark, table) == expected_log(first + second + third)
    columns = [f.name for f in spark.table(table).schema.fields]
    assert columns == ["x", "name", "_cdc_start_lsn", "_cdc_seqval", "_cdc_operation", "_cdc_commit_time"]
    properties = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert properties["sqlserver-cdc.table-mode"] == "changelog"
    assert "identifier-fields" not in properties

    # Two windows of one run that overlap each other: still each row once.
    other = f"{namespace}.heap_again"
    both = keyless_window(base, first + second, first=0x10)
    run(spark, namespace, w1, both, targets={"dbo_heap": other})
    assert log_rows(spark, other) == expected_log(first + second)
    summary = (
        spark.sql(f"SELECT summary FROM {other}.snapshots ORDER BY committed_at DESC LIMIT 1").first().summary
    )
    manifest = json.loads(Path(both).read_text())
    assert (
        summary["sqlserver-cdc.applied-lsn-ranges.dbo_heap"] == f"{manifest['from_lsn']}-{manifest['to_lsn']}"
    )


def test_keyless_window_is_refused_for_a_keyed_table_mode(spark: Any, base: Path, namespace: str) -> None:
    log = ChangeLog()
    window = keyless_window(base, log.insert(x=1, name="a"))
    with merge_fails(
        f"{namespace}.dbo_heap", MergeJobError, "has no key columns .* cannot be merged as history"
    ):
        run(spark, namespace, window, table_modes={"dbo_heap": "history"})
