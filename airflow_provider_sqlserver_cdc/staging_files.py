"""Read and remove the small files the Spark jobs publish on the staging storage, from Airflow (pyarrow).

The jobs write them through Spark's file systems (``spark.merge.published_files``); the tasks read the
same URIs here: a local path, or a URI pyarrow or fsspec opens (``s3://``, ``gs://``, ``abfs://``...).
These are blocking calls: a trigger runs them in a thread.
"""

from __future__ import annotations

import contextlib

import pyarrow.fs as pafs

from airflow_provider_sqlserver_cdc.parquet.window_writer import resolve_filesystem


def read_text(uri: str) -> str | None:
    """Return the content of ``uri``, or None when there is no such file.

    :param uri: the file.
    """
    filesystem, path = resolve_filesystem(uri)
    if filesystem.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    try:
        with filesystem.open_input_stream(path) as src:
            return src.read().decode("utf-8")
    except FileNotFoundError:  # removed between the two calls
        return None


def remove(uri: str) -> None:
    """Delete ``uri`` if it exists.

    :param uri: the file.
    """
    filesystem, path = resolve_filesystem(uri)
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_file(path)
