"""Find the window manifests under a staging path whose LSN range a table does not hold yet.

Windows live in ``{staging}/{capture_instance}/{from_lsn}_{to_lsn}/_manifest.json`` (the manifest is
written last, so a directory without one is still being written). The directory name carries the
window's LSN bounds, so a window its table already holds is passed over without reading its manifest:
one directory listing per capture instance per poll.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.published_files import local_path
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, covers
from airflow_provider_sqlserver_cdc.window.manifest import MANIFEST_NAME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_WINDOW_NAME = re.compile(r"^(0x[0-9A-Fa-f]{20})_(0x[0-9A-Fa-f]{20})$")


@dataclass(frozen=True)
class FoundWindow:
    """A window directory with a manifest: its capture instance, the manifest URI and its named bounds."""

    capture_instance: str
    uri: str
    first: int
    last: int


def _children(spark: SparkSession, uri: str) -> Iterator[tuple[str, str, bool]]:
    """Yield (name, uri, is_directory) of the entries of a directory (nothing if it does not exist)."""
    path = local_path(uri)
    if path is not None:
        try:
            entries = list(os.scandir(path))
        except FileNotFoundError:
            return
        for entry in entries:
            yield entry.name, f"{uri.rstrip('/')}/{entry.name}", entry.is_dir()
        return
    jvm = spark.sparkContext._jvm
    directory = jvm.org.apache.hadoop.fs.Path(uri)
    fs = directory.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(directory):
        return
    for status in fs.listStatus(directory):
        name = status.getPath().getName()
        yield name, f"{uri.rstrip('/')}/{name}", bool(status.isDirectory())


def _has_manifest(spark: SparkSession, window_uri: str) -> bool:
    path = local_path(window_uri)
    if path is not None:
        return os.path.isfile(os.path.join(path, MANIFEST_NAME))
    jvm = spark.sparkContext._jvm
    manifest = jvm.org.apache.hadoop.fs.Path(f"{window_uri}/{MANIFEST_NAME}")
    return bool(manifest.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(manifest))


def newest_window(spark: SparkSession, staging: str, capture_instance: str) -> str | None:
    """Return the manifest URI of the capture instance's window with the highest named end, or None."""
    best: tuple[int, str] | None = None
    for name, uri, is_dir in _children(spark, f"{staging.rstrip('/')}/{capture_instance}"):
        match = _WINDOW_NAME.match(name) if is_dir else None
        if (
            match is not None
            and (best is None or int(match.group(2), 16) > best[0])
            and _has_manifest(spark, uri)
        ):
            best = (int(match.group(2), 16), f"{uri}/{MANIFEST_NAME}")
    return best[1] if best else None


def capture_instances(spark: SparkSession, staging: str) -> list[str]:
    """Return the capture instances that have a directory under the staging path (names not starting with _ or .)."""
    return sorted(
        name for name, _, is_dir in _children(spark, staging) if is_dir and not name.startswith(("_", "."))
    )


def new_windows(
    spark: SparkSession, staging: str, applied: Mapping[str, list[LsnRange]]
) -> list[FoundWindow]:
    """Return the windows with a manifest whose named LSN bounds their capture instance's table does not hold.

    An empty window's directory is named with inverted bounds (first LSN after it, then its end):
    it is taken as its end alone.

    :param spark: the session (for Hadoop file systems).
    :param staging: the staging path.
    :param applied: capture instance -> the ranges its table holds (missing: nothing known).
    """
    found = []
    for capture_instance in capture_instances(spark, staging):
        ranges = applied.get(capture_instance, [])
        for name, uri, is_dir in _children(spark, f"{staging.rstrip('/')}/{capture_instance}"):
            match = _WINDOW_NAME.match(name) if is_dir else None
            if match is None:
                continue
            first, last = (int(match.group(1), 16), int(match.group(2), 16))
            first = min(first, last)
            if covers(ranges, first, last) or not _has_manifest(spark, uri):
                continue
            found.append(FoundWindow(capture_instance, f"{uri}/{MANIFEST_NAME}", first, last))
    return sorted(found, key=lambda w: (w.capture_instance, w.last, w.first))
