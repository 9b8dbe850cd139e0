"""PySpark application: merge CDC windows (Parquet + ``_manifest.json``) into Apache Iceberg tables.

Run it with ``spark-submit`` (``SparkSubmitOperator``); get its path from
``airflow_provider_sqlserver_cdc.spark.MERGE_JOB_PATH``. The file is self-contained: it imports
only the standard library and PySpark, so it runs under the cluster's own PySpark without the
provider installed there, and needs no ``--py-files``. PySpark is imported lazily, so Airflow
code can import the pure helpers (``manifest_uris``) without PySpark.

Usage::

    spark-submit merge_job.py --manifest URI [--manifest URI ...] --namespace CATALOG.NAMESPACE
        [--table-name-template '{schema}_{table}'] [--target CAPTURE_INSTANCE=CATALOG.NS.TABLE]
        [--delete-mode soft|hard] [--write-mode merge-on-read|copy-on-write]
        [--table-property KEY=VALUE ...]

``--manifest`` takes a manifest URI, a window directory, or the JSON the extract task pushed to
XCom (a string, an object with ``manifest_uri``, or a list of those). See ``docs/merge-job.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

LOG = logging.getLogger("sqlserver_cdc.merge_job")

MANIFEST_NAME = "_manifest.json"
FORMAT_VERSION = 1
RESULT_MARKER = "SQLSERVER_CDC_MERGE_RESULT"
LSN_PATTERN = re.compile(r"^0x[0-9A-F]{20}$")
LSN_ZERO = "0x" + "0" * 20

#: Snapshot-summary keys the job writes with every commit (suffix: capture instance name).
SUMMARY_PREFIX = "sqlserver-cdc."
SUMMARY_RANGES = SUMMARY_PREFIX + "applied-lsn-ranges."
SUMMARY_MAX_LSN = SUMMARY_PREFIX + "max-applied-lsn."

SOURCE_META_COLUMNS = ("__$start_lsn", "__$seqval", "__$operation", "__$update_mask", "__$commit_time")
START_LSN = "_cdc_start_lsn"
SEQVAL = "_cdc_seqval"
OPERATION = "_cdc_operation"
COMMIT_TIME = "_cdc_commit_time"
DELETED = "_cdc_deleted"
TARGET_META_COLUMNS = (
    (START_LSN, "BINARY", False),
    (SEQVAL, "BINARY", False),
    (OPERATION, "INT", False),
    (COMMIT_TIME, "TIMESTAMP", True),
    (DELETED, "BOOLEAN", False),
)
POSITION_COLUMNS = (START_LSN, SEQVAL, OPERATION)
DELETING_OPERATIONS = (1, 3)  # same rule as net_effect.DELETING_OPERATIONS
DELETE_MODES = ("soft", "hard")
WRITE_MODES = ("copy-on-write", "merge-on-read")


class MergeJobError(Exception):
    """A problem the user has to fix; the message says what, where and what to do."""


class ManifestError(MergeJobError):
    """A window's manifest or files do not match the window format."""


class SchemaEvolutionError(MergeJobError):
    """A window's schema cannot be applied to the target table."""


# --------------------------------------------------------------------------- window references


def manifest_uris(value: Any) -> list[str]:
    """Return manifest URIs from what an extract task pushed to XCom (or a plain URI).

    :param value: a manifest URI, a window directory, JSON text of any accepted shape, an object
        with ``manifest_uri`` (or ``manifest``), or a list of any of these.
    """
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("[", "{", '"'):
            try:
                return manifest_uris(json.loads(text))
            except json.JSONDecodeError as err:
                raise MergeJobError(f"window reference looks like JSON but does not parse: {err}") from None
        if not text:
            return []
        return [
            text
            if text.endswith("/" + MANIFEST_NAME) or text == MANIFEST_NAME
            else text.rstrip("/") + "/" + MANIFEST_NAME
        ]
    if isinstance(value, dict):
        for key in ("manifest_uri", "manifest"):
            if isinstance(value.get(key), str):
                return manifest_uris(value[key])
        raise MergeJobError(
            f"window description has no 'manifest_uri': keys are {sorted(value)}; pass the extract task's XCom"
        )
    if isinstance(value, list | tuple):
        uris: list[str] = []
        for item in value:
            uris.extend(uri for uri in manifest_uris(item) if uri not in uris)
        return uris
    raise MergeJobError(f"cannot read a manifest URI from a {type(value).__name__}: {value!r}")


# --------------------------------------------------------------------------- LSN ranges


def lsn_to_int(lsn: str) -> int:
    """Return the integer value of a ``0x`` + 20 hex digit LSN."""
    if not isinstance(lsn, str) or not LSN_PATTERN.match(lsn):
        raise ValueError(f"not an LSN in 0x + 20 upper-case hex digits form: {lsn!r}")
    return int(lsn[2:], 16)


def lsn_from_int(value: int) -> str:
    """Return the ``0x`` + 20 hex digit form of an LSN integer."""
    return f"0x{value:020X}"


def parse_ranges(text: str | None) -> list[tuple[int, int]]:
    """Parse ``0xA-0xB,0xC-0xD`` (inclusive LSN ranges) from a snapshot summary value."""
    ranges = []
    for part in (text or "").split(","):
        if part.strip():
            first, _, last = part.strip().partition("-")
            ranges.append((lsn_to_int(first), lsn_to_int(last)))
    return sorted(ranges)


def format_ranges(ranges: Iterable[tuple[int, int]]) -> str:
    """Format inclusive LSN ranges for a snapshot summary value."""
    return ",".join(f"{lsn_from_int(first)}-{lsn_from_int(last)}" for first, last in sorted(ranges))


