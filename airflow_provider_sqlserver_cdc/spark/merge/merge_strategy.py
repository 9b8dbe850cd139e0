"""MERGE or rewrite: the choice per change window, from the target's file statistics and the window's size.

A MERGE reads the target rows its key range can match, joins them with the window's net effect and
writes what changed. When the window touches most of the table, rewriting the table once with the
net effect applied (``table_rewrite``) reads every row once and writes every row once, and beats
it. The choice is made per window, from the Iceberg file statistics of the target (file metadata
only: no data is read) and logged with the numbers it was based on; ``--merge-strategy`` forces
either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.merge.statements import quote, quote_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_sqlserver_cdc.spark.merge.key_filter import KeyRange

#: ``--merge-strategy``: choose per window (default), always MERGE, always rewrite the table.
MERGE_STRATEGIES = ("auto", "merge", "rewrite")
DEFAULT_MERGE_STRATEGY = "auto"
#: Iceberg's row-level write modes, set on the tables the job creates (``--write-mode``); the faster
#: MERGE by default (pipeline/settings.py says why).
WRITE_MODES = ("copy-on-write", "merge-on-read")
DEFAULT_WRITE_MODE = "merge-on-read"

#: The rewrite is chosen when the data files the window's key range overlaps hold at least this
#: share of the target's rows (a MERGE would read them anyway)...
REWRITE_MIN_TOUCHED_SHARE = 0.5
#: ... and the window's change rows are at least this share of the target's rows (write mode ->
#: share). Measured with ``benchmarks/merge.py`` (docs/merge-performance.md): a merge-on-read MERGE
#: writes only the changed rows, and at scale 1 (1M uniformly spread changes, 1.7M change rows,
#: into 5M rows: 34 %) it still cost less than the rewrite (2.19x against 2.69x a plain copy of
#: the table, JVM CPU), so merge-on-read tables are only rewritten when a window's rows outnumber
#: the table's; a copy-on-write MERGE rewrites every file it touches after a join that shuffles
#: them, so it loses much earlier: at 3.4 % (20k changes into 1M rows) it cost 1.5x the rewrite.
REWRITE_MIN_CHANGE_SHARE = {"merge-on-read": 1.0, "copy-on-write": 0.03}
#: ... and the target holds at least this many rows: below, both are quick, and the MERGE keeps the
#: table's files (a rewrite replaces them all, a merge-on-read MERGE adds a few).
REWRITE_MIN_TARGET_ROWS = 100_000

#: Up to this many data files in the current snapshot, the job reads the file statistics on the
#: driver through Iceberg's Java API, from the data manifests: ~7 ms for a table of one file against
#: ~0.12 s for a query of the ``data_files`` metadata table (``benchmarks/merge_stages.py``'s data,
#: warm JVM), at about 1 ms more a file. Larger tables are read by the query, in Spark tasks.
DRIVER_STATISTICS_MAX_FILES = 64


@dataclass(frozen=True)
class TargetFiles:
    """The target's live data files, and those whose key bounds overlap the window's key range.

    :param files: data files of the current snapshot.
    :param rows: their records (rows removed by delete files included).
    :param touched_files: files whose bounds on the first key column overlap the key range (all
        files when there is no key range, or a file has no bounds).
    :param touched_rows: their records.
    :param range_rows: an estimate of the touched files' rows within the key range: each file's
        records in proportion to the part of its key bounds that the range covers (keys spread
        evenly between the bounds). None: not estimated.
    """

    files: int
    rows: int
    touched_files: int
    touched_rows: int
    range_rows: int | None = None

    @property
    def scanned_rows(self) -> int:
        """The rows the MERGE's target scan keeps after its key range filter (estimated)."""
        return self.touched_rows if self.range_rows is None else self.range_rows

    @property
    def touched_share(self) -> float:
        """The share of the target's rows in touched files (1 for an empty table)."""
        return self.touched_rows / self.rows if self.rows else 1.0


def _literal(value: int, sql_type: str) -> str:
    """Return a key bound as a Spark SQL literal of the key column's type."""
    return f"CAST({value} AS {sql_type})" if sql_type.startswith("DECIMAL") else str(value)


def target_files(
    spark: SparkSession, table: str, key_range: KeyRange | None, iceberg: Any | None = None
) -> TargetFiles:
    """Read the target's data file statistics from its manifests (no data is read).

    :param table: the dotted target table name.
    :param key_range: the range of the window's first key column; None: every file is touched.
    :param iceberg: the table's Iceberg ``Table`` (Java API): with at most
        ``DRIVER_STATISTICS_MAX_FILES`` data files, the driver reads the manifests itself.
    """
    if iceberg is not None:
        snapshot = iceberg.currentSnapshot()
        if snapshot is None:
            return TargetFiles(0, 0, 0, 0, 0)
        count = snapshot.summary().get("total-data-files")
        if count is not None and int(count) <= DRIVER_STATISTICS_MAX_FILES:
            return _manifest_statistics(spark, iceberg, snapshot, key_range)
    return _data_files_statistics(spark, table, key_range)


