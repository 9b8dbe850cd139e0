"""
Re-copy the key ranges a reconcile found different, at a new consistent LSN, as a ``repair`` window.

A new consistent read (``consistent_point``: LSN S2) reads each range of differing leaves from the
source. The window holds only what differs from the target in those ranges: the source rows whose
digest differs from the target's row (or that the target lacks) as inserts at S2, and deletes at
S2 for live target keys of the ranges the source no longer holds. Rows that already match are left
out, so correct rows are not rewritten. The merge job applies a ``repair`` window like a change
window under its LSN guard (a target row whose position is above S2, a change merged meanwhile, is
kept) but never skips it as applied and records no applied range (docs/reconcile.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_provider_sqlserver_cdc.extraction.cdc_windows import finish_window
from airflow_provider_sqlserver_cdc.hooks.consistent_point import ConsistentRead, ConsistentSnapshot
from airflow_provider_sqlserver_cdc.hooks.reconcile_source import RowTyper, read_key_range
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_descriptions
from airflow_provider_sqlserver_cdc.parquet.window_writer import ParquetWindowWriter, resolve_filesystem
from airflow_provider_sqlserver_cdc.reconcile.digest import Key, leaf_runs, row_digest
from airflow_provider_sqlserver_cdc.snapshot.reconcile import Comparison, leaf_bounds
from airflow_provider_sqlserver_cdc.snapshot.table_copy import metadata_columns, update_mask_all
from airflow_provider_sqlserver_cdc.window.manifest import (
    REPAIR,
    WindowManifest,
    source_description,
    zero_operation_counts,
)
from airflow_provider_sqlserver_cdc.window.net_effect import DELETE, INSERT

if TYPE_CHECKING:
    import logging

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
    from airflow_provider_sqlserver_cdc.lsn import Lsn

REPAIR_DIRECTORY = "_reconcile"


@dataclass
class RepairWindow:
    """A written repair window: where, at which LSN, which leaf runs, and how many rows of each kind."""

    manifest_uri: str
    window_uri: str
    repair_lsn: str
    ranges: list[tuple[int, int]]
    rows_read: int
    upserts: int
    deletes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (XCom)."""
        return {
            "manifest_uri": self.manifest_uri,
            "window_uri": self.window_uri,
            "repair_lsn": self.repair_lsn,
            "ranges": [list(r) for r in self.ranges],
            "rows_read": self.rows_read,
            "upserts": self.upserts,
            "deletes": self.deletes,
        }