def add_range(ranges: Iterable[tuple[int, int]], first: int, last: int) -> list[tuple[int, int]]:
    """Return the ranges with ``[first, last]`` added; overlapping or adjacent ranges are joined."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted([*ranges, (first, last)]):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def covers(ranges: Iterable[tuple[int, int]], first: int, last: int) -> bool:
    """Whether ``[first, last]`` lies inside one of the (joined) ranges."""
    return any(lo <= first and last <= hi for lo, hi in ranges)


# --------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class WindowFile:
    """One Parquet file of a window: absolute URI, rows and bytes as the manifest states them."""

    uri: str
    rows: int
    bytes: int


@dataclass(frozen=True)
class Window:
    """A validated window manifest."""

    uri: str
    directory: str
    kind: str
    capture_instance: str
    from_lsn: str
    to_lsn: str
    source: dict[str, Any]
    key_columns: tuple[str, ...]
    columns: tuple[dict[str, Any], ...]
    files: tuple[WindowFile, ...]
    row_count: int
    document: dict[str, Any] = field(repr=False, compare=False)

    @property
    def label(self) -> str:
        """Short name for messages: capture instance and LSN bounds."""
        return f"{self.capture_instance} {self.from_lsn}_{self.to_lsn}"

    @property
    def lsn_range(self) -> tuple[int, int]:
        """The inclusive LSN range the window brings up to date; a snapshot covers every LSN up to its own."""
        first = 0 if self.kind == "snapshot" else lsn_to_int(self.from_lsn)
        return first, lsn_to_int(self.to_lsn)


def _require(condition: bool, uri: str, problem: str) -> None:
    if not condition:
        raise ManifestError(
            f"invalid window manifest {uri}: {problem}. The window was not applied; re-run the extract "
            "task for this window (it rewrites the window and its manifest)."
        )


def parse_manifest(text: str, uri: str) -> Window:
    """Validate a ``_manifest.json`` document (format_version 1) and return the window it describes.

    :param text: the JSON text.
    :param uri: where it was read from; file paths are resolved against its directory.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ManifestError(
            f"window manifest {uri} is not valid JSON ({err}); re-run the extract task"
        ) from None
    _require(isinstance(doc, dict), uri, "the document is not a JSON object")
    _require(
        doc.get("format_version") == FORMAT_VERSION,
        uri,
        f"format_version is {doc.get('format_version')!r}, this merge job reads {FORMAT_VERSION}",
    )
    kind = doc.get("kind")
    _require(kind in ("changes", "snapshot"), uri, f"kind is {kind!r}, expected 'changes' or 'snapshot'")
    ci = doc.get("capture_instance")
    _require(isinstance(ci, str) and bool(ci), uri, "capture_instance is missing")
    for bound in ("from_lsn", "to_lsn"):
        value = doc.get(bound)
        _require(
            isinstance(value, str) and bool(LSN_PATTERN.match(value)), uri, f"{bound} {value!r} is not an LSN"
        )
    _require(lsn_to_int(doc["from_lsn"]) <= lsn_to_int(doc["to_lsn"]), uri, "from_lsn is above to_lsn")
    columns = doc.get("columns")
    _require(isinstance(columns, list) and bool(columns), uri, "columns is missing or empty")
    names = []
    for column in columns:
        _require(
            isinstance(column, dict)
            and isinstance(column.get("name"), str)
            and isinstance(column.get("sql_type"), str),
            uri,
            f"column entry {column!r} needs 'name' and 'sql_type'",
        )
        _require(
            not column["name"].startswith("_cdc_"),
            uri,
            f"column {column['name']} uses the reserved _cdc_ prefix",
        )
        names.append(column["name"])
    _require(len({n.lower() for n in names}) == len(names), uri, f"duplicate column names in {names}")
    keys = doc.get("key_columns")
    _require(
        isinstance(keys, list) and bool(keys),
        uri,
        f"capture instance {ci} has no key columns; give the table a primary key or create the capture "
        "instance with @index_name",
    )
    lower_names = {n.lower() for n in names}
    for key in keys:
        _require(
            isinstance(key, str) and key.lower() in lower_names,
            uri,
            f"key column {key!r} is not among the columns",
        )
    files = doc.get("files")
    _require(isinstance(files, list), uri, "files is missing")
    directory = uri[: -len(MANIFEST_NAME)].rstrip("/") if uri.endswith(MANIFEST_NAME) else uri.rstrip("/")
    window_files = []
    for entry in files:
        _require(
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("rows"), int)
            and entry["rows"] >= 0,
            uri,
            f"file entry {entry!r} needs 'path' and a non-negative 'rows'",
        )
        path = entry["path"]
        _require(
            not path.startswith("/") and ":" not in path and ".." not in path.split("/"),
            uri,
            f"file path {path!r} must be relative to the window directory",
        )
        window_files.append(WindowFile(f"{directory}/{path}", entry["rows"], int(entry.get("bytes", -1))))
    row_count = doc.get("row_count")
    _require(isinstance(row_count, int) and row_count >= 0, uri, f"row_count {row_count!r} is not a count")
    listed = sum(f.rows for f in window_files)
    _require(listed == row_count, uri, f"row_count is {row_count} but the files list {listed} rows")
    source = doc.get("source") if isinstance(doc.get("source"), dict) else {}
    return Window(
        uri=uri,
        directory=directory,
        kind=kind,
        capture_instance=ci,
        from_lsn=doc["from_lsn"],
        to_lsn=doc["to_lsn"],
        source=source,
        key_columns=tuple(keys),
        columns=tuple(columns),
        files=tuple(window_files),
        row_count=row_count,
        document=doc,
    )


# --------------------------------------------------------------------------- target schema

_STRING_TYPES = frozenset(
    {"char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml", "sysname", "uniqueidentifier"}
    | {"time", "datetimeoffset", "sql_variant", "hierarchyid", "geography", "geometry"}
)
_BINARY_TYPES = frozenset({"binary", "varbinary", "image", "rowversion", "timestamp"})
_ARROW_FALLBACK = {
    "bool": "BOOLEAN",
    "int8": "INT",
    "int16": "INT",
    "int32": "INT",
    "int64": "BIGINT",
    "float": "FLOAT",
    "float32": "FLOAT",
    "double": "DOUBLE",
    "float64": "DOUBLE",
    "string": "STRING",
    "large_string": "STRING",
    "binary": "BINARY",
    "large_binary": "BINARY",
    "date32": "DATE",
    "date32[day]": "DATE",
}


def is_nanosecond_column(column: dict[str, Any]) -> bool:
    """Whether the window stores this column as Parquet timestamp[ns] (datetime2(7))."""
    arrow = str(column.get("arrow_type", "")).replace(" ", "")
    if arrow.startswith("timestamp["):
        return arrow.startswith("timestamp[ns")
    return column["sql_type"].lower() == "datetime2" and column.get("scale", 7) == 7


