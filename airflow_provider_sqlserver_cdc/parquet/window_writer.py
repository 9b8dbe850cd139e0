"""Streaming Parquet writer for one window directory, rolling to a new part file at a size limit."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_provider_sqlserver_cdc.parquet.masked_columns import (
    mask_batch,
    masked_descriptions,
    masked_schema,
)
from airflow_provider_sqlserver_cdc.window.manifest import (
    MANIFEST_NAME,
    ManifestFile,
    WindowManifest,
    build_manifest,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.column_masking import TableMasking

log = logging.getLogger(__name__)

DEFAULT_MAX_FILE_BYTES = 128 * 1024 * 1024
PART_TEMPLATE = "part-{:05d}.parquet"


def resolve_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """
    Return the filesystem and path for a local path or a filesystem URI.

    pyarrow's own filesystems (``file://``, ``s3://``, ``gs://``, ``hdfs://``, ``abfs://``) are
    used when they know the scheme; any other scheme goes through fsspec (e.g. ``memory://``).

    :param uri: a local path or a URI.
    """
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        return fs, path.rstrip("/")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        pass
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri)
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path.rstrip("/")


def join_uri(base: str, *parts: str) -> str:
    """Join a base path or URI with relative parts using ``/``."""
    return "/".join([base.rstrip("/"), *parts])


class ParquetWindowWriter:
    """
    Write record batches of one window into ``part-NNNNN.parquet`` files (zstd).

    Memory is bounded by one batch plus the Parquet writer's page buffers; a new part file starts
    once the current one reaches ``max_file_bytes``. ``open()`` removes whatever a previous
    attempt left in the window directory (manifest first), so a re-run leaves no stale parts.

    :param filesystem: the target filesystem.
    :param window_dir: the window directory on that filesystem.
    :param schema: the Arrow schema of every batch.
    :param max_file_bytes: roll to a new file once a file reaches this size.
    :param compression: Parquet compression codec.
    :param masking: the table's column masking, applied to every batch before it is written
        (``schema`` is the batches' schema as read; ``self.schema`` the one written).
    """

    def __init__(
        self,
        filesystem: pafs.FileSystem,
        window_dir: str,
        schema: pa.Schema,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        compression: str = "zstd",
        masking: TableMasking | None = None,
    ) -> None:
        if max_file_bytes <= 0:
            raise ValueError("max_file_bytes must be positive")
        self.filesystem = filesystem
        self.window_dir = window_dir.rstrip("/")
        self.masking = masking
        self.schema = masked_schema(schema, masking) if masking is not None else schema
        self.max_file_bytes = max_file_bytes
        self.compression = compression
        self.files: list[ManifestFile] = []
        self._sink: pa.NativeFile | None = None
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_file = 0

    def open(self) -> ParquetWindowWriter:
        """Empty (or create) the window directory."""
        fs = self.filesystem
        info = fs.get_file_info(self.window_dir)
        if info.type == pafs.FileType.Directory:
            manifest = f"{self.window_dir}/{MANIFEST_NAME}"
            if fs.get_file_info(manifest).type == pafs.FileType.File:
                fs.delete_file(manifest)
            fs.delete_dir_contents(self.window_dir)
            log.info("Removed the previous contents of %s", self.window_dir)
        elif info.type == pafs.FileType.File:
            raise FileExistsError(f"{self.window_dir} is a file; expected a window directory")
        fs.create_dir(self.window_dir, recursive=True)
        return self

    def __enter__(self) -> ParquetWindowWriter:
        return self.open()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _start_file(self) -> None:
        name = PART_TEMPLATE.format(len(self.files))
        self._sink = self.filesystem.open_output_stream(f"{self.window_dir}/{name}")
        self._writer = pq.ParquetWriter(self._sink, self.schema, compression=self.compression)
        self.files.append(ManifestFile(path=name, rows=0, bytes=0))
        self._rows_in_file = 0

    def _finish_file(self) -> None:
        if self._writer is None or self._sink is None:
            return
        self._writer.close()
        size = self._sink.tell()
        self._sink.close()
        self.files[-1].rows = self._rows_in_file
        self.files[-1].bytes = size
        self._writer = None
        self._sink = None

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append one batch, starting a new part file first when the current one is full."""
        if batch.num_rows == 0:
            return
        if self.masking is not None:
            batch = mask_batch(batch, self.masking, self.schema)
        if self._writer is None:
            self._start_file()
        assert self._writer is not None and self._sink is not None
        self._writer.write_batch(batch)
        self._rows_in_file += batch.num_rows
        if self._sink.tell() >= self.max_file_bytes:
            self._finish_file()

    def close(self) -> list[ManifestFile]:
        """Finish the open part file and return every file written."""
        self._finish_file()
        return list(self.files)

    def manifest(
        self,
        kind: str,
        instance: CaptureInstance,
        *,
        capture_instance: str | None = None,
        key_columns: Sequence[str] | None = None,
        **fields: Any,
    ) -> WindowManifest:
        """
        Return the manifest of the window written, its files closed (``window.manifest.build_manifest``).

        The columns are ``instance``'s as the files hold them (the writer's masking applied) and the
        masking recorded is the writer's, so a manifest always describes its files.

        :param kind: ``changes`` or ``snapshot``.
        :param instance: the capture instance whose columns were read.
        :param capture_instance: the stream the window is filed under; default ``instance.name``.
        :param key_columns: the key column names; default ``instance.key_columns``.
        :param fields: the other arguments of ``build_manifest`` (``source``, the range, counts, ...).
        """
        return build_manifest(
            kind,
            capture_instance=instance.name if capture_instance is None else capture_instance,
            key_columns=instance.key_columns if key_columns is None else key_columns,
            columns=masked_descriptions(self.masking, instance),
            files=self.files,
            masking=self.masking.to_manifest() if self.masking is not None else None,
            **fields,
        )

    def abort(self) -> None:
        """Close without completing; the directory has no manifest, so readers ignore it."""
        try:
            if self._writer is not None:
                self._writer.close()
            if self._sink is not None:
                self._sink.close()
        except Exception:
            log.warning("Could not close a partial part file in %s", self.window_dir)
        self._writer = None
        self._sink = None
