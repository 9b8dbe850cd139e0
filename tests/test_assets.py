"""Asset URIs of targets and sources, the event extra of a merge, and its partition (assets.py)."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from airflow.sdk import Asset
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_provider_sqlserver_cdc.assets import (
    declared_target_tables,
    delta_query,
    emit_asset_events,
    event_extras,
    iceberg_asset_uri,
    mssql_asset_uri,
    partition_key,
    postgres_asset_uri,
    postgres_target_outlet,
    target_asset,
)
from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

SOURCE = {"server": "db.example:14330", "database": "shop", "schema": "dbo", "table": "orders"}
NAMING = {"namespace": "lake.cdc", "table_name_template": "{schema}_{table}", "targets": {}}


def window(
    ci: str = "dbo_orders", kind: str = "changes", first: int = 0x10, last: int = 0x20, **more
) -> ChangeWindow:
    return ChangeWindow(
        capture_instance=ci,
        source=SOURCE,
        kind=kind,
        mode="snapshot" if kind == "snapshot" else "interval",
        from_position=f"0x{first:020X}",
        to_position=f"0x{last:020X}",
        window_uri=f"/staging/{ci}/{first}_{last}",
        manifest_uri=f"/staging/{ci}/{first}_{last}/_manifest.json",
        state_key=f"sqlserver_cdc__sim__shop__{ci}",
        from_time="2026-03-02T10:00:00+00:00",
        to_time="2026-03-02T11:00:00+00:00",
        row_count=9,
        operation_counts={"insert": 3, "update_before": 2, "update_after": 2, "delete": 1},
        **more,
    )


def label(w: ChangeWindow) -> str:
    return f"{w.capture_instance} {w.from_position}_{w.to_position}"


def test_uris_follow_the_database_schemes():
    assert iceberg_asset_uri("lake.cdc.dbo_orders") == "iceberg://lake/cdc/dbo_orders"
    assert iceberg_asset_uri("lake.a.b.t") == "iceberg://lake/a/b/t"
    with pytest.raises(ValueError, match="catalog.namespace.table"):
        iceberg_asset_uri("public.dbo_orders")
    assert (
        mssql_asset_uri("db.example:14330", "shop", "dbo", "orders")
        == "mssql://db.example:14330/shop/dbo/orders"
    )
    assert mssql_asset_uri("db.example", "shop", "dbo", "orders") == "mssql://db.example:1433/shop/dbo/orders"
    asset = target_asset("lake.cdc.dbo_orders")
    assert (asset.name, asset.uri) == ("sqlserver_cdc.lake.cdc.dbo_orders", "iceberg://lake/cdc/dbo_orders")


def test_declared_tables_use_the_default_instance_names_and_the_overrides():
    tables = declared_target_tables(
        ["dbo_orders", "sales_order_lines", "odd"],
        namespace="lake.cdc",
        table_name_template="{table}",
        targets={"odd": "lake.other.odd_table"},
        database=None,
    )
    assert tables == ["lake.cdc.orders", "lake.cdc.order_lines", "lake.other.odd_table"]


def test_the_partition_is_the_interval_start_in_utc():
    start = dt.datetime(2026, 3, 2, 15, 30, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    assert partition_key(start) == "2026-03-02T10:00:00"
    assert partition_key(None) is None


def test_the_extra_says_what_the_run_applied():
    changes = window(healed_gap={"rows": 2})
    result = {"lake.cdc.dbo_orders": {"status": "committed", "applied": [label(changes)], "version": "123"}}
    (extra,) = event_extras([changes], result, **NAMING).values()
    assert extra["table"] == "lake.cdc.dbo_orders" and extra["capture_instances"] == ["dbo_orders"]
    assert extra["source"] == "mssql://db.example:14330/shop/dbo/orders"
    assert extra["lsn_ranges"] == [
        {
            "capture_instance": "dbo_orders",
            "kind": "changes",
            "from": "0x00000000000000000010",
            "to": "0x00000000000000000020",
            "position_kind": "lsn",
            "applied_now": True,
        }
    ]
    assert extra["commit_time_range"] == {
        "from": "2026-03-02T10:00:00+00:00",
        "to": "2026-03-02T11:00:00+00:00",
    }
    assert extra["rows"] == {"insert": 3, "update": 2, "delete": 1, "snapshot": 0}
    assert extra["snapshot_id"] == "123"
    assert (extra["snapshot"], extra["healed_gap"], extra["schema_switch"]) == (False, True, False)
    assert delta_query(extra) == (
        "SELECT * FROM lake.cdc.dbo_orders VERSION AS OF 123 WHERE _cdc_start_lsn BETWEEN "
        "X'00000000000000000010' AND X'00000000000000000020'"
    )


def test_a_snapshot_and_a_switch_of_capture_instance_are_flagged_failed_tables_get_no_extra():
    old, new = window("dbo_orders", first=0x10, last=0x20), window("dbo_orders_v2", first=0x21, last=0x30)
    snap = window("dbo_customers", kind="snapshot", first=0x30, last=0x30)
    snap = ChangeWindow(**{**snap.__dict__, "source": {**SOURCE, "table": "customers"}})
    result = {
        "lake.cdc.dbo_orders": {"status": "committed", "applied": [], "skipped": [label(old), label(new)]},
        "lake.cdc.dbo_customers": {"status": "failed", "applied": []},
    }
    extras = event_extras([old, new, snap], result, **NAMING)
    assert list(extras) == ["lake.cdc.dbo_orders"]
    extra = extras["lake.cdc.dbo_orders"]
    assert extra["schema_switch"] and not extra["snapshot"]
    assert [r["applied_now"] for r in extra["lsn_ranges"]] == [False, False]  # a re-run: already applied
    ok = {"lake.cdc.dbo_customers": {"status": "committed", "applied": [label(snap)], "version": "7"}}
    (snapshot_extra,) = event_extras([snap], ok, **NAMING).values()
    assert snapshot_extra["snapshot"] and snapshot_extra["rows"]["snapshot"] == 9
    assert "_cdc_start_lsn <= X'00000000000000000030'" in delta_query(snapshot_extra)


def test_events_go_to_the_declared_outlets_with_the_partition(caplog):
    orders, other = target_asset("lake.cdc.dbo_orders"), Asset("s3://bucket/x")
    events = OutletEventAccessors()
    extras = {"lake.cdc.dbo_orders": {"rows": {"insert": 1}}, "lake.cdc.undeclared": {"rows": {}}}
    with caplog.at_level(logging.WARNING):
        emitted = emit_asset_events(events, [orders, other], extras, partition="2026-03-02T10:00:00")
    assert emitted == ["lake.cdc.dbo_orders"]
    assert events[orders].extra == {"rows": {"insert": 1}, "partition_key": "2026-03-02T10:00:00"}
    if hasattr(events[orders], "add_partitions"):  # Airflow 3.3+: the event is partitioned
        assert events[orders].partition_keys == {"2026-03-02T10:00:00"}
    assert "lake.cdc.undeclared has no outlet asset" in caplog.text


def test_postgresql_targets_follow_the_postgres_providers_uri_static_when_the_url_is_set():
    assert postgres_asset_uri("jdbc:postgresql://pg.example:6543/warehouse?ssl=true", "cdc.dbo_orders") == (
        "postgres://pg.example:6543/warehouse/cdc/dbo_orders"
    )
    assert postgres_asset_uri("jdbc:postgresql://pg/warehouse", "cdc.dbo_orders").startswith(
        "postgres://pg:5432/"
    )
    static = postgres_target_outlet("cdc.dbo_orders", "jdbc:postgresql://pg:5432/warehouse")
    assert isinstance(static, Asset) and static.name == "sqlserver_cdc.cdc.dbo_orders"
    with pytest.raises(ValueError, match="names host and database"):
        postgres_asset_uri("jdbc:postgresql://pg:5432/", "cdc.dbo_orders")


def test_a_postgresql_alias_outlet_gets_the_asset_of_the_url_resolved_at_run_time():
    """A target named by its connection only: the alias declared at parse time, the asset added by the run."""
    from airflow.sdk import AssetAlias

    alias = postgres_target_outlet("cdc.dbo_orders", None)
    assert isinstance(alias, AssetAlias) and alias.name == "sqlserver_cdc.cdc.dbo_orders"
    events = OutletEventAccessors()
    extras = {"cdc.dbo_orders": {"rows": {"insert": 1}, "transaction": {"xid": "812"}}}
    emitted = emit_asset_events(
        events, [alias], extras, partition="2026-03-02T10:00:00", jdbc_url="jdbc:postgresql://10.0.0.5/wh"
    )
    assert emitted == ["cdc.dbo_orders"]
    (added,) = events[alias].asset_alias_events
    assert added.dest_asset_key.uri == "postgres://10.0.0.5:5432/wh/cdc/dbo_orders"
    assert added.extra == {**extras["cdc.dbo_orders"], "partition_key": "2026-03-02T10:00:00"}
