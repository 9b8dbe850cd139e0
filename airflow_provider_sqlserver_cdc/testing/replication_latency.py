"""Commit-to-queryable latency: for each captured transaction, its commit time at the source against the first
Iceberg snapshot that holds it (demo, benchmarks).

A transaction's commit time is the windows' ``__$commit_time`` (from ``cdc.lsn_time_mapping``, in UTC);
it is queryable from the commit time of the first snapshot of its table whose applied LSN ranges
(``sqlserver-cdc.applied-lsn-ranges.<capture instance>`` in the snapshot summary) cover its LSN.
Both are read from files: the windows' Parquet and the Hadoop catalog's table metadata.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, covers, parse_ranges

RANGES_KEY = "sqlserver-cdc.applied-lsn-ranges."


@dataclass(frozen=True)
class Transaction:
    """A captured transaction: capture instance, commit LSN, commit time (UTC) and the manifest that holds it."""

    capture_instance: str
    lsn: int
    committed: dt.datetime
    manifest: str


def window_manifests(staging: Path) -> list[Path]:
    """Return the manifests of the change windows under a staging path, sorted."""
    return sorted(
        p
        for p in staging.glob("*/*/_manifest.json")
        if not p.parent.parent.name.startswith("_") and json.loads(p.read_text())["kind"] == "changes"
    )


def transactions(manifests: Iterable[Path]) -> list[Transaction]:
    """Return the transactions of change windows (one per commit LSN and capture instance).

    :param manifests: change windows' ``_manifest.json`` paths.
    """
    found: dict[tuple[str, int], Transaction] = {}
    for manifest_path in manifests:
        manifest = json.loads(manifest_path.read_text())
        for entry in manifest["files"]:
            columns = pq.read_table(
                manifest_path.parent / entry["path"], columns=["__$start_lsn", "__$commit_time"]
            )
            for lsn, committed in zip(
                columns.column(0).to_pylist(), columns.column(1).to_pylist(), strict=True
            ):
                key = (manifest["capture_instance"], int.from_bytes(lsn, "big"))
                if key not in found:
                    found[key] = Transaction(key[0], key[1], committed, str(manifest_path))
    return list(found.values())


def snapshot_history(table_dir: Path) -> list[tuple[dt.datetime, dict[str, list[LsnRange]]]]:
    """Return (commit time, capture instance -> applied ranges) of a Hadoop-catalog table's snapshots, oldest first.

    :param table_dir: the table's directory in the warehouse (holding ``metadata/``).
    """
    metadata = table_dir / "metadata"
    version = (metadata / "version-hint.text").read_text().strip()
    data = json.loads((metadata / f"v{version}.metadata.json").read_text())
    history = []
    for snapshot in data.get("snapshots", []):
        summary = snapshot.get("summary", {})
        ranges = {
            k[len(RANGES_KEY) :]: parse_ranges(v) for k, v in summary.items() if k.startswith(RANGES_KEY)
        }
        if ranges:
            history.append((dt.datetime.fromtimestamp(snapshot["timestamp-ms"] / 1000, dt.UTC), ranges))
    return sorted(history, key=lambda item: item[0])


def latencies(
    found: Sequence[Transaction], histories: dict[str, list[tuple[dt.datetime, dict[str, list[LsnRange]]]]]
) -> list[float | None]:
    """Return each transaction's seconds from commit to the first snapshot holding it (None: not queryable yet).

    :param found: the transactions.
    :param histories: capture instance -> its table's ``snapshot_history``.
    """
    result: list[float | None] = []
    for transaction in found:
        queryable = next(
            (
                time
                for time, ranges in histories.get(transaction.capture_instance, [])
                if covers(ranges.get(transaction.capture_instance, []), transaction.lsn, transaction.lsn)
            ),
            None,
        )
        result.append(None if queryable is None else (queryable - transaction.committed).total_seconds())
    return result


def percentile(values: Sequence[float], fraction: float) -> float:
    """Return the ``fraction`` percentile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def describe(values: Sequence[float | None]) -> str:
    """Return ``commit-to-queryable p50 X s p95 Y s max Z s`` (and how many are not queryable yet)."""
    known = [v for v in values if v is not None]
    if not known:
        return "commit-to-queryable: no change queryable yet"
    text = (
        f"commit-to-queryable p50 {statistics.median(known):.1f} s p95 {percentile(known, 0.95):.1f} s "
        f"max {max(known):.1f} s ({len(known)} transactions)"
    )
    missing = len(values) - len(known)
    return text + (f", {missing} not queryable yet" if missing else "")


def table_directories(
    staging: Path, warehouse: Path, namespace: str, table_name_template: str = "{schema}_{table}"
) -> dict[str, Path]:
    """Return capture instance -> its target table's directory in a Hadoop-catalog warehouse.

    :param staging: the staging path (a manifest of each capture instance names its source table).
    :param warehouse: the catalog's warehouse directory.
    :param namespace: ``catalog.namespace`` of the targets.
    :param table_name_template: the merge's table name template.
    """
    directories = {}
    for manifest_path in sorted(staging.glob("*/*/_manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        source = manifest["source"]
        name = table_name_template.format(
            schema=source.get("schema", ""),
            table=source.get("table", ""),
            database=source.get("database", ""),
            capture_instance=manifest["capture_instance"],
        )
        directories[manifest["capture_instance"]] = warehouse.joinpath(*namespace.split(".")[1:], name)
    return directories


def histories(directories: dict[str, Path]) -> dict[str, list[tuple[dt.datetime, dict[str, list[LsnRange]]]]]:
    """Return capture instance -> ``snapshot_history`` of its table (empty while the table does not exist)."""
    return {
        ci: snapshot_history(d) if (d / "metadata" / "version-hint.text").exists() else []
        for ci, d in directories.items()
    }
