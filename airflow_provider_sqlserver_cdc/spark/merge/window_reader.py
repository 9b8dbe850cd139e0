"""Reading windows with Spark: manifests through Spark's Hadoop file systems, file checks, Parquet rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import (
    COMMIT_TIME,
    OPERATION,
    SEQVAL,
    START_LSN,
)
from airflow_provider_sqlserver_cdc.spark.merge.parquet_footers import footer_figures
from airflow_provider_sqlserver_cdc.spark.merge.spark_types import spark_type
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote
from airflow_provider_sqlserver_cdc.window.manifest import ManifestError, WindowManifest, window_directory
from airflow_provider_sqlserver_cdc.window.net_effect import UPDATE_BEFORE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class WindowFile:
    """One Parquet file of a window: absolute URI, rows and bytes (-1: unknown) as the manifest states them."""

    uri: str
    rows: int
    bytes: int


@dataclass(frozen=True)
class Window:
    """A validated window manifest and the URI it was read from: the job's view of a window."""

    uri: str
    manifest: WindowManifest

    @property
    def directory(self) -> str:
        """The window directory: where the files' relative paths start."""
        return window_directory(self.uri)

    @property
    def files(self) -> tuple[WindowFile, ...]:
        """The window's Parquet files with absolute URIs."""
        return tuple(WindowFile(f"{self.directory}/{f.path}", f.rows, f.bytes) for f in self.manifest.files)

    @property
    def label(self) -> str:
        """Short name for messages: capture instance and LSN bounds."""
        return self.manifest.label


