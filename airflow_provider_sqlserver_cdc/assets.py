"""
Airflow assets of the replication: one per target table, an event per merge with what the run applied.

URI schemes (docs/assets.md):

- target (Iceberg): ``iceberg://<catalog>/<namespace>/<table>`` for the table ``catalog.namespace.table``
  (a multi-level namespace is several path segments), asset name ``sqlserver_cdc.<catalog.namespace.table>``.
  No Airflow provider defines an ``iceberg`` scheme yet; this follows the database schemes'
  ``scheme://authority/container/.../table`` form (``postgres://host:port/db/schema/table``).
- target (PostgreSQL, ``merge.target.kind: postgres``): ``postgres://<host>:<port>/<database>/<schema>/<table>``,
  the scheme of the ``apache-airflow-providers-postgres`` provider, asset name ``sqlserver_cdc.<schema.table>``.
  With ``merge.target.url`` the host is known when the DAG is parsed: the outlet is that asset. With
  ``merge.target.conn_id`` it is known only at run time (the factory reads no connection at parse
  time): the outlet is an ``AssetAlias`` named ``sqlserver_cdc.<schema.table>``, and each run adds
  the ``postgres://`` asset its connection resolves to, with the same extra (Airflow gives alias
  events no partition key: the extra's ``partition_key`` says it). The extra's ``transaction``
  carries the PostgreSQL transaction that committed the table's windows: ``xid`` (the bookkeeping
  row's ``xmin``; the rows that transaction wrote have ``xmin = xid``) instead of a snapshot id.
- source: ``mssql://<host>:<port>/<database>/<schema>/<table>``, the scheme the
  ``apache-airflow-providers-microsoft-mssql`` provider defines (carried in the event's ``source``,
  and reported at run time to Airflow's hook-lineage collector as the task's input: ``lineage_inputs.py``).

Each successful merge emits one event per target table it merged, whose extra says what the run
applied: capture instance(s), the LSN range of each window, the commit-time range, rows by
operation, the Iceberg snapshot id after the merge, and whether it was a snapshot, a healed gap or
a switch of capture instance. On Airflow versions whose outlet events take partition keys (3.3:
``outlet_events[asset].add_partitions``) the event is partitioned by the run's data interval, the
key being its start in UTC as ``%Y-%m-%dT%H:%M:%S`` (the format of Airflow's
``CronPartitionTimetable`` and temporal partition mappers); a DAG scheduled with
``PartitionedAssetTimetable`` then runs once per interval. Elsewhere the event is plain, with the
same extra.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from airflow.sdk import Asset, AssetAlias

    from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

ICEBERG_SCHEME = "iceberg"
MSSQL_SCHEME = "mssql"
MSSQL_DEFAULT_PORT = 1433
POSTGRES_SCHEME = "postgres"
POSTGRES_DEFAULT_PORT = 5432
ASSET_NAME_PREFIX = "sqlserver_cdc."
ASSET_GROUP = "sqlserver_cdc"
PARTITION_KEY_FORMAT = "%Y-%m-%dT%H:%M:%S"

LOG = logging.getLogger(__name__)


def iceberg_asset_uri(table: str) -> str:
    """``iceberg://catalog/namespace/table`` of a dotted ``catalog.namespace.table`` name."""
    parts = [p for p in table.split(".") if p]
    if len(parts) < 3:
        raise ValueError(f"an Iceberg target is catalog.namespace.table, got {table!r}")
    return f"{ICEBERG_SCHEME}://{parts[0]}/{'/'.join(parts[1:])}"


def mssql_asset_uri(server: str, database: str, schema: str, table: str) -> str:
    """``mssql://host:port/database/schema/table`` (the microsoft-mssql provider's scheme)."""
    host, _, port = server.rpartition(":") if ":" in server else (server, "", "")
    return f"{MSSQL_SCHEME}://{host}:{port or MSSQL_DEFAULT_PORT}/{database}/{schema}/{table}"


def target_asset(table: str) -> Asset:
    """The asset of an Iceberg target table (name ``sqlserver_cdc.<table>``)."""
    from airflow.sdk import Asset

    return Asset(name=ASSET_NAME_PREFIX + table, uri=iceberg_asset_uri(table), group=ASSET_GROUP)


def postgres_location(jdbc_url: str) -> tuple[str, int, str]:
    """(host, port, database) of a ``jdbc:postgresql://host[:port]/database[?...]`` URL."""
    parts = urlsplit(jdbc_url.removeprefix("jdbc:"))
    database = parts.path.strip("/")
    if not parts.hostname or not database:
        raise ValueError(f"a PostgreSQL JDBC URL names host and database, got {jdbc_url.split('?')[0]!r}")
    return parts.hostname, parts.port or POSTGRES_DEFAULT_PORT, database