def _manifest_statistics(
    spark: SparkSession, iceberg: Any, snapshot: Any, key_range: KeyRange | None
) -> TargetFiles:
    """Count the live data files of ``snapshot`` from its data manifests, on the driver (``target_files``).

    The same figures as ``_data_files_statistics``, in Python: a file without both bounds is
    touched whole, unless one bound alone puts it out of the range.
    """
    jvm = spark.sparkContext._jvm
    field = iceberg.schema().caseInsensitiveFindField(key_range.column) if key_range is not None else None
    files = rows = touched_files = touched_rows = 0
    range_rows = 0.0
    manifests = snapshot.dataManifests(iceberg.io())
    for index in range(manifests.size()):
        reader = jvm.org.apache.iceberg.ManifestFiles.read(
            manifests.get(index), iceberg.io(), iceberg.specs()
        )
        try:
            entries = reader.iterator()  # live entries only: added and existing files
            while entries.hasNext():
                data_file = entries.next()
                records = int(data_file.recordCount())
                files, rows = files + 1, rows + records
                if key_range is None or field is None:
                    touched_files, touched_rows, range_rows = (
                        touched_files + 1,
                        touched_rows + records,
                        range_rows + records,
                    )
                    continue
                lower = _bound(jvm, field, data_file.lowerBounds())
                upper = _bound(jvm, field, data_file.upperBounds())
                if (upper is not None and upper < key_range.lowest) or (
                    lower is not None and lower > key_range.highest
                ):
                    continue
                touched_files, touched_rows = touched_files + 1, touched_rows + records
                if lower is None or upper is None:
                    range_rows += records
                else:  # exact integer differences, then their ratio (as the query computes it)
                    covered = min(upper, key_range.highest) - max(lower, key_range.lowest) + 1
                    range_rows += records * float(max(covered, 0)) / float(upper - lower + 1)
        finally:
            reader.close()
    return TargetFiles(files, rows, touched_files, touched_rows, round(range_rows))


def _bound(jvm: Any, field: Any, bounds: Any) -> int | None:
    """Return a file's lower or upper bound of a whole-number key column, None if it has none."""
    buffer = bounds.get(field.fieldId()) if bounds is not None else None
    if buffer is None:
        return None
    value = jvm.org.apache.iceberg.types.Conversions.fromByteBuffer(field.type(), buffer)
    return int(value)  # py4j gives an int, or a Decimal of scale 0 for a BigDecimal


def _data_files_statistics(spark: SparkSession, table: str, key_range: KeyRange | None) -> TargetFiles:
    """Count the target's data files with a query of its ``data_files`` metadata table (``target_files``)."""
    overlaps, in_range = "true", "record_count"
    if key_range is not None:
        bounds = f"readable_metrics.{quote(key_range.column)}"
        low, high = (_literal(v, key_range.sql_type) for v in (key_range.lowest, key_range.highest))
        overlaps = f"coalesce(NOT ({bounds}.upper_bound < {low} OR {bounds}.lower_bound > {high}), true)"
        # Exact differences first (as decimals: no overflow of a long), then their ratio.
        lower, upper = (f"CAST({bounds}.{b} AS DECIMAL(38,0))" for b in ("lower_bound", "upper_bound"))
        first, last = (f"CAST({v} AS DECIMAL(38,0))" for v in (key_range.lowest, key_range.highest))
        covered = f"CAST(least({upper}, {last}) - greatest({lower}, {first}) + 1 AS DOUBLE)"
        span = f"CAST({upper} - {lower} + 1 AS DOUBLE)"
        # a file without bounds counts whole
        in_range = f"coalesce(record_count * greatest({covered}, 0) / {span}, record_count)"
    row = spark.sql(
        f"SELECT count(*) AS files, coalesce(sum(record_count), 0) AS rows, "
        f"count_if({overlaps}) AS touched_files, "
        f"coalesce(sum(CASE WHEN {overlaps} THEN record_count ELSE 0 END), 0) AS touched_rows, "
        f"coalesce(sum(CASE WHEN {overlaps} THEN {in_range} ELSE 0 END), 0) AS range_rows "
        f"FROM {quote_table(table)}.data_files"
    ).first()
    return TargetFiles(
        int(row.files), int(row.rows), int(row.touched_files), int(row.touched_rows), round(row.range_rows)
    )


@dataclass(frozen=True)
class StrategyChoice:
    """Whether to rewrite the table instead of MERGE, and why (the numbers, for the log).

    :param rewrite: True: rewrite the table with the window's net effect applied.
    :param reason: the setting or the statistics the choice was made on.
    """

    rewrite: bool
    reason: str


def choose_strategy(setting: str, files: TargetFiles, change_rows: int, write_mode: str) -> StrategyChoice:
    """Choose between a MERGE and a rewrite of the table for one change window.

    :param setting: ``auto``, ``merge`` or ``rewrite`` (``--merge-strategy``).
    :param files: the target's data files (``target_files``).
    :param change_rows: the rows of the windows, update before-images included.
    :param write_mode: the table's ``write.merge.mode``.
    """
    min_change = REWRITE_MIN_CHANGE_SHARE.get(write_mode, REWRITE_MIN_CHANGE_SHARE[DEFAULT_WRITE_MODE])
    change_share = change_rows / files.rows if files.rows else float("inf")
    numbers = (
        f"{change_rows} change rows = {change_share:.1%} of {files.rows} target rows "
        f"(rewrite from {min_change:.0%}, {write_mode}); the key range overlaps {files.touched_files} of "
        f"{files.files} data files, {files.touched_share:.0%} of the rows (rewrite from "
        f"{REWRITE_MIN_TOUCHED_SHARE:.0%})"
    )
    if setting == "merge":
        return StrategyChoice(False, f"--merge-strategy merge; {numbers}")
    if setting == "rewrite":
        return StrategyChoice(True, f"--merge-strategy rewrite; {numbers}")
    if files.rows < REWRITE_MIN_TARGET_ROWS:
        return StrategyChoice(
            False, f"a small target ({files.rows} rows, rewrite from {REWRITE_MIN_TARGET_ROWS}); {numbers}"
        )
    heavy = change_share >= min_change and files.touched_share >= REWRITE_MIN_TOUCHED_SHARE
    return StrategyChoice(heavy, numbers)