def spark_type(column: dict[str, Any], table: str) -> str:
    """Return the Spark SQL type (as Iceberg stores it) of a manifest column.

    Integers narrower than 32 bits become INT (Iceberg has no smaller integers); datetime and
    datetime2 become TIMESTAMP_NTZ (Iceberg ``timestamp``, microseconds: datetime2(7) loses its
    last digit); time and datetimeoffset stay the strings the window holds (offset kept).
    """
    sql_type = column["sql_type"].lower()
    if sql_type == "bit":
        return "BOOLEAN"
    if sql_type in ("tinyint", "smallint", "int"):
        return "INT"
    if sql_type == "bigint":
        return "BIGINT"
    if sql_type in ("decimal", "numeric"):
        precision, scale = column.get("precision"), column.get("scale")
        if not isinstance(precision, int) or not isinstance(scale, int) or not 1 <= precision <= 38:
            raise SchemaEvolutionError(
                f"target table {table}: column {column['name']} is {sql_type} without a valid precision/scale "
                f"({precision!r}, {scale!r}) in the manifest"
            )
        return f"DECIMAL({precision},{scale})"
    if sql_type == "money":
        return "DECIMAL(19,4)"
    if sql_type == "smallmoney":
        return "DECIMAL(10,4)"
    if sql_type == "real":
        return "FLOAT"
    if sql_type == "float":
        precision = column.get("precision")
        return "FLOAT" if isinstance(precision, int) and precision <= 24 else "DOUBLE"
    if sql_type == "date":
        return "DATE"
    if sql_type in ("datetime", "smalldatetime", "datetime2"):
        return "TIMESTAMP_NTZ"
    if sql_type in _STRING_TYPES:
        return "STRING"
    if sql_type in _BINARY_TYPES:
        return "BINARY"
    arrow = str(column.get("arrow_type", "")).replace(" ", "")
    if arrow in _ARROW_FALLBACK:
        return _ARROW_FALLBACK[arrow]
    decimal = re.match(r"^decimal128\((\d+),(\d+)\)$", arrow)
    if decimal:
        return f"DECIMAL({decimal.group(1)},{decimal.group(2)})"
    raise SchemaEvolutionError(
        f"target table {table}: column {column['name']} has SQL type {column['sql_type']!r} "
        f"(arrow {column.get('arrow_type')!r}) that the merge job cannot map; cast it in the source "
        "or leave it out of the capture instance's @captured_column_list"
    )


def _normalize(spark_sql_type: str) -> str:
    text = spark_sql_type.upper().replace(" ", "")
    return {"INTEGER": "INT", "LONG": "BIGINT", "REAL": "FLOAT", "BOOL": "BOOLEAN", "SHORT": "INT"}.get(
        text, text
    )


def widening(table_type: str, window_type: str) -> str | None:
    """Compare a table column type with the window's type.

    :return: ``None`` when the table type holds the window's values as is, else the type the
        table column must be widened to.
    :raises ValueError: when Iceberg cannot widen the table type to hold the window's values.
    """
    have, want = _normalize(table_type), _normalize(window_type)
    if have == want:
        return None
    if (have, want) in (("BIGINT", "INT"), ("DOUBLE", "FLOAT")):
        return None
    if (have, want) in (("INT", "BIGINT"), ("FLOAT", "DOUBLE")):
        return want
    dec_have = re.match(r"^DECIMAL\((\d+),(\d+)\)$", have)
    dec_want = re.match(r"^DECIMAL\((\d+),(\d+)\)$", want)
    if dec_have and dec_want and dec_have.group(2) == dec_want.group(2):
        return None if int(dec_have.group(1)) >= int(dec_want.group(1)) else want
    raise ValueError(f"{have} cannot hold {want}")


def quote(identifier: str) -> str:
    """Quote one identifier part for Spark SQL."""
    return "`" + identifier.replace("`", "``") + "`"


def quote_table(name: str) -> str:
    """Quote a dotted ``catalog.namespace.table`` name part by part."""
    return ".".join(quote(part) for part in name.split("."))


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class MergeSettings:
    """What the job was asked to do."""

    manifests: tuple[str, ...]
    namespace: str | None = None
    table_name_template: str = "{schema}_{table}"
    targets: dict[str, str] = field(default_factory=dict)
    delete_mode: str = "soft"
    write_mode: str = "merge-on-read"
    table_properties: dict[str, str] = field(default_factory=dict)

    def target_for(self, window: Window) -> str:
        """Return the dotted target table name for a window."""
        if window.capture_instance in self.targets:
            return self.targets[window.capture_instance]
        if not self.namespace:
            raise MergeJobError(
                f"no target table for capture instance {window.capture_instance}: pass --namespace "
                f"CATALOG.NAMESPACE or --target {window.capture_instance}=CATALOG.NAMESPACE.TABLE"
            )
        values = {
            "capture_instance": window.capture_instance,
            "schema": window.source.get("schema", ""),
            "table": window.source.get("table", ""),
            "database": window.source.get("database", ""),
        }
        try:
            name = self.table_name_template.format(**values)
        except (KeyError, IndexError) as err:
            raise MergeJobError(
                f"--table-name-template {self.table_name_template!r} uses unknown field {err}"
            ) from None
        if not name.strip("_") or "." in name:
            raise MergeJobError(
                f"--table-name-template {self.table_name_template!r} gives {name!r} for {window.capture_instance}; "
                "the manifest's source may lack schema/table: pass --target for it"
            )
        return f"{self.namespace}.{name}"


def job_table_properties(write_mode: str) -> dict[str, str]:
    """Return the Iceberg table properties the job itself sets on the tables it creates."""
    return {
        "format-version": "2",
        "write.merge.mode": write_mode,
        "write.update.mode": write_mode,
        "write.delete.mode": write_mode,
    }


def parse_table_properties(items: Iterable[str]) -> dict[str, str]:
    """Parse ``KEY=VALUE`` Iceberg table properties for the tables the job creates.

    The job's own properties (``job_table_properties``, ``--write-mode`` for the write modes, and the
    ``sqlserver-cdc.`` ones) cannot be given, nor quotes or backslashes, which the ``TBLPROPERTIES``
    clause would have to escape.
    """
    properties: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise MergeJobError(
                f"table property {item!r}: expected KEY=VALUE, e.g. write.target-file-size-bytes=134217728"
            )
        if key.lower() in job_table_properties("") or key.lower().startswith(SUMMARY_PREFIX):
            raise MergeJobError(
                f"table property {key!r} is set by the merge job itself (use --write-mode for the write modes)"
            )
        if any(c in item for c in "'\\"):
            raise MergeJobError(f"table property {item!r}: quotes and backslashes are not supported")
        properties[key] = value.strip()
    return properties