def postgres_asset_uri(jdbc_url: str, table: str) -> str:
    """``postgres://host:port/database/schema/table`` of a ``schema.table`` target behind a JDBC URL."""
    host, port, database = postgres_location(jdbc_url)
    schema, _, name = table.rpartition(".")
    return f"{POSTGRES_SCHEME}://{host}:{port}/{database}/{schema or 'public'}/{name}"


def postgres_target_outlet(table: str, jdbc_url: str | None) -> Asset | AssetAlias:
    """The outlet of a PostgreSQL target: its asset when the URL is known at parse time, else an alias."""
    from airflow.sdk import Asset, AssetAlias

    if jdbc_url:
        return Asset(
            name=ASSET_NAME_PREFIX + table, uri=postgres_asset_uri(jdbc_url, table), group=ASSET_GROUP
        )
    return AssetAlias(name=ASSET_NAME_PREFIX + table, group=ASSET_GROUP)


def target_table(
    capture_instance: str,
    source: Mapping[str, str],
    *,
    namespace: str | None,
    table_name_template: str,
    targets: Mapping[str, str],
) -> str | None:
    """
    The target table of a capture instance, as the merge job names it (``MergeJobSettings.target_for``); None if unknown.

    :param capture_instance: the capture instance.
    :param source: its ``schema``, ``table``, ``database`` (what is known of them).
    :param namespace: ``catalog.namespace`` of the targets.
    :param table_name_template: the merge's table name template.
    :param targets: capture instance -> table overrides.
    """
    if capture_instance in targets:
        return targets[capture_instance]
    if not namespace:
        return None
    values = {
        "capture_instance": capture_instance,
        **{k: source.get(k, "") for k in ("schema", "table", "database")},
    }
    try:
        name = table_name_template.format(**values)
    except (KeyError, IndexError):
        return None
    if not name.strip("_") or "." in name:
        return None
    return f"{namespace}.{name}"


def declared_target_tables(
    capture_instances: Iterable[str],
    *,
    namespace: str | None,
    table_name_template: str,
    targets: Mapping[str, str],
    database: str | None,
) -> list[str]:
    """
    The target tables to declare as outlets when the DAG is parsed, before any source is read.

    A capture instance's source table is taken from SQL Server's default instance name
    ``<schema>_<table>`` (split at the first ``_``); with the default template ``{schema}_{table}``
    the split does not matter. Name other instances' targets in ``merge.tables``.
    """
    tables: list[str] = []
    for name in capture_instances:
        schema, _, table = name.partition("_")
        source = {"schema": schema, "table": table, "database": database or ""}
        found = target_table(
            name, source, namespace=namespace, table_name_template=table_name_template, targets=targets
        )
        if found and found not in tables:
            tables.append(found)
    return tables


def partition_key(data_interval_start: dt.datetime | None) -> str | None:
    """The partition key of a run: its data interval's start in UTC (None without one)."""
    if data_interval_start is None:
        return None
    return data_interval_start.astimezone(dt.UTC).strftime(PARTITION_KEY_FORMAT)


def event_extras(
    windows: Sequence[ChangeWindow],
    result: Mapping[str, Mapping[str, Any]],
    *,
    namespace: str | None,
    table_name_template: str,
    targets: Mapping[str, str],
) -> dict[str, dict[str, Any]]:
    """
    Target table -> its asset event's extra, for the tables the merge committed.

    :param windows: the windows the merge was given (the extract and snapshot XComs).
    :param result: the merge job's per-table result (``status``, ``applied``, ``skipped``, ``version``).
    :param namespace: ``catalog.namespace`` of the targets.
    :param table_name_template: the merge's table name template.
    :param targets: capture instance -> table overrides.
    """
    by_table: dict[str, list[ChangeWindow]] = {}
    for window in windows:
        table = target_table(
            window.capture_instance,
            window.source,
            namespace=namespace,
            table_name_template=table_name_template,
            targets=targets,
        )
        if table is not None:
            by_table.setdefault(table, []).append(window)
    extras = {}
    for table, entry in result.items():
        if entry.get("status") != "committed" or table not in by_table:
            continue
        extras[table] = {"table": table, **_extra(by_table[table], entry)}
    return extras


