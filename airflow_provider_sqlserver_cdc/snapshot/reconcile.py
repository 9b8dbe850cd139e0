"""
Compare a source table with its target per key range at one consistent LSN (docs/reconcile.md).

Inside a consistent read transaction (``consistent_point``: the LSN S it sees), the source table is
read once in key order and summarised per leaf of ``leaf_rows`` rows (row count and digest sum);
the target side (``target_side``: the Spark job ``spark/reconcile``, or any callable answering its
request) summarises the target's live rows with the same leaf bounds, bisects the leaf range where
the summaries differ and returns the differing leaves' target rows. The source rows of those leaves
are then read again in the same transaction, so both reads see the table at S, and compared key by
key. A key whose target row carries a position above S changed after S and was already merged: it
is not judged (counted as ``newer_in_target``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.column_masking import ColumnMaskingError
from airflow_provider_sqlserver_cdc.hooks.consistent_point import ConsistentRead, ConsistentSnapshot
from airflow_provider_sqlserver_cdc.hooks.reconcile_source import (
    read_key_range,
    summarise_source,
)
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.reconcile import (
    DEFAULT_DETAIL_LEAVES,
    DEFAULT_LEAF_ROWS,
    DEFAULT_MAX_REPORTED_KEYS,
)
from airflow_provider_sqlserver_cdc.reconcile.digest import (
    Key,
    decode_key,
    encode_key,
    row_digest,
)
from airflow_provider_sqlserver_cdc.window.lsn_ranges import parse_ranges

if TYPE_CHECKING:
    import logging

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook

MISSING = "missing_in_target"
UNEXPECTED = "unexpected_in_target"
CHANGED = "changed"

#: The target side: request (JSON-able dict) -> result (``spark.reconcile.job.compare_target``'s dict).
TargetSide = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class TargetRow:
    """A target row of a differing leaf: its digest, position (``_cdc_start_lsn``) and whether it is a tombstone."""

    digest: int
    position: str
    deleted: bool


@dataclass
class KeyDifference:
    """One key whose row differs: ``missing_in_target``, ``unexpected_in_target`` or ``changed``."""

    key: list[Any]
    kind: str
    leaf: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (XCom): the key's values as text."""
        return {"key": [str(v) for v in self.key], "kind": self.kind, "leaf": self.leaf}


@dataclass
class Comparison:
    """
    What a comparison found, and what a repair needs (bounds, the differing leaves' target rows).

    :param comparison_lsn: S, the LSN the source was read at.
    :param differing_leaves: every leaf whose summaries differ.
    :param detailed_leaves: the leaves compared key by key (at most ``detail_leaves``).
    :param differences: the differing keys of the detailed leaves, in key order.
    :param newer_in_target: keys not judged: their target row is newer than S.
    :param changes_not_merged: captured changes of the instance between the target's highest applied LSN
        and S (their keys show as differing; None: not known). A lower bound: the capture job may lag.
    """

    capture_instance: str
    table: str
    comparison_lsn: str
    method: str
    source_rows: int
    target_rows: int
    leaf_rows: int
    bounds: list[Key]
    ranges_compared: int
    differing_leaves: list[int]
    detailed_leaves: list[int]
    differences: list[KeyDifference]
    newer_in_target: int
    applied_lsn_ranges: str
    changes_not_merged: int | None = None
    target_rows_by_leaf: dict[int, dict[Key, TargetRow]] = field(default_factory=dict, repr=False)

    @property
    def leaves(self) -> int:
        """How many leaves the table was split into."""
        return len(self.bounds) + 1

    @property
    def matches(self) -> bool:
        """Source and target hold the same rows at S (keys newer in the target aside)."""
        return not self.differing_leaves or (
            not self.differences and set(self.detailed_leaves) == set(self.differing_leaves)
        )

    def summary(self, max_keys: int = DEFAULT_MAX_REPORTED_KEYS) -> dict[str, Any]:
        """The XCom: counts, the differing leaves and at most ``max_keys`` differing keys."""
        data = {
            k: v for k, v in asdict(self).items() if k not in ("bounds", "differences", "target_rows_by_leaf")
        }
        counts = {MISSING: 0, UNEXPECTED: 0, CHANGED: 0}
        for d in self.differences:
            counts[d.kind] += 1
        data.update(
            leaves=self.leaves,
            matches=self.matches,
            differing_keys=len(self.differences),
            differences_by_kind=counts,
            reported_keys=[d.to_dict() for d in self.differences[:max_keys]],
            keys_left_out=max(0, len(self.differences) - max_keys),
            leaves_not_detailed=len(set(self.differing_leaves) - set(self.detailed_leaves)),
        )
        return data


def leaf_bounds(bounds: list[Key], first: int, last: int) -> tuple[Key | None, Key | None]:
    """The key range of leaves ``first..last``: inclusive lower key (None: from the start), exclusive upper."""
    lower = bounds[first - 1] if first > 0 else None
    upper = bounds[last] if last < len(bounds) else None
    return lower, upper


def _is_newer(position: str, lsn: Lsn) -> bool:
    return Lsn.from_hex(position if position.startswith("0x") else f"0x{position}") > lsn