def repair_batch(
    schema: pa.Schema,
    rows: Sequence[Sequence[Any]],
    *,
    operation: int,
    lsn: Lsn,
    mask: bytes,
    commit_time: datetime,
) -> pa.RecordBatch:
    """Rows (values as the target holds them) as a window batch: every row ``operation`` at ``lsn``."""
    arrays = metadata_columns(len(rows), lsn=lsn, operation=operation, mask=mask, commit_time=commit_time)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema.names[5:]]
    arrays += [pa.array(list(values), schema.field(5 + i).type) for i, values in enumerate(columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def repair_window_dir(lsn: Lsn) -> str:
    """The repair window's directory name: ``{S2}_{S2}``."""
    return f"{lsn.hex}_{lsn.hex}"


def write_repair_window(
    hook: SqlServerCdcHook,
    instance: CaptureInstance,
    comparison: Comparison,
    *,
    staging_uri: str,
    database: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dag_id: str | None = None,
    run_id: str | None = None,
    log: logging.Logger | None = None,
    on_read: Callable[[Lsn], None] | None = None,
    read: ConsistentRead | None = None,
) -> RepairWindow | None:
    """
    Read the differing leaves of ``comparison`` at a new consistent LSN and write what differs as a repair window.

    Only the leaves compared key by key (``comparison.detailed_leaves``) are repaired; None when
    nothing in them differs any more. The window lands in ``{staging_uri}/_reconcile/{ci}/{S2}_{S2}/``.

    :param hook: the source hook.
    :param instance: the capture instance (columns and key columns loaded).
    :param comparison: the comparison that found the differing leaves.
    :param staging_uri: the windows' staging base (local path or filesystem URI).
    :param database: the source database (for the manifest).
    :param on_read: called with S2 once the source ranges are read (tests write to the source here).
    :param read: how the consistent read fixes its point (default: snapshot isolation).
    """
    started = time.monotonic()
    runs = leaf_runs(comparison.detailed_leaves)
    if not runs:
        return None
    typer = RowTyper(instance)
    schema = hook.changes_schema(instance)
    mask = update_mask_all(instance.columns)
    upserts: list[tuple[Any, ...]] = []
    deletes: list[tuple[Any, ...]] = []
    rows_read = 0
    with ConsistentSnapshot(hook, instance, read) as snapshot:
        assert snapshot.point is not None and snapshot.reader is not None
        point = snapshot.point
        for first, last in runs:
            lower, upper = leaf_bounds(comparison.bounds, first, last)
            targets: dict[Key, Any] = {}
            for leaf in range(first, last + 1):
                targets.update(comparison.target_rows_by_leaf.get(leaf, {}))
            seen: set[Key] = set()
            for values in read_key_range(snapshot.reader, instance, lower, upper, batch_size=batch_size):
                rows_read += 1
                key = typer.key(values)
                seen.add(key)
                row = targets.get(key)
                if row is None or row.deleted or row.digest != row_digest(values):
                    upserts.append(values)
            for key, row in targets.items():
                if key not in seen and not row.deleted:
                    values = [None] * len(instance.columns)
                    for position, value in zip(typer.key_index, key, strict=True):
                        values[position] = value
                    deletes.append(tuple(values))
    if on_read is not None:
        on_read(point.lsn)
    if log is not None:
        log.info(
            "%s: repair read %d rows of %d range(s) at %s: %d to write, %d to delete",
            instance.name,
            rows_read,
            len(runs),
            point.lsn.hex,
            len(upserts),
            len(deletes),
        )
    if not upserts and not deletes:
        return None
    filesystem, base_path = resolve_filesystem(staging_uri)
    base_uri = f"{staging_uri.rstrip('/')}/{REPAIR_DIRECTORY}"
    window_dir = f"{base_path}/{REPAIR_DIRECTORY}/{instance.name}/{repair_window_dir(point.lsn)}"
    commit_time = point.utc_time
    writer = ParquetWindowWriter(filesystem, window_dir, schema).open()
    try:
        for operation, rows in ((INSERT, upserts), (DELETE, deletes)):
            for start in range(0, len(rows), batch_size):
                writer.write_batch(
                    repair_batch(
                        schema,
                        rows[start : start + batch_size],
                        operation=operation,
                        lsn=point.lsn,
                        mask=mask,
                        commit_time=commit_time,
                    )
                )
        files = writer.close()
    except BaseException:
        writer.abort()
        raise
    counts = zero_operation_counts()
    counts["insert"] = len(upserts)
    counts["delete"] = len(deletes)
    manifest = WindowManifest(
        kind=REPAIR,
        capture_instance=instance.name,
        source=source_description(hook.server, database, instance),
        from_lsn=point.lsn.hex,
        to_lsn=point.lsn.hex,
        from_time=None,
        to_time=commit_time.isoformat(),
        mode="snapshot",
        row_filter_option="all",
        key_columns=list(instance.key_columns),
        columns=column_descriptions(instance),
        files=files,
        row_count=len(upserts) + len(deletes),
        operation_counts=counts,
        created_at=datetime.now(UTC).isoformat(),
        dag_id=dag_id,
        run_id=run_id,
    )
    extract = finish_window(filesystem, window_dir, manifest, base_uri=base_uri, started=started, log=log)
    return RepairWindow(
        manifest_uri=extract.manifest_uri,
        window_uri=extract.window_uri,
        repair_lsn=point.lsn.hex,
        ranges=runs,
        rows_read=rows_read,
        upserts=len(upserts),
        deletes=len(deletes),
    )
