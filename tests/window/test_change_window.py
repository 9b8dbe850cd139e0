"""ChangeWindow: the XCom contract between extract/snapshot, merge and watermark, and the watermark key."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.change_window import (
    ChangeWindow,
    ChangeWindowError,
    SnapshotDetails,
    watermark_key,
    xcom_items,
)

FROM = "0x0000002A000001F00003"
TO = "0x0000002A000002000001"


def window(**changes: Any) -> ChangeWindow:
    values: dict[str, Any] = dict(
        capture_instance="dbo_orders",
        source={"server": "sql:1433", "database": "shop", "schema": "dbo", "table": "orders"},
        kind="changes",
        mode="interval",
        from_position=FROM,
        to_position=TO,
        window_uri=f"s3://lake/cdc/dbo_orders/{FROM}_{TO}",
        manifest_uri=f"s3://lake/cdc/dbo_orders/{FROM}_{TO}/_manifest.json",
        state_key=watermark_key("shop_sqlserver", "shop", "dbo_orders"),
        from_time="2026-03-02T04:30:00+00:00",
        to_time="2026-03-02T04:40:00+00:00",
        to_position_time="2026-03-02T04:39:12+00:00",
        row_count=6,
        operation_counts={"delete": 1, "insert": 3, "update_before": 1, "update_after": 1},
        file_count=1,
        byte_count=5678,
    )
    values.update(changes)
    return ChangeWindow(**values)


def snapshot_window() -> ChangeWindow:
    return window(
        kind="snapshot",
        mode="snapshot",
        from_position=Lsn.zero().hex,
        snapshot=SnapshotDetails(
            method="snapshot_isolation",
            read_positions=(TO,),
            consistent_after=TO,
            resumed_chunks=0,
            lock_held_ms=1.5,
        ),
    )


class LazySequence(Sequence):
    """Stands in for Airflow's lazy sequence of a mapped task's results (not a list, not a tuple)."""

    def __init__(self, items: list[Any]) -> None:
        self._items = items

    def __getitem__(self, index: Any) -> Any:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)


def test_watermark_key_is_conn_database_and_capture_instance() -> None:
    assert watermark_key("sim", "shop", "dbo_orders") == "sqlserver_cdc__sim__shop__dbo_orders"


def test_xcom_keeps_the_documented_keys_and_is_json_safe() -> None:
    value = window().to_xcom()
    assert json.loads(json.dumps(value)) == value
    assert list(value) == [
        "empty",
        "capture_instance",
        "source",
        "kind",
        "mode",
        "position_kind",
        "from_lsn",
        "to_lsn",
        "from_time",
        "to_time",
        "to_lsn_time",
        "window_uri",
        "manifest_uri",
        "row_count",
        "operation_counts",
        "file_count",
        "bytes",
        "state_key",
    ]
    assert value["position_kind"] == "lsn" and value["to_lsn"] == TO and value["bytes"] == 5678
    assert value["state_key"] == "sqlserver_cdc__shop_sqlserver__shop__dbo_orders"


@pytest.mark.parametrize("make", [window, snapshot_window], ids=["changes", "snapshot"])
def test_round_trips_through_json(make: Any) -> None:
    original = make()
    text = json.dumps(original.to_xcom())
    assert ChangeWindow.from_xcom(text) == [original]
    assert ChangeWindow.from_xcom(json.loads(text)) == [original]
    assert ChangeWindow.from_dict(json.loads(text)) == original


def test_snapshot_xcom_has_the_snapshot_facts() -> None:
    value = snapshot_window().to_xcom()
    assert value["kind"] == "snapshot" and value["snapshot_lsn"] == value["to_lsn"] == TO
    assert value["read_lsns"] == [TO] and value["consistent_after_lsn"] == TO
    assert (value["snapshot_method"], value["resumed_chunks"], value["lock_held_ms"]) == (
        "snapshot_isolation",
        0,
        1.5,
    )


def test_reads_lists_mapped_results_and_nestings() -> None:
    a = window()
    b = window(capture_instance="dbo_items", state_key="sqlserver_cdc__s__shop__dbo_items")
    snap = snapshot_window()
    assert ChangeWindow.from_xcom([a.to_xcom(), b.to_xcom()]) == [a, b]
    assert ChangeWindow.from_xcom(LazySequence([a.to_xcom(), b.to_xcom()])) == [a, b]
    # [snapshot.output, extract.output] of the pipeline: one side may be skipped (None) or empty.
    mixed = [LazySequence([snap.to_xcom()]), LazySequence([None, [a.to_xcom(), b.to_xcom()]])]
    assert ChangeWindow.from_xcom(mixed) == [snap, a, b]
    assert ChangeWindow.from_xcom([None, LazySequence([])]) == []
    assert ChangeWindow.from_xcom(json.dumps([a.to_xcom(), [b.to_xcom()]])) == [a, b]
    assert ChangeWindow.from_xcom(None) == []


def test_a_window_without_position_kind_is_refused() -> None:
    """Every writer states the position kind; a dict without it is not read as an LSN window."""
    value = window().to_xcom()
    del value["position_kind"]
    with pytest.raises(ChangeWindowError, match=r"Not a change window \(lacks position_kind\)"):
        ChangeWindow.from_xcom(value)
    value["position_kind"] = "offset"
    with pytest.raises(
        ChangeWindowError, match=r"position_kind must be one of \('lsn', 'version'\), got 'offset'"
    ):
        ChangeWindow.from_xcom(value)


def test_a_change_tracking_window_keeps_versions_as_text() -> None:
    versions = window(position_kind="version", from_position="1200", to_position="1350")
    value = versions.to_xcom()
    assert (value["from_version"], value["to_version"], value["to_version_time"]) == (
        "1200",
        "1350",
        "2026-03-02T04:39:12+00:00",
    )
    assert "to_lsn" not in value
    assert ChangeWindow.from_xcom(json.dumps(value)) == [versions]
    with pytest.raises(ChangeWindowError, match="range of versions, not of LSNs"):
        versions.to_lsn  # noqa: B018
    with pytest.raises(ChangeWindowError, match="to_version.*decimal digits"):
        window(position_kind="version", from_position="1200", to_position="0x1F")


def test_missing_keys_are_named() -> None:
    value = window().to_xcom()
    del value["state_key"], value["to_lsn"]
    with pytest.raises(ChangeWindowError, match=r"lacks state_key, to_lsn.*extract\.output"):
        ChangeWindow.from_xcom([value])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("s3://lake/cdc/dbo_orders/0x1_0x2", "is not a change window"),
        ("{'capture_instance': 'dbo_orders', 'empty': False}", r"does not parse.*\| tojson"),
        ('[{"capture_instance": "dbo_orders",', "does not parse"),
        (42, "Cannot read windows from a int"),
        (b'{"kind": "changes"}', "Cannot read windows from a bytes"),
        ({**window().to_xcom(), "to_lsn": "0x2A"}, r"to_lsn: Not an LSN: '0x2A'"),
        ({**window().to_xcom(), "kind": "full"}, "kind must be one of"),
        ({**window().to_xcom(), "position_kind": "scn"}, "position_kind must be one of"),
        ({**window().to_xcom(), "from_lsn": TO, "to_lsn": FROM}, "is above to_lsn"),
    ],
    ids=[
        "uri",
        "python-repr",
        "broken-json",
        "int",
        "bytes",
        "bad-lsn",
        "bad-kind",
        "bad-position-kind",
        "inverted",
    ],
)
def test_bad_input_says_what_is_wrong(value: Any, message: str) -> None:
    with pytest.raises(ChangeWindowError, match=message):
        ChangeWindow.from_xcom(value)


def test_errors_are_value_errors() -> None:
    assert issubclass(ChangeWindowError, ValueError)


def test_xcom_items_pass_plain_text_through() -> None:
    assert xcom_items(["  /w/a  ", "", None, {"manifest_uri": "/w/b"}, '"/w/c"']) == [
        "/w/a",
        {"manifest_uri": "/w/b"},
        "/w/c",
    ]
