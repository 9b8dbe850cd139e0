"""
The target side of the reconcile comparison: summarise an Iceberg table's live rows per key range.

The request (JSON, written by the Airflow task) carries the source's leaf bounds and summaries at
one consistent LSN; the job assigns every live target row (``NOT _cdc_deleted``) to its leaf with
the same bounds, sums the row digests per leaf (one pass, on the executors), bisects the leaf range
where the summaries differ, and returns the differing leaves with their target rows (key, digest,
position, tombstone flag), plus the table's applied LSN ranges. It reads the table and writes only its result file.
Standard library and PySpark only (shipped in the jobs' zip).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.column_masking import is_masked_comment
from airflow_provider_sqlserver_cdc.reconcile import DEFAULT_DETAIL_LEAVES
from airflow_provider_sqlserver_cdc.reconcile.digest import (
    MASK64,
    combine,
    decode_key,
    differing_leaves,
    encode_key,
    leaf_of,
    row_digest,
)
from airflow_provider_sqlserver_cdc.spark.merge.change_columns import DELETED, START_LSN
from airflow_provider_sqlserver_cdc.spark.merge.published_files import read_text, write_text
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG = logging.getLogger("sqlserver_cdc.reconcile")


def _summaries(
    rows: Iterator[Any], bounds: Sequence[Any], key_index: Sequence[int], width: int
) -> Iterator[Any]:
    sums: dict[int, list[int]] = {}
    for row in rows:
        values = tuple(row[:width])
        leaf = leaf_of(bounds, tuple(values[i] for i in key_index))
        digest = row_digest(values)
        entry = sums.get(leaf)
        if entry is None:
            sums[leaf] = [1, digest]
        else:
            entry[0] += 1
            entry[1] = (entry[1] + digest) & MASK64
    return iter(sums.items())


def _detail(
    rows: Iterator[Any], bounds: Sequence[Any], key_index: Sequence[int], width: int, wanted: frozenset[int]
) -> Iterator[Any]:
    for row in rows:
        values = tuple(row[:width])
        key = tuple(values[i] for i in key_index)
        leaf = leaf_of(bounds, key)
        if leaf in wanted:
            yield leaf, encode_key(key), row_digest(values), bytes(row[width]).hex(), bool(row[width + 1])


def refusal(table: str, fields: dict[str, str | None], columns: Sequence[str]) -> str | None:
    """
    Why the target cannot be compared with its source's values in clear, or None.

    A column the target holds masked (its comment says so) or lacks (dropped by column masking) would
    differ in every row, and a repair would write the source's values to the target in clear.

    :param table: the target table.
    :param fields: the target's lower-cased column names -> their comments.
    :param columns: the source's column names.
    """
    masked = [c for c in columns if is_masked_comment(fields.get(c.lower()))]
    missing = [c for c in columns if c.lower() not in fields]
    if not masked and not missing:
        return None
    found = []
    if masked:
        found.append(f"holds {', '.join(masked)} masked")
    if missing:
        found.append(f"lacks {', '.join(missing)} (dropped by column masking, or not merged yet)")
    return (
        f"{table} {' and '.join(found)}: a reconcile compares the source's values in clear, and its repair "
        "would write them to the target in clear. Leave this table out of the reconcile (docs/reconcile.md)."
    )


def compare_target(spark: SparkSession, request: dict[str, Any]) -> dict[str, Any]:
    """
    Summarise the target table per leaf, bisect against the source's summaries, detail the differing leaves.

    :param request: ``table``, ``capture_instance``, ``key_columns``, ``columns`` (target names, in the
        source's column order), ``bounds`` (encoded keys), ``source_leaves`` ([count, digest] per leaf),
        ``detail_leaves`` (most leaves whose rows are returned). A target with masked or missing columns
    is not read: the result is ``{"table", "refused"}`` (:func:`refusal`).
    """
    from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import IcebergTarget
    from airflow_provider_sqlserver_cdc.window.lsn_ranges import format_ranges

    table = request["table"]
    columns = list(request["columns"])
    key_index = [columns.index(k) for k in request["key_columns"]]
    bounds = [decode_key(b) for b in request["bounds"]]
    source_leaves = [[int(c), int(d)] for c, d in request["source_leaves"]]
    width = len(columns)
    fields = {f.name.lower(): f.metadata.get("comment") for f in spark.table(table).schema.fields}
    refused = refusal(table, fields, columns)
    if refused is not None:
        LOG.error("reconcile %s refused: %s", table, refused)
        return {"table": table, "refused": refused}
    every_row = spark.table(table).select(*[quote(c) for c in columns], quote(START_LSN), quote(DELETED))
    frame = every_row.where(f"NOT {quote(DELETED)}")
    shared = spark.sparkContext.broadcast(bounds)
    found = (
        frame.rdd.mapPartitions(lambda rows: _summaries(rows, shared.value, key_index, width))
        .reduceByKey(lambda a, b: combine([a, b]))
        .collectAsMap()
    )
    target_leaves = [list(found.get(i, [0, 0])) for i in range(len(source_leaves))]
    outside = sorted(set(found) - set(range(len(source_leaves))))
    if outside:  # cannot happen: leaf_of returns 0..len(bounds)
        raise ValueError(f"target rows in leaves {outside} beyond the {len(source_leaves)} source leaves")
    leaves, compared = differing_leaves(source_leaves, target_leaves)
    limit = int(request.get("detail_leaves", DEFAULT_DETAIL_LEAVES))
    detailed = frozenset(leaves[:limit])
    rows: dict[str, list[Any]] = {str(leaf): [] for leaf in sorted(detailed)}
    if detailed:
        # every row of the leaves, tombstones too: a key deleted after the comparison LSN is not a difference
        for leaf, key, digest, position, deleted in every_row.rdd.mapPartitions(
            lambda it: _detail(it, shared.value, key_index, width, detailed)
        ).collect():
            rows[str(leaf)].append([key, str(digest), position, deleted])
    shared.unpersist()
    applied = IcebergTarget(spark).applied_ranges(table).get(request.get("capture_instance", ""), [])
    LOG.info(
        "reconcile %s: %d target rows, %d leaves, %d differ (%d ranges compared)",
        table,
        sum(c for c, _ in target_leaves),
        len(target_leaves),
        len(leaves),
        compared,
    )
    return {
        "table": table,
        "target_leaves": [[c, str(d)] for c, d in target_leaves],
        "differing_leaves": leaves,
        "ranges_compared": compared,
        "detailed_leaves": sorted(detailed),
        "rows": rows,
        "applied_lsn_ranges": format_ranges(applied),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``--request URI --result URI``."""
    parser = argparse.ArgumentParser(prog="reconcile_job.py", description=__doc__.splitlines()[1])
    parser.add_argument("--request", required=True, help="the request file (JSON) the Airflow task wrote")
    parser.add_argument("--result", required=True, help="where to write the result file (JSON)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry: read the request, compare, write the result; exit code 0."""
    from pyspark.sql import SparkSession

    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    args = parse_args(argv)
    spark = SparkSession.builder.appName("sqlserver-cdc-reconcile").getOrCreate()
    text = read_text(spark, args.request)
    if text is None:
        print(f"ERROR: the reconcile request {args.request} does not exist", file=sys.stderr)
        return 2
    result = compare_target(spark, json.loads(text))
    write_text(spark, args.result, json.dumps(result))
    return 0