def _extra(windows: list[ChangeWindow], entry: Mapping[str, Any]) -> dict[str, Any]:
    windows = sorted(windows, key=lambda w: (w.capture_instance, w.from_position))
    applied = set(entry.get("applied") or [])
    rows = {"insert": 0, "update": 0, "delete": 0, "snapshot": 0}
    for w in windows:
        if w.kind == "snapshot":
            rows["snapshot"] += w.row_count
        else:
            counts = w.operation_counts
            rows["insert"] += int(counts.get("insert", 0))
            rows["update"] += int(counts.get("update_after", 0))
            rows["delete"] += int(counts.get("delete", 0))
    times = [t for w in windows for t in (w.from_time, w.to_time) if t]
    first = windows[0]
    source = first.source
    return {
        "capture_instances": sorted({w.capture_instance for w in windows}),
        "source": mssql_asset_uri(
            source.get("server", ""),
            source.get("database", ""),
            source.get("schema", ""),
            source.get("table", ""),
        )
        if source.get("server")
        else None,
        "lsn_ranges": [
            {
                "capture_instance": w.capture_instance,
                "kind": w.kind,
                "from": w.from_position,
                "to": w.to_position,
                "position_kind": w.position_kind,
                "applied_now": _label(w) in applied,
            }
            for w in windows
        ],
        "commit_time_range": {"from": min(times), "to": max(times)} if times else None,
        "rows": rows,
        "snapshot_id": entry.get("version"),
        "snapshot": any(w.kind == "snapshot" for w in windows),
        "healed_gap": any(w.healed_gap for w in windows),
        "schema_switch": len({w.capture_instance for w in windows}) > 1,
    }


def _label(window: ChangeWindow) -> str:
    """The merge job's label of a window (``Manifest.label``)."""
    return f"{window.capture_instance} {window.from_position}_{window.to_position}"


def emit_asset_events(
    outlet_events: Any,
    outlets: Iterable[Any],
    extras: Mapping[str, Mapping[str, Any]],
    *,
    partition: str | None,
    log: logging.Logger = LOG,
    jdbc_url: str | None = None,
) -> list[str]:
    """
    Fill the task's outlet events of the merged tables; return the tables given an event.

    A table's outlet is the asset or alias named ``sqlserver_cdc.<table>`` (or, for Iceberg, the asset
    of its ``iceberg://`` URI). An alias (a PostgreSQL target whose host is known at run time only)
    gets the table's ``postgres://`` asset of ``jdbc_url``.

    :param outlet_events: the task context's ``outlet_events``.
    :param outlets: the task's outlets.
    :param extras: target table -> extra (:func:`event_extras`).
    :param partition: the run's partition key, when the run has a data interval.
    :param log: where tables without a declared outlet are reported.
    :param jdbc_url: the PostgreSQL target's URL as resolved at run time (aliases only).
    """
    from airflow.sdk import Asset, AssetAlias

    declared = [o for o in outlets if isinstance(o, (Asset, AssetAlias))]
    by_name = {o.name: o for o in declared}
    by_uri = {o.uri: o for o in declared if isinstance(o, Asset)}
    emitted = []
    for table, extra in extras.items():
        name = ASSET_NAME_PREFIX + table
        outlet = by_name.get(name) or by_uri.get(_iceberg_uri_or_none(table) or "")
        extra = {**extra, "partition_key": partition}
        if isinstance(outlet, Asset):
            event = outlet_events[outlet]
            event.extra.update(extra)
            if partition is not None and hasattr(event, "add_partitions"):
                event.add_partitions(partition)
        elif isinstance(outlet, AssetAlias) and jdbc_url:
            asset = Asset(name=name, uri=postgres_asset_uri(jdbc_url, table), group=ASSET_GROUP)
            outlet_events[outlet].add(asset, extra=extra)  # Airflow: alias events take no partition key
        else:
            log.warning(
                "target table %s has no outlet asset (named %s): no asset event for it. Name its target in "
                "merge.tables (its capture instance is not named <schema>_<table>) or add the asset to the "
                "task's outlets",
                table,
                name,
            )
            continue
        emitted.append(table)
    return emitted


def _iceberg_uri_or_none(table: str) -> str | None:
    try:
        return iceberg_asset_uri(table)
    except ValueError:  # schema.table: a PostgreSQL target
        return None


def delta_query(extra: Mapping[str, Any]) -> str | None:
    """
    Spark SQL reading the rows an event's windows changed last, as of its snapshot; None without LSN ranges.

    Rows whose last change lies in one of the event's LSN ranges, from the table as of the event's
    snapshot (a later change to a row moves its ``_cdc_start_lsn`` past the range). A snapshot
    window (the initial copy) covers every row up to its LSN.

    :param extra: the asset event's extra (:func:`event_extras`), with ``table``.
    """
    ranges = [r for r in extra.get("lsn_ranges") or [] if r.get("position_kind", "lsn") == "lsn"]
    if not ranges or not extra.get("table"):
        return None
    version = f" VERSION AS OF {int(extra['snapshot_id'])}" if extra.get("snapshot_id") else ""
    conditions = " OR ".join(
        f"_cdc_start_lsn <= X'{r['to'][2:]}'"
        if r["kind"] == "snapshot"
        else f"_cdc_start_lsn BETWEEN X'{r['from'][2:]}' AND X'{r['to'][2:]}'"
        for r in ranges
    )
    return f"SELECT * FROM {extra['table']}{version} WHERE {conditions}"
