"""
OpenLineage of the provider's tasks: what ``get_openlineage_facets_on_complete`` of extract, snapshot and merge return.

Imported only from those methods, which ``apache-airflow-providers-openlineage`` alone calls: the
provider itself never needs the OpenLineage packages.

Datasets (OpenLineage naming):

- a source table: namespace ``mssql://<host>:<port>``, name ``<database>.<schema>.<table>`` (as the
  ``microsoft-mssql`` provider converts its ``mssql://`` assets), with a schema facet of the
  captured columns (SQL Server types, from the window's manifest);
- a window on staging: namespace ``file`` (or ``<scheme>://<bucket>``), name its directory path;
- an Iceberg target: namespace ``iceberg://<catalog>``, name ``<namespace>.<table>`` (assets.py's URI).

Run facet ``sqlserverCdc`` (:class:`SqlServerCdcRunFacet`): each window's capture instance, kind,
LSN range and commit-time range, rows by operation, and for the merge the Iceberg snapshot id of
each table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.providers.common.compat.openlineage.facet import (
    Dataset,
    RunFacet,
    SchemaDatasetFacet,
    SchemaDatasetFacetFields,
)
from airflow.providers.openlineage.extractors import OperatorLineage
from attrs import define

from airflow_provider_sqlserver_cdc.assets import MSSQL_DEFAULT_PORT

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.window.change_window import ChangeWindow

RUN_FACET = "sqlserverCdc"
LOG = logging.getLogger(__name__)


@define
class SqlServerCdcRunFacet(RunFacet):
    """The windows a task extracted or merged: LSN ranges, commit times, rows, and the targets' snapshot ids."""

    windows: list
    rows: dict
    snapshotIds: dict

    @staticmethod
    def _get_schema() -> str:
        # No published JSON schema: the facet is described in the provider's docs/lineage.md.
        return "urn:airflow-provider-sqlserver-cdc:docs/lineage.md#sqlservercdc"


def source_dataset(source: Mapping[str, str], columns: Sequence[Mapping[str, Any]] = ()) -> Dataset:
    """The OpenLineage dataset of a source table, with its captured columns when known."""
    server = source.get("server", "")
    host, _, port = server.rpartition(":") if ":" in server else (server, "", "")
    facets = {}
    if columns:
        fields = [SchemaDatasetFacetFields(name=c["name"], type=c.get("sql_type")) for c in columns]
        facets["schema"] = SchemaDatasetFacet(fields=fields)
    return Dataset(
        namespace=f"mssql://{host}:{port or MSSQL_DEFAULT_PORT}",
        name=f"{source.get('database', '')}.{source.get('schema', '')}.{source.get('table', '')}",
        facets=facets,
    )


def staging_dataset(window_uri: str) -> Dataset:
    """The OpenLineage dataset of a window directory on staging."""
    parts = urlsplit(window_uri)
    if parts.scheme and parts.scheme != "file":
        return Dataset(namespace=f"{parts.scheme}://{parts.netloc}", name=parts.path.lstrip("/"))
    return Dataset(namespace="file", name=parts.path if parts.scheme else window_uri)


def iceberg_dataset(table: str) -> Dataset:
    """The OpenLineage dataset of an Iceberg target ``catalog.namespace.table``."""
    catalog, _, rest = table.partition(".")
    return Dataset(namespace=f"iceberg://{catalog}", name=rest)


def window_description(window: ChangeWindow) -> dict[str, Any]:
    """One window in the run facet."""
    return {
        "captureInstance": window.capture_instance,
        "kind": window.kind,
        "positionKind": window.position_kind,
        "from": window.from_position,
        "to": window.to_position,
        "fromTime": window.from_time,
        "toTime": window.to_time,
        "rows": window.row_count,
        "operationCounts": dict(window.operation_counts),
    }


def manifest_columns(manifest_uri: str) -> list[dict[str, Any]]:
    """The captured columns a window's manifest describes (empty when it cannot be read)."""
    import fsspec

    try:
        with fsspec.open(manifest_uri, "r") as f:
            return list(json.load(f).get("columns") or [])
    except (OSError, ValueError) as err:
        LOG.debug("no columns for the lineage of %s: %s", manifest_uri, err)
        return []


def window_task_lineage(windows: Iterable[ChangeWindow]) -> OperatorLineage:
    """Extract or snapshot: source tables in, window directories out, the windows as the run facet."""
    windows = list(windows)
    inputs: list[Dataset] = []
    for window in windows:
        dataset = source_dataset(window.source, manifest_columns(window.manifest_uri))
        if all((d.namespace, d.name) != (dataset.namespace, dataset.name) for d in inputs):
            inputs.append(dataset)
    rows: dict[str, int] = {}
    for window in windows:
        for operation, count in window.operation_counts.items():
            rows[operation] = rows.get(operation, 0) + int(count)
    facet = SqlServerCdcRunFacet(windows=[window_description(w) for w in windows], rows=rows, snapshotIds={})
    return OperatorLineage(
        inputs=inputs,
        outputs=[staging_dataset(w.window_uri) for w in windows],
        run_facets={RUN_FACET: facet},
    )


def merge_lineage(extras: Mapping[str, Mapping[str, Any]]) -> OperatorLineage:
    """Merge: source tables in, Iceberg targets out; the merged windows and snapshot ids as the run facet.

    :param extras: target table -> its asset event's extra (``assets.event_extras``).
    """
    inputs: list[Dataset] = []
    windows: list[dict[str, Any]] = []
    rows: dict[str, int] = {}
    for table, extra in extras.items():
        source = urlsplit(extra.get("source") or "")
        if source.scheme == "mssql":
            database, schema, name = source.path.strip("/").split("/")[-3:]
            inputs.append(Dataset(namespace=f"mssql://{source.netloc}", name=f"{database}.{schema}.{name}"))
        windows += [{**r, "table": table} for r in extra.get("lsn_ranges") or []]
        for operation, count in (extra.get("rows") or {}).items():
            rows[operation] = rows.get(operation, 0) + int(count)
    facet = SqlServerCdcRunFacet(
        windows=windows,
        rows=rows,
        snapshotIds={table: extra.get("snapshot_id") for table, extra in extras.items()},
    )
    return OperatorLineage(
        inputs=inputs,
        outputs=[iceberg_dataset(table) for table in extras if table.count(".") >= 2],
        run_facets={RUN_FACET: facet},
    )
