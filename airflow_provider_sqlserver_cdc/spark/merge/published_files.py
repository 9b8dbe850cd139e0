"""Small files the jobs publish on the staging storage (result, applied state, lock), through Spark's file systems.

Written so that a reader sees the old file or the whole new one: a local path is written to a hidden
temporary name and renamed into place (Python, on the driver); HDFS and other renaming file systems
likewise through Hadoop; object stores (``s3a://``, ``gs://``, ``abfss://``...) make one upload visible
atomically when its stream closes.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Hadoop file system schemes whose rename is atomic within a directory.
RENAMING_SCHEMES = ("hdfs", "viewfs")


def local_path(uri: str) -> str | None:
    """Return the local path of a plain path or ``file:`` URI, else None."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return parts.path
    return uri if not parts.scheme or len(parts.scheme) == 1 else None  # a Windows drive letter is local


def _hadoop(spark: SparkSession, uri: str) -> tuple[Any, Any, Any]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return jvm, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    """Write ``text`` to ``uri`` atomically, creating its directory; replace what was there.

    :param spark: the job's session (for Hadoop file systems).
    :param uri: the file.
    :param text: the whole content.
    """
    path = local_path(uri)
    if path is not None:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        partial = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
        with open(partial, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(partial, path)
        return
    jvm, fs, target = _hadoop(spark, uri)
    scheme = urlsplit(uri).scheme
    destination = (
        jvm.org.apache.hadoop.fs.Path(target.getParent(), f".{target.getName()}.{uuid.uuid4().hex[:8]}.tmp")
        if scheme in RENAMING_SCHEMES
        else target
    )
    stream = fs.create(destination, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
    if destination is not target:
        if fs.exists(target):
            fs.delete(target, False)  # HDFS renames onto no existing file; a reader retries a missing one
        if not fs.rename(destination, target):
            raise OSError(f"could not rename {destination} to {uri}")


def read_text(spark: SparkSession, uri: str) -> str | None:
    """Return the content of ``uri``, or None when there is no such file.

    :param spark: the job's session.
    :param uri: the file.
    """
    path = local_path(uri)
    if path is not None:
        try:
            with open(path, encoding="utf-8") as src:
                return src.read()
        except FileNotFoundError:
            return None
    jvm, fs, target = _hadoop(spark, uri)
    if not fs.exists(target):
        return None
    stream = fs.open(target)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def create_new(spark: SparkSession, uri: str, text: str) -> bool:
    """Create ``uri`` with ``text`` only if no such file exists; return whether this call created it.

    Exclusive on a local path and on HDFS; on an object store it is a check, then the upload.

    :param spark: the job's session.
    :param uri: the file.
    :param text: the content.
    """
    path = local_path(uri)
    if path is not None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(text)
        return True
    _, fs, target = _hadoop(spark, uri)
    if fs.exists(target):
        return False
    try:
        stream = fs.create(target, False)
    except Exception as err:  # FileAlreadyExistsException through py4j: another creator was first
        if "AlreadyExists" in f"{type(err).__name__}: {err}":
            return False
        raise
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
    return True


def delete(spark: SparkSession, uri: str) -> None:
    """Delete ``uri`` if it exists.

    :param spark: the job's session.
    :param uri: the file.
    """
    path = local_path(uri)
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return
    _, fs, target = _hadoop(spark, uri)
    fs.delete(target, False)