def _filesystem(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def load_window(spark: SparkSession, uri: str) -> Window:
    """
    Read and validate one window's manifest through Spark's Hadoop file systems (local, HDFS, S3A, ...).

    The job's counterpart of ``parquet.manifest_store.read_manifest`` (pyarrow file systems, used by
    the extraction); both parse and validate with ``WindowManifest.from_json``.
    """
    fs, path = _filesystem(spark, uri)
    if not fs.exists(path):
        raise ManifestError(
            f"window manifest {uri} does not exist: the extract task did not finish this window "
            "(the manifest is written last); re-run the extract task"
        )
    stream = fs.open(path)
    try:
        text = spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    # A keyless window is merged as a change log; ``table_modes.plan_mode`` refuses it for other modes.
    return Window(uri, WindowManifest.from_json(text, uri, key_required=False))


def check_files(spark: SparkSession, window: Window) -> None:
    """Fail unless every file the manifest lists exists with the stated size."""
    for window_file in window.files:
        fs, path = _filesystem(spark, window_file.uri)
        if not fs.exists(path):
            raise ManifestError(
                f"window {window.label}: file {window_file.uri} listed in {window.uri} is missing; "
                "re-run the extract task for this window"
            )
        size = fs.getFileStatus(path).getLen()
        if window_file.bytes >= 0 and size != window_file.bytes:
            raise ManifestError(
                f"window {window.label}: file {window_file.uri} has {size} bytes, the manifest says "
                f"{window_file.bytes}; re-run the extract task for this window"
            )


def read_window(
    spark: SparkSession, window: Window, table: str, *, keep_before_images: bool = False
) -> DataFrame:
    """Return a window's rows with target column names and types, unchecked (``check_rows`` checks them).

    Columns: the captured columns cast to their target types, then ``_cdc_start_lsn``,
    ``_cdc_seqval``, ``_cdc_operation`` and ``_cdc_commit_time``.

    :param keep_before_images: keep every update before-image (a change log keeps every change row).
    """
    frame = spark.read.parquet(*[f.uri for f in window.files])
    return _target_columns(spark, window, table, frame, keep_before_images=keep_before_images)


@dataclass(frozen=True)
class CheckedWindow:
    """A window as ``check_rows`` read it: its rows, ready for the MERGE, and its key bounds.

    :param rows: the rows as ``read_window`` returns them (the Parquet schema is not read again).
    :param key_bounds: the lowest and highest value of the first key column, None when it is not a
        whole number (``key_filter.source_key_range``).
    """

    rows: DataFrame
    key_bounds: tuple[int, int] | None


def check_rows(spark: SparkSession, window: Window, table: str) -> CheckedWindow:
    """Check a window's columns and row count; return its rows and the bounds of its first key column.

    The files' Parquet footers give the row count and, for a whole-number first key column, its
    bounds (the MERGE's key range: ``key_filter``), with no row read (``parquet_footers``); when a
    footer lacks them, one Spark job reads them from the rows. The bounds cover every row, dropped
    before-images included: those carry the key of the after-image kept beside them.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, IntegralType

    uris = [f.uri for f in window.files]
    frame = spark.read.parquet(*uris)
    rows = _target_columns(spark, window, table, frame)  # the columns are all there
    present = {name.lower(): name for name in frame.columns}
    key = present.get(window.manifest.key_columns[0].lower()) if window.manifest.key_columns else None
    key_type = frame.schema[key].dataType if key is not None else None
    whole = isinstance(key_type, IntegralType) or (isinstance(key_type, DecimalType) and key_type.scale == 0)
    footers = footer_figures(spark, uris, key if whole else None)
    if footers is not None:
        _check_row_count(window, footers.rows)
        return CheckedWindow(rows, footers.key_bounds)
    if not whole:
        _check_row_count(window, frame.count())
        return CheckedWindow(rows, None)
    row = frame.agg(F.count(F.lit(1)), F.min(F.col(quote(key))), F.max(F.col(quote(key)))).first()
    _check_row_count(window, row[0])
    return CheckedWindow(rows, None if row[1] is None else (int(row[1]), int(row[2])))


def _check_row_count(window: Window, actual: int) -> None:
    if actual != window.manifest.row_count:
        raise ManifestError(
            f"window {window.label}: the Parquet files hold {actual} rows, the manifest {window.uri} "
            f"says {window.manifest.row_count}; re-run the extract task for this window"
        )


def _target_columns(
    spark: SparkSession, window: Window, table: str, frame: DataFrame, *, keep_before_images: bool = False
) -> DataFrame:
    """Select a window's Parquet rows with target column names and types (``read_window``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    present = {name.lower(): name for name in frame.columns}
    selected = []
    for column in window.manifest.columns:
        name = column["name"]
        if name.lower() not in present:
            raise ManifestError(
                f"window {window.label}: column {name} of the manifest is not in the Parquet files"
            )
        source = F.col(quote(present[name.lower()]))
        target_type = spark_type(column, table)
        if target_type == "TIMESTAMP_NTZ" and isinstance(
            frame.schema[present[name.lower()]].dataType, LongType
        ):
            # datetime2(7): nanoseconds since the epoch (spark.sql.legacy.parquet.nanosAsLong);
            # floor to microseconds (exact integer arithmetic, also before 1970).
            # Divide as decimal: "/" on longs is a double division, which is off by a
            # microsecond for present-day values.
            whole = (source - F.pmod(source, F.lit(1000))).cast("decimal(38,0)")
            micros = (whole / F.lit(1000)).cast("long")
            source = F.timestamp_micros(micros).cast("timestamp_ntz")
        spark_sql_type = target_type.replace("TIMESTAMP_NTZ", "timestamp_ntz")
        if present[name.lower()] == name and _same_type(frame.schema[name].dataType, spark_sql_type):
            # The Parquet column as it is: no new attribute for it (Spark plans a checkpoint's
            # partitioning by key with the scan's attributes: net_effect_frame.checkpointed_net_effect).
            selected.append(source)
        else:
            selected.append(source.cast(spark_sql_type).alias(name))
    for meta in ("__$start_lsn", "__$seqval", "__$operation", "__$commit_time"):
        if meta not in present:
            raise ManifestError(f"window {window.label}: column {meta} is missing from the Parquet files")
    if "__$update_mask" in present and not keep_before_images:
        needed = before_image_needed(window, F.col(quote(present["__$update_mask"])))
        if needed is not None:
            frame = frame.where(needed)
    selected += [
        F.col(quote("__$start_lsn")).alias(START_LSN),
        F.col(quote("__$seqval")).alias(SEQVAL),
        F.col(quote("__$operation")).cast("int").alias(OPERATION),
        F.col(quote("__$commit_time")).cast("timestamp").alias(COMMIT_TIME),
    ]
    return frame.select(*selected)


def _same_type(data_type: Any, sql_type: str) -> bool:
    """Say whether a Parquet column's Spark type is the SQL type named, so that no cast is needed."""
    return bool(data_type.simpleString().lower() == sql_type.lower().replace(" ", ""))


def key_ordinals(window: Window) -> list[int] | None:
    """Return the update-mask bit positions (``ordinal``) of the window's key columns, or None if unknown."""
    by_name = {c["name"].lower(): c.get("ordinal") for c in window.manifest.columns}
    ordinals = [by_name.get(k.lower()) for k in window.manifest.key_columns]
    if not ordinals or not all(isinstance(o, int) and o >= 1 for o in ordinals):
        return None
    return ordinals  # type: ignore[return-value]


def before_image_needed(window: Window, update_mask: Column) -> Column | None:
    """Return a condition that keeps every row except update before-images that cannot matter.

    A before-image (operation 3) only decides the net effect when its update changed the key: then
    it is the last word on the old key. When the update left the key alone, the after-image at the
    same position (operation 4, sorting after it) always wins. SQL Server's ``__$update_mask`` has
    the bit of every column the update changed (bit ``ordinal - 1``, counted from the last byte),
    so before-images whose mask has no key column's bit set are dropped before the shuffle. Rows
    without a mask, and windows whose manifest lacks key ordinals, are all kept. The bit is read from
    the mask's hex digits (``conv`` to a number costs a tenth of a 1M-row window's read time).
    """
    from pyspark.sql import functions as F

    ordinals = key_ordinals(window)
    if window.manifest.kind != "changes" or ordinals is None:
        return None
    hex_mask = F.hex(update_mask)  # two hex digits per byte, ordinal 1 in the last byte
    key_changed = F.lit(False)
    for ordinal in ordinals:
        byte_from_end, bit = divmod(ordinal - 1, 8)
        # The hex digit holding the bit: the byte's second digit for bits 0-3, its first for 4-7.
        digit = F.substring(hex_mask, -2 * byte_from_end - (1 if bit < 4 else 2), 1)
        with_bit = [f"{value:X}" for value in range(16) if value >> (bit % 4) & 1]
        # A mask too short to hold the bit counts as changed: keep the row.
        key_changed = key_changed | (F.length(update_mask) <= byte_from_end) | digit.isin(with_bit)
    return (F.col(quote("__$operation")) != UPDATE_BEFORE) | update_mask.isNull() | key_changed


def empty_changes(spark: SparkSession, window: Window, column_types: Mapping[str, str]) -> DataFrame:
    """Return an empty frame shaped as ``read_window`` returns the window's rows.

    :param column_types: lower-cased column name -> Spark SQL type of the target column.
    """
    names = [c["name"] for c in window.manifest.columns]
    types = [column_types[n.lower()] for n in names]
    select = ", ".join(
        [f"CAST(NULL AS {t}) AS {quote(n)}" for n, t in zip(names, types, strict=True)]
        + [f"CAST(NULL AS BINARY) AS {START_LSN}", f"CAST(NULL AS BINARY) AS {SEQVAL}"]
        + [f"CAST(NULL AS INT) AS {OPERATION}", f"CAST(NULL AS TIMESTAMP) AS {COMMIT_TIME}"]
    )
    return spark.sql(f"SELECT {select} WHERE false")