def compare_at_consistent_point(
    hook: SqlServerCdcHook,
    instance: CaptureInstance,
    *,
    table: str,
    target_side: TargetSide,
    leaf_rows: int = DEFAULT_LEAF_ROWS,
    detail_leaves: int = DEFAULT_DETAIL_LEAVES,
    batch_size: int = DEFAULT_BATCH_SIZE,
    log: logging.Logger | None = None,
    read: ConsistentRead | None = None,
) -> Comparison:
    """
    Compare ``instance``'s source table with the target ``table`` at one consistent LSN; change nothing.

    :param hook: the source hook.
    :param instance: the capture instance (columns and key columns loaded).
    :param table: the target table (``catalog.namespace.table``).
    :param target_side: answers the target side's request (the Spark job through spark-submit, or in-process).
    :param leaf_rows: source rows per leaf (the finest range compared; a repair reads whole leaves).
    :param detail_leaves: differing leaves compared key by key at most (the rest is counted).
    :param batch_size: rows fetched at a time.
    :param log: where progress goes.
    :param read: how the consistent read fixes its point (default: snapshot isolation).
    """
    with ConsistentSnapshot(hook, instance, read) as snapshot:
        assert snapshot.point is not None and snapshot.reader is not None
        lsn = snapshot.point.lsn
        source = summarise_source(snapshot.reader, instance, leaf_rows=leaf_rows, batch_size=batch_size)
        if log is not None:
            log.info(
                "%s: source read at %s (%s): %d rows in %d leaves of %d rows; comparing with %s",
                instance.name,
                lsn.hex,
                snapshot.point.method,
                source.rows,
                len(source.leaves),
                leaf_rows,
                table,
            )
        result = target_side(
            {
                "table": table,
                "capture_instance": instance.name,
                "key_columns": list(instance.key_columns),
                "columns": [c.name for c in instance.columns],
                "bounds": [encode_key(b) for b in source.bounds],
                "source_leaves": [[c, str(d)] for c, d in source.leaves],
                "detail_leaves": detail_leaves,
            }
        )
        if result.get("refused"):
            raise ColumnMaskingError(f"{instance.name}: {result['refused']}")
        target_rows_by_leaf: dict[int, dict[Key, TargetRow]] = {}
        for leaf, rows in result["rows"].items():
            target_rows_by_leaf[int(leaf)] = {
                decode_key(key): TargetRow(int(digest), position, bool(deleted))
                for key, digest, position, deleted in rows
            }
        differences: list[KeyDifference] = []
        newer = 0
        key_index = [instance.columns.index(c) for c in _key_columns(instance)]
        for leaf in result["detailed_leaves"]:
            lower, upper = leaf_bounds(source.bounds, leaf, leaf)
            targets = target_rows_by_leaf.get(leaf, {})
            seen: set[Key] = set()
            found: list[KeyDifference] = []
            for values in read_key_range(snapshot.reader, instance, lower, upper, batch_size=batch_size):
                key = tuple(values[i] for i in key_index)
                seen.add(key)
                row = targets.get(key)
                if row is not None and _is_newer(row.position, lsn):
                    newer += 1
                elif row is None or row.deleted:
                    found.append(KeyDifference(list(key), MISSING, leaf))
                elif row.digest != row_digest(values):
                    found.append(KeyDifference(list(key), CHANGED, leaf))
            for key, row in targets.items():
                if key in seen or row.deleted:
                    continue
                if _is_newer(row.position, lsn):
                    newer += 1
                else:
                    found.append(KeyDifference(list(key), UNEXPECTED, leaf))
            differences += sorted(found, key=lambda d: tuple(d.key))
    comparison = Comparison(
        capture_instance=instance.name,
        table=table,
        comparison_lsn=lsn.hex,
        method=snapshot.point.method,
        source_rows=source.rows,
        target_rows=sum(int(c) for c, _ in result["target_leaves"]),
        leaf_rows=leaf_rows,
        bounds=source.bounds,
        ranges_compared=int(result["ranges_compared"]),
        differing_leaves=list(result["differing_leaves"]),
        detailed_leaves=list(result["detailed_leaves"]),
        differences=differences,
        newer_in_target=newer,
        applied_lsn_ranges=result.get("applied_lsn_ranges", ""),
        target_rows_by_leaf=target_rows_by_leaf,
    )
    if comparison.differences:
        comparison.changes_not_merged = changes_not_merged(
            hook, instance.name, comparison.applied_lsn_ranges, lsn
        )
    if log is not None and comparison.changes_not_merged:
        log.warning(
            "%s: %d captured changes after the target's applied ranges (%s) and up to the comparison LSN %s are "
            "not merged yet: their keys are among the differing keys (the next windows bring them)",
            instance.name,
            comparison.changes_not_merged,
            comparison.applied_lsn_ranges or "nothing",
            comparison.comparison_lsn,
        )
    if log is not None:
        log.info(
            "%s: %d of %d leaves differ (%d ranges compared); %d differing keys, %d newer in the target",
            instance.name,
            len(comparison.differing_leaves),
            comparison.leaves,
            comparison.ranges_compared,
            len(differences),
            newer,
        )
    return comparison


def changes_not_merged(hook: SqlServerCdcHook, capture_instance: str, applied: str, lsn: Lsn) -> int | None:
    """Captured changes of the instance after the highest applied LSN, up to ``lsn`` (None: not known)."""
    ranges = parse_ranges(applied)
    if not ranges:
        return None
    first = hook.increment_lsn(Lsn.from_int(ranges[-1][1]))
    last = min(lsn, hook.get_max_lsn())
    if first > last:
        return 0
    if first < hook.get_min_lsn(capture_instance):
        return None
    return hook.count_changes(capture_instance, first, last).rows


def _key_columns(instance: CaptureInstance) -> list[Any]:
    by_name = {c.name: c for c in instance.columns}
    return [by_name[k] for k in instance.key_columns]