def parse_args(argv: Sequence[str]) -> MergeSettings:
    """Parse the command line of the job."""
    parser = argparse.ArgumentParser(
        prog="merge_job.py", description="Merge CDC windows into Iceberg tables."
    )
    parser.add_argument(
        "--manifest", action="append", default=[], help="manifest URI, window dir or XCom JSON"
    )
    parser.add_argument("--namespace", help="CATALOG.NAMESPACE of the target tables")
    parser.add_argument("--table-name-template", default="{schema}_{table}")
    parser.add_argument("--target", action="append", default=[], help="CAPTURE_INSTANCE=CATALOG.NS.TABLE")
    parser.add_argument("--delete-mode", choices=DELETE_MODES, default="soft")
    parser.add_argument("--write-mode", choices=WRITE_MODES, default="merge-on-read")
    parser.add_argument(
        "--table-property",
        action="append",
        default=[],
        help="KEY=VALUE Iceberg table property for the tables the job creates",
    )
    args = parser.parse_args(list(argv))
    try:
        properties = parse_table_properties(args.table_property)
    except MergeJobError as err:
        parser.error(str(err))
    targets = {}
    for item in args.target:
        ci, sep, table = item.partition("=")
        if not sep or not ci or not table:
            parser.error(f"--target {item!r}: expected CAPTURE_INSTANCE=CATALOG.NAMESPACE.TABLE")
        targets[ci] = table
    return MergeSettings(
        manifests=tuple(manifest_uris(args.manifest)),
        namespace=args.namespace,
        table_name_template=args.table_name_template,
        targets=targets,
        delete_mode=args.delete_mode,
        write_mode=args.write_mode,
        table_properties=properties,
    )


# --------------------------------------------------------------------------- storage access (Hadoop FS)


def _filesystem(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def read_manifest(spark: SparkSession, uri: str) -> Window:
    """Read and validate one manifest through Spark's Hadoop file systems (local, HDFS, S3A, ...)."""
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
    return parse_manifest(text, uri)


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


# --------------------------------------------------------------------------- reading windows


def read_window(spark: SparkSession, window: Window, table: str, check_count: bool = True) -> DataFrame:
    """Return a window's rows with target column names and types, checking the row count.

    Columns: the captured columns cast to their target types, then ``_cdc_start_lsn``,
    ``_cdc_seqval``, ``_cdc_operation`` and ``_cdc_commit_time``.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    frame = spark.read.parquet(*[f.uri for f in window.files])
    if check_count:
        actual = frame.count()
        if actual != window.row_count:
            raise ManifestError(
                f"window {window.label}: the Parquet files hold {actual} rows, the manifest {window.uri} "
                f"says {window.row_count}; re-run the extract task for this window"
            )
    present = {name.lower(): name for name in frame.columns}
    selected = []
    for column in window.columns:
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
        selected.append(source.cast(target_type.replace("TIMESTAMP_NTZ", "timestamp_ntz")).alias(name))
    for meta in ("__$start_lsn", "__$seqval", "__$operation", "__$commit_time"):
        if meta not in present:
            raise ManifestError(f"window {window.label}: column {meta} is missing from the Parquet files")
    if "__$update_mask" in present:
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


def key_ordinals(window: Window) -> list[int] | None:
    """Return the update-mask bit positions (``ordinal``) of the window's key columns, or None if unknown."""
    by_name = {c["name"].lower(): c.get("ordinal") for c in window.columns}
    ordinals = [by_name.get(k.lower()) for k in window.key_columns]
    if not all(isinstance(o, int) and o >= 1 for o in ordinals):
        return None
    return ordinals  # type: ignore[return-value]


def before_image_needed(window: Window, update_mask: Column) -> Column | None:
    """Return a condition that keeps every row except update before-images that cannot matter.

    A before-image (operation 3) only decides the net effect when its update changed the key: then
    it is the last word on the old key. When the update left the key alone, the after-image at the
    same position (operation 4, sorting after it) always wins. SQL Server's ``__$update_mask`` has
    the bit of every column the update changed (bit ``ordinal - 1``, counted from the last byte),
    so before-images whose mask has no key column's bit set are dropped before the shuffle. Rows
    without a mask, and windows whose manifest lacks key ordinals, are all kept.
    """
    from pyspark.sql import functions as F

    ordinals = key_ordinals(window)
    if window.kind != "changes" or ordinals is None:
        return None
    hex_mask = F.hex(update_mask)  # two hex digits per byte, ordinal 1 in the last byte
    key_changed = F.lit(False)
    for ordinal in ordinals:
        byte_from_end, bit = divmod(ordinal - 1, 8)
        byte = F.conv(F.substring(hex_mask, -2 * byte_from_end - 2, 2), 16, 10).cast("int")
        # A mask too short to hold the bit (byte is NULL) counts as changed: keep the row.
        key_changed = key_changed | F.coalesce(byte.bitwiseAND(1 << bit) != 0, F.lit(True))
    return (F.col(quote("__$operation")) != 3) | update_mask.isNull() | key_changed


RANK = "_cdc_rank"


def ranked_changes(changes: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """Number each key's changes from the newest: ``_cdc_rank`` 1 is the one the net effect keeps.

    Newest means the highest ``(_cdc_start_lsn, _cdc_seqval, _cdc_operation)``. A window function
    (one shuffle by key, one sort) rather than ``max(struct(...))``, which Spark can only run as a
    sort-based aggregate with a partial and a final sort; its output stays partitioned and sorted
    by key, which the MERGE join reuses.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest_first = Window.partitionBy(*[F.col(quote(k)) for k in key_columns]).orderBy(
        *[F.col(c).desc() for c in POSITION_COLUMNS]
    )
    return changes.withColumn(RANK, F.row_number().over(latest_first))


def latest_per_key(ranked: DataFrame) -> DataFrame:
    """Keep rank 1 of ``ranked_changes``, with ``_cdc_deleted`` true for a delete or a before-image."""
    from pyspark.sql import functions as F

    return (
        ranked.where(F.col(RANK) == 1)
        .drop(RANK)
        .withColumn(DELETED, F.col(OPERATION).isin(*DELETING_OPERATIONS))
    )


def net_effect_frame(changes: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """Apply the net-effect rule (see ``net_effect.py``) to a DataFrame of changes: one row per key."""
    return latest_per_key(ranked_changes(changes, key_columns))


@contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set Spark SQL settings for the duration of the block, then put back what was there."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@contextmanager
def checkpointed_net_effect(changes: DataFrame, key_columns: Sequence[str]) -> Iterator[DataFrame]:
    """Yield the net effect of ``changes`` over a local checkpoint of the ranked changes; release it afterwards.

    The yielded frame keeps rank 1 over the checkpointed ranked changes. That is a selective filter
    over a materialized leaf: the shape Spark's runtime filter needs to build a Bloom filter of the
    source keys (``runtime_key_filter_conf``) and drop, in the target scan, the rows no change
    touches before they are shuffled and sorted for the join. A window function between the filter
    and the Parquet scan would hide that shape. A local checkpoint keeps the rows as they are
    (memory, then disk), with their partitioning by key for the join; Spark's columnar cache, the
    other such leaf, costs more to build than the filter saves on large windows (docs/merge-job.md).
    Like any local checkpoint it is lost with an executor: the MERGE then fails before it commits,
    and a retry is safe.
    """
    ranked = ranked_changes(changes, key_columns).localCheckpoint(eager=True)
    try:
        yield latest_per_key(ranked)
    finally:
        try:
            ranked._jdf.queryExecution().analyzed().rdd().unpersist(False)
        except Exception as err:  # an internal Spark API: the blocks go with the session anyway
            LOG.warning("could not release the local checkpoint of the ranked changes (%s)", err)


# --------------------------------------------------------------------------- table state


def table_exists(spark: SparkSession, table: str) -> bool:
    """Whether the dotted table name resolves in its catalog."""
    try:
        return bool(spark.catalog.tableExists(table))
    except Exception:
        return False


def iceberg_table(spark: SparkSession, table: str) -> Any:
    """Return the Iceberg ``Table`` (Java API, through py4j) behind a dotted Spark table name."""
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, quote_table(table))


def applied_state(spark: SparkSession, table: str) -> dict[str, str]:
    """Return the job's snapshot-summary entries of the newest snapshot, in the main branch's history, holding them.

    Reads table metadata only (no Spark job).
    """
    iceberg = iceberg_table(spark, table)
    snapshot = iceberg.currentSnapshot()
    while snapshot is not None:
        summary = snapshot.summary()
        state = {str(k): str(summary.get(k)) for k in summary.keySet() if str(k).startswith(SUMMARY_PREFIX)}
        if state:
            return state
        parent_id = snapshot.parentId()
        snapshot = iceberg.snapshot(parent_id) if parent_id is not None else None
    return {}


def with_commit_properties(
    spark: SparkSession, properties: dict[str, str], action: Callable[[], None]
) -> None:
    """Run ``action`` so that the Iceberg commit it makes carries ``properties`` in its snapshot summary.

    Uses Iceberg's public ``CommitMetadata.withCommitProperties``; the commit runs on the JVM thread
    that serves this Python thread (PySpark's pinned-thread mode), which is where the thread-local
    properties are set.
    """
    jvm = spark.sparkContext._jvm
    java_properties = jvm.java.util.HashMap()
    for key, value in properties.items():
        java_properties.put(key, value)

    class _Action:
        error: BaseException | None = None

        def call(self) -> None:
            try:
                action()
            except BaseException as err:
                self.error = err
                raise

        class Java:
            implements = ["java.util.concurrent.Callable"]

    runner = _Action()
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            java_properties, runner, jvm.java.lang.RuntimeException._java_lang_class
        )
    except Exception:
        if runner.error is not None:
            raise runner.error from None
        raise


# --------------------------------------------------------------------------- target plans


@dataclass
class TargetPlan:
    """The windows going into one target table and the schema changes they need."""

    table: str
    windows: list[Window] = field(default_factory=list)
    skipped: list[Window] = field(default_factory=list)
    exists: bool = False
    state: dict[str, str] = field(default_factory=dict)
    add_columns: list[tuple[str, str, str]] = field(default_factory=list)  # name, type, comment
    widen_columns: list[tuple[str, str]] = field(default_factory=list)
    key_columns: tuple[str, ...] = ()
    column_types: dict[str, str] = field(default_factory=dict)  # lower name -> window type


def _comment(column: dict[str, Any]) -> str:
    sql_type = column["sql_type"]
    if sql_type.lower() in ("decimal", "numeric"):
        sql_type += f"({column.get('precision')},{column.get('scale')})"
    elif sql_type.lower() in ("datetime2", "time", "datetimeoffset"):
        sql_type += f"({column.get('scale')})"
    elif column.get("max_length") not in (None, 0) and sql_type.lower() in _STRING_TYPES | _BINARY_TYPES:
        length = column.get("max_length")
        sql_type += "(max)" if length == -1 else f"({length})"
    return "SQL Server " + sql_type


def plan_schema(spark: SparkSession | None, plan: TargetPlan, table_schema: dict[str, str] | None) -> None:
    """Work out the columns to add and widen; raise before anything is changed.

    :param table_schema: lower-cased column name -> Spark SQL type of the existing table, or None.
    """
    windows = plan.windows
    keys = tuple(windows[0].key_columns)
    for window in windows:
        if [k.lower() for k in window.key_columns] != [k.lower() for k in keys]:
            raise SchemaEvolutionError(
                f"target table {plan.table}: window {window.label} has key columns {list(window.key_columns)}, "
                f"other windows have {list(keys)}; give each key its own target with --target"
            )
        for column in window.columns:
            name = column["name"].lower()
            column_type = spark_type(column, plan.table)
            if column["name"].lower() in {k.lower() for k in keys} and is_nanosecond_column(column):
                raise SchemaEvolutionError(
                    f"target table {plan.table}: key column {column['name']} is datetime2(7); Iceberg in Spark "
                    "3.5 keeps microseconds, which could merge distinct keys. Use a key with datetime2(6) or less"
                )
            previous = plan.column_types.get(name)
            if previous is None:
                plan.column_types[name] = column_type
            else:
                try:
                    plan.column_types[name] = widening(previous, column_type) or previous
                except ValueError:
                    try:
                        widening(column_type, previous)
                    except ValueError:
                        raise SchemaEvolutionError(
                            f"target table {plan.table}: column {column['name']} is {previous} in one window "
                            f"and {column_type} in window {window.label}; merge these windows in separate runs "
                            "after fixing the type"
                        ) from None
                    plan.column_types[name] = column_type
    plan.key_columns = keys
    if table_schema is None:
        return
    identifier = (
        sorted(k.lower() for k in _identifier_fields(spark, plan.table)) if spark is not None else None
    )
    if identifier and identifier != sorted(k.lower() for k in keys):
        raise SchemaEvolutionError(
            f"target table {plan.table}: its identifier fields are {identifier} but the windows' key columns are "
            f"{list(keys)}; a changed key needs a new target table (--target) or a new snapshot into a new table"
        )
    comments = {c["name"].lower(): (c["name"], _comment(c)) for w in windows for c in w.columns}
    for name, window_type in plan.column_types.items():
        if name not in table_schema:
            plan.add_columns.append((comments[name][0], window_type, comments[name][1]))
            continue
        try:
            wider = widening(table_schema[name], window_type)
        except ValueError:
            raise SchemaEvolutionError(
                f"target table {plan.table}: column {comments[name][0]} is {table_schema[name]} in the table but "
                f"{window_type} in the window; Iceberg only widens INT->BIGINT, FLOAT->DOUBLE and DECIMAL "
                "precision. Rebuild the table from a new snapshot (or merge into a new --target)"
            ) from None
        if wider:
            plan.widen_columns.append((comments[name][0], wider))


def _identifier_fields(spark: SparkSession, table: str) -> list[str]:
    return [str(name) for name in iceberg_table(spark, table).schema().identifierFieldNames()]


def _table_schema(spark: SparkSession, table: str) -> dict[str, str]:
    return {f.name.lower(): f.dataType.simpleString() for f in spark.table(table).schema.fields}


def create_table(
    spark: SparkSession, plan: TargetPlan, write_mode: str, extra_properties: Mapping[str, str] | None = None
) -> None:
    """Create the target table with the windows' schema, metadata columns and identifier fields.

    :param extra_properties: further Iceberg table properties (``parse_table_properties``).
    """
    windows_columns: dict[str, dict[str, Any]] = {}
    for window in plan.windows:
        for column in window.columns:
            windows_columns.setdefault(column["name"].lower(), column)
    keys = {k.lower() for k in plan.key_columns}
    definitions = []
    for name, column in windows_columns.items():
        not_null = " NOT NULL" if name in keys else ""
        comment = _comment(column).replace("'", "")
        definitions.append(f"{quote(column['name'])} {plan.column_types[name]}{not_null} COMMENT '{comment}'")
    for name, sql_type, nullable in TARGET_META_COLUMNS:
        definitions.append(f"{name} {sql_type}{'' if nullable else ' NOT NULL'}")
    first = plan.windows[0]
    source = ".".join(str(first.source.get(k, "")) for k in ("database", "schema", "table"))
    properties = {
        **job_table_properties(write_mode),
        "sqlserver-cdc.source-table": source,
        **(extra_properties or {}),
    }
    props = ", ".join(f"'{k}'='{v.replace(chr(39), '')}'" for k, v in properties.items())
    LOG.info("creating target table %s (%s)", plan.table, write_mode)
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {quote_table(plan.table)} ({', '.join(definitions)}) "
        f"USING iceberg TBLPROPERTIES ({props})"
    )
    spark.sql(
        f"ALTER TABLE {quote_table(plan.table)} SET IDENTIFIER FIELDS "
        + ", ".join(quote(k) for k in plan.key_columns)
    )


def evolve_table(spark: SparkSession, plan: TargetPlan) -> None:
    """Apply the planned column additions and widenings."""
    for name, column_type, comment in plan.add_columns:
        LOG.info("target %s: adding column %s %s", plan.table, name, column_type)
        spark.sql(
            f"ALTER TABLE {quote_table(plan.table)} ADD COLUMN {quote(name)} {column_type} "
            f"COMMENT '{comment.replace(chr(39), '')}'"
        )
    for name, column_type in plan.widen_columns:
        LOG.info("target %s: widening column %s to %s", plan.table, name, column_type)
        spark.sql(f"ALTER TABLE {quote_table(plan.table)} ALTER COLUMN {quote(name)} TYPE {column_type}")


# --------------------------------------------------------------------------- MERGE


def _newer(left: str, right: str) -> str:
    fields_left = ", ".join(f"'{c}', {left}.{c}" for c in POSITION_COLUMNS)
    fields_right = ", ".join(f"'{c}', {right}.{c}" for c in POSITION_COLUMNS)
    return f"named_struct({fields_left}) > named_struct({fields_right})"


def merge_sql(
    table: str,
    source_view: str,
    columns: Sequence[str],
    key_columns: Sequence[str],
    hard: bool,
    key_range: KeyRange | None = None,
) -> str:
    """Return the MERGE INTO statement that applies net-effect rows newer than the target's rows.

    :param key_range: the range of the source's first key column: the target rows outside it cannot
        match, and saying so lets Spark filter the target scan (and Iceberg skip data files by their
        column bounds) before the join.
    """
    keys = {k.lower() for k in key_columns}
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in key_columns)
    if key_range is not None:
        on += " AND " + key_range.condition("t.")
    value_columns = [c for c in columns if c.lower() not in keys]
    meta = [c for c, _, _ in TARGET_META_COLUMNS]
    updates = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in (*value_columns, *meta))
    insert_columns = [*key_columns, *value_columns, *meta]
    insert = (
        f"INSERT ({', '.join(quote(c) for c in insert_columns)}) "
        f"VALUES ({', '.join('s.' + quote(c) for c in insert_columns)})"
    )
    newer = _newer("s", "t")
    clauses = []
    if hard:
        clauses.append(f"WHEN MATCHED AND {newer} AND s.{DELETED} THEN DELETE")
    clauses.append(f"WHEN MATCHED AND {newer} THEN UPDATE SET {updates}")
    clauses.append(
        f"WHEN NOT MATCHED AND NOT s.{DELETED} THEN {insert}" if hard else f"WHEN NOT MATCHED THEN {insert}"
    )
    return f"MERGE INTO {quote_table(table)} t USING {source_view} s ON {on} " + " ".join(clauses)


def snapshot_clause(snapshot_lsn: str, hard: bool) -> str:
    """Return the clause that retires target rows absent from a snapshot taken at ``snapshot_lsn``."""
    lsn = f"X'{snapshot_lsn[2:]}'"
    older = (
        f"named_struct('{START_LSN}', t.{START_LSN}, '{SEQVAL}', t.{SEQVAL}, '{OPERATION}', t.{OPERATION}) < "
        f"named_struct('{START_LSN}', {lsn}, '{SEQVAL}', {lsn}, '{OPERATION}', 2)"
    )
    if hard:
        return f" WHEN NOT MATCHED BY SOURCE AND {older} THEN DELETE"
    return (
        f" WHEN NOT MATCHED BY SOURCE AND {older} AND NOT t.{DELETED} THEN UPDATE SET "
        f"t.{START_LSN} = {lsn}, t.{SEQVAL} = {lsn}, t.{OPERATION} = 1, t.{DELETED} = true"
    )


def _state_after(state: dict[str, str], windows: Iterable[Window]) -> dict[str, str]:
    new_state = dict(state)
    for window in windows:
        ci = window.capture_instance
        ranges = add_range(parse_ranges(new_state.get(SUMMARY_RANGES + ci)), *window.lsn_range)
        new_state[SUMMARY_RANGES + ci] = format_ranges(ranges)
        new_state[SUMMARY_MAX_LSN + ci] = lsn_from_int(max(hi for _, hi in ranges))
    return new_state


INTEGER_KEY_TYPE = re.compile(r"^(INT|BIGINT|DECIMAL\(\d+,\s*0\))$")


@dataclass(frozen=True)
class KeyRange:
    """The lowest and highest value of the first key column among a MERGE's changes.

    :param sql_type: the column's Spark SQL type: INT, BIGINT or DECIMAL(p,0) (SQL Server's
        integer types and numeric/decimal with scale 0).
    """

    column: str
    lowest: int
    highest: int
    sql_type: str

    def condition(self, qualifier: str = "") -> str:
        """Return ``column BETWEEN lowest AND highest`` as Spark SQL, with literals of the column's type.

        Decimal bounds are cast to the column's type, so Spark compares without casting the column
        and can push the condition into the Iceberg scan.
        """
        low, high = str(self.lowest), str(self.highest)
        if self.sql_type.startswith("DECIMAL"):
            low, high = f"CAST({low} AS {self.sql_type})", f"CAST({high} AS {self.sql_type})"
        return f"{qualifier}{quote(self.column)} BETWEEN {low} AND {high}"


def source_key_range(changes: DataFrame, plan: TargetPlan) -> KeyRange | None:
    """Return the range of the first key column in ``changes``, if it holds whole numbers.

    Whole-number keys only (``INTEGER_KEY_TYPE``): their bounds are exact literals. One small Spark
    job that reads the key column of the windows.
    """
    from pyspark.sql import functions as F

    key = plan.key_columns[0]
    sql_type = plan.column_types.get(key.lower(), "").upper()
    if not INTEGER_KEY_TYPE.match(sql_type):
        return None
    row = changes.agg(F.min(F.col(quote(key))), F.max(F.col(quote(key)))).first()
    if row is None or row[0] is None:
        return None
    return KeyRange(key, int(row[0]), int(row[1]), sql_type)


#: Spark's default cap on a runtime Bloom filter (``spark.sql.optimizer.runtime.bloomFilter.maxNumBits``).
BLOOM_FILTER_MAX_BITS = 64 * 1024 * 1024


def runtime_key_filter_conf(change_rows: int) -> dict[str, str]:
    """Return the session settings for the MERGE statement that make Spark filter the target scan by key.

    They let Spark build a Bloom filter of the source keys and apply it to the target scan (see
    ``checkpointed_net_effect``), sized for ``change_rows`` keys at most (8 bits a key: about 2 %
    false positives, within Spark's 8 MB cap). Spark's defaults only filter scans over 10 GB by
    sources under 10 MB, and skip a source small enough to broadcast (a MERGE cannot broadcast it:
    the target side of its outer join is the one that would be built).
    """
    keys = max(change_rows, 1)
    return {
        "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
        "spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": "0",
        "spark.sql.optimizer.runtime.bloomFilter.creationSideThreshold": "1024TB",
        "spark.sql.optimizer.runtime.bloomFilter.expectedNumItems": str(keys),
        "spark.sql.optimizer.runtime.bloomFilter.numBits": str(min(8 * keys, BLOOM_FILTER_MAX_BITS)),
        "spark.sql.autoBroadcastJoinThreshold": "-1",
    }


#: The runtime key filter pays for its checkpoint when the target rows the MERGE scans outnumber the
#: change rows at least this many times. Measured (docs/merge-job.md): 0.34x the merge time at
#: ~290 times, 1.00x at ~3 times, 1.31x at ~1 time.
RUNTIME_KEY_FILTER_MIN_RATIO = 4


def target_rows_scanned(spark: SparkSession, table: str, key_range: KeyRange | None) -> int | None:
    """Return how many rows the MERGE's target scan will read, from Iceberg's scan planning, or None.

    The record counts of the data files Iceberg plans for the key range (file metadata only: no
    data is read). None when Spark reports no row count.
    """
    frame = spark.table(quote_table(table))
    if key_range is not None:
        frame = frame.where(key_range.condition())
    try:
        statistics = frame._jdf.queryExecution().optimizedPlan().collectLeaves().head().stats()
        row_count = statistics.rowCount()
        return int(row_count.get()) if row_count.isDefined() else None
    except Exception as err:  # an internal Spark API: never let it fail a merge
        LOG.warning("target %s: no row-count estimate for the MERGE's scan (%s)", table, err)
        return None


def runtime_key_filter_pays(target_rows: int | None, change_rows: int) -> bool:
    """Say whether to merge through ``checkpointed_net_effect`` with ``runtime_key_filter_conf``.

    :param target_rows: the rows the MERGE's target scan reads (``target_rows_scanned``), None if unknown.
    :param change_rows: the rows of the windows, update before-images included.
    """
    return target_rows is not None and target_rows >= RUNTIME_KEY_FILTER_MIN_RATIO * max(change_rows, 1)


def _merge_windows(
    spark: SparkSession, plan: TargetPlan, windows: list[Window], state: dict[str, str], hard: bool
) -> dict[str, str]:
    frames = [read_window(spark, w, plan.table, check_count=False) for w in windows if w.row_count > 0]
    new_state = _state_after(state, windows)
    snapshot = windows[0] if windows[0].kind == "snapshot" else None
    if not frames and snapshot is None:
        LOG.info("target %s: windows %s are empty, no MERGE", plan.table, [w.label for w in windows])
        return state
    if frames:
        changes = frames[0]
        for frame in frames[1:]:
            changes = changes.unionByName(frame, allowMissingColumns=True)
    else:
        changes = _empty_changes(spark, plan, snapshot)
    columns = [c for c in changes.columns if c not in (*POSITION_COLUMNS, COMMIT_TIME)]
    LOG.info("target %s: MERGE of %s", plan.table, ", ".join(w.label for w in windows))
    if snapshot is not None:
        # A snapshot retires every target row it lacks: the join keeps all target rows, so a filter
        # of the source keys could not prune any, and the snapshot (the whole table) is not checkpointed.
        statement = _merge_statement(plan, net_effect_frame(changes, plan.key_columns), columns, hard, None)
        statement += snapshot_clause(snapshot.to_lsn, hard)
        with_commit_properties(spark, new_state, lambda: spark.sql(statement))
    else:
        _merge_changes(spark, plan, changes, columns, hard, new_state, sum(w.row_count for w in windows))
    spark.catalog.dropTempView(MERGE_SOURCE_VIEW)
    recorded = applied_state(spark, plan.table)
    if any(recorded.get(key) != value for key, value in new_state.items()):
        raise MergeJobError(
            f"target table {plan.table}: the MERGE of {', '.join(w.label for w in windows)} committed but its "
            f"snapshot does not carry the applied LSN ranges (found {recorded}). Re-running is safe (changes "
            "only apply when newer); check that nothing else commits to the table at the same time"
        )
    return new_state


MERGE_SOURCE_VIEW = "sqlserver_cdc_merge_source"


def _merge_changes(
    spark: SparkSession,
    plan: TargetPlan,
    changes: DataFrame,
    columns: list[str],
    hard: bool,
    new_state: dict[str, str],
    change_rows: int,
) -> None:
    """MERGE change windows, with the key range and, where it pays, the runtime key filter."""
    bounds = source_key_range(changes, plan)
    # Spark only filters a merge-on-read target: copy-on-write keeps every row of the files it rewrites.
    merge_on_read = iceberg_table(spark, plan.table).properties().get("write.merge.mode") == "merge-on-read"
    scanned = target_rows_scanned(spark, plan.table, bounds) if merge_on_read else None
    with ExitStack() as stack:
        if runtime_key_filter_pays(scanned, change_rows):
            LOG.info(
                "target %s: runtime key filter on (%s target rows to scan, %s change rows)",
                plan.table,
                scanned,
                change_rows,
            )
            source = stack.enter_context(checkpointed_net_effect(changes, plan.key_columns))
            stack.enter_context(session_conf(spark, runtime_key_filter_conf(change_rows)))
        else:
            source = net_effect_frame(changes, plan.key_columns)
        statement = _merge_statement(plan, source, columns, hard, bounds)
        with_commit_properties(spark, new_state, lambda: spark.sql(statement))


def _merge_statement(
    plan: TargetPlan, source: DataFrame, columns: list[str], hard: bool, bounds: KeyRange | None
) -> str:
    source.createOrReplaceTempView(MERGE_SOURCE_VIEW)
    return merge_sql(plan.table, MERGE_SOURCE_VIEW, columns, plan.key_columns, hard, bounds)


def _empty_changes(spark: SparkSession, plan: TargetPlan, window: Window) -> DataFrame:
    names = [c["name"] for c in window.columns]
    types = [plan.column_types[n.lower()] for n in names]
    select = ", ".join(
        [f"CAST(NULL AS {t}) AS {quote(n)}" for n, t in zip(names, types, strict=True)]
        + [f"CAST(NULL AS BINARY) AS {START_LSN}", f"CAST(NULL AS BINARY) AS {SEQVAL}"]
        + [f"CAST(NULL AS INT) AS {OPERATION}", f"CAST(NULL AS TIMESTAMP) AS {COMMIT_TIME}"]
    )
    return spark.sql(f"SELECT {select} WHERE false")


# --------------------------------------------------------------------------- the run


def configure_session(spark: SparkSession) -> None:
    """Set the session options the job relies on and check that Iceberg's SQL extensions are on."""
    spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    # Windows hold proleptic Gregorian dates, as SQL Server does (date/datetime2 start at year 1).
    spark.conf.set("spark.sql.parquet.datetimeRebaseModeInRead", "CORRECTED")
    spark.conf.set("spark.sql.parquet.int96RebaseModeInRead", "CORRECTED")
    # The net effect keeps row_number() = 1 per key. Spark 3.5 would add a partial "window group
    # limit" before the shuffle: a full sort of every change row that saves nothing when keys seldom
    # repeat within a window (the common case once unneeded before-images are dropped) and saves little
    # when they do, since the rows are shuffled and sorted by key after it anyway.
    spark.conf.set("spark.sql.optimizer.windowGroupLimitThreshold", "-1")
    from py4j.clientserver import ClientServer

    if not isinstance(spark.sparkContext._gateway, ClientServer):
        raise MergeJobError(
            "PySpark runs without pinned threads (PYSPARK_PIN_THREAD=false); the job needs them to record the "
            "applied LSN ranges in the same Iceberg commit as the data. Unset PYSPARK_PIN_THREAD"
        )
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if "IcebergSparkSessionExtensions" not in extensions:
        raise MergeJobError(
            "the Spark session lacks Iceberg's SQL extensions (needed for MERGE INTO and identifier fields): "
            "set spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
        )


def run(spark: SparkSession, settings: MergeSettings) -> dict[str, Any]:
    """Validate every window, then merge them target by target; return a summary of what was done."""
    configure_session(spark)
    if not settings.manifests:
        raise MergeJobError("no window manifests given: pass --manifest (the extract task's XCom)")
    windows = [read_manifest(spark, uri) for uri in settings.manifests]
    for window in windows:
        check_files(spark, window)
    hard = settings.delete_mode == "hard"
    plans: dict[str, TargetPlan] = {}
    for window in windows:
        table = settings.target_for(window)
        plan = plans.setdefault(table, TargetPlan(table))
        plan.windows.append(window)
    for plan in plans.values():
        plan.exists = table_exists(spark, plan.table)
        plan.state = applied_state(spark, plan.table) if plan.exists else {}
        pending = []
        for window in plan.windows:
            ranges = parse_ranges(plan.state.get(SUMMARY_RANGES + window.capture_instance))
            if covers(ranges, *window.lsn_range):
                LOG.info("target %s: window %s is already applied, skipped", plan.table, window.label)
                plan.skipped.append(window)
                continue
            if hard and ranges and window.kind == "changes" and lsn_to_int(window.from_lsn) <= ranges[-1][1]:
                raise MergeJobError(
                    f"target table {plan.table}: window {window.label} starts at or below the highest applied LSN "
                    f"{lsn_from_int(ranges[-1][1])} of {window.capture_instance}. With --delete-mode hard windows must "
                    "be merged in LSN order (a deleted row leaves no trace, so an older window would bring it "
                    "back); use --delete-mode soft for backfills and re-runs"
                )
            pending.append(window)
        plan.windows = pending
    for plan in plans.values():
        for window in plan.windows:
            if window.row_count > 0:
                read_window(spark, window, plan.table, check_count=True)
        if plan.windows:
            plan_schema(
                spark if plan.exists else None,
                plan,
                _table_schema(spark, plan.table) if plan.exists else None,
            )
    result: dict[str, Any] = {}
    for plan in plans.values():
        state = plan.state
        if plan.windows:
            if not plan.exists:
                create_table(spark, plan, settings.write_mode, settings.table_properties)
            else:
                evolve_table(spark, plan)
            snapshots = sorted(
                (w for w in plan.windows if w.kind == "snapshot"), key=lambda w: lsn_to_int(w.to_lsn)
            )
            for snapshot in snapshots:
                state = _merge_windows(spark, plan, [snapshot], state, hard)
            changes = [w for w in plan.windows if w.kind == "changes"]
            if changes:
                state = _merge_windows(spark, plan, changes, state, hard)
        result[plan.table] = {
            "applied": [w.label for w in plan.windows],
            "skipped": [w.label for w in plan.skipped],
            "max_applied_lsn": {
                key[len(SUMMARY_MAX_LSN) :]: value
                for key, value in state.items()
                if key.startswith(SUMMARY_MAX_LSN)
            },
        }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for spark-submit."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = parse_args(sys.argv[1:] if argv is None else argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("sqlserver-cdc-merge").getOrCreate()
    try:
        result = run(spark, settings)
    except MergeJobError as err:
        LOG.error("%s", err)
        print(f"ERROR: {err}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    print(f"{RESULT_MARKER} {json.dumps(result, sort_keys=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
