"""The options every window producer shares: where a run's windows go, how they are written, what they record."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import DEFAULT_BATCH_SIZE
from airflow_provider_sqlserver_cdc.parquet.masked_columns import instance_masking
from airflow_provider_sqlserver_cdc.parquet.window_writer import DEFAULT_MAX_FILE_BYTES, ParquetWindowWriter
from airflow_provider_sqlserver_cdc.window.manifest import source_description

if TYPE_CHECKING:
    import logging

    import pyarrow as pa
    import pyarrow.fs as pafs

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking
    from airflow_provider_sqlserver_cdc.window.manifest import WindowManifest


@dataclass(frozen=True)
class WindowOutput:
    """
    Where one run's windows are written and how, and what their manifests record of the run.

    :param base_uri: local path or filesystem URI of the windows' base directory.
    :param database: the source database (the manifests' ``source``).
    :param batch_size: rows fetched and written at a time.
    :param max_file_bytes: roll to a new Parquet file at this size.
    :param dag_id: recorded in the manifests.
    :param run_id: recorded in the manifests.
    :param masking: the column masking rules; a table's are applied before Parquet is written.
    :param log: where progress goes.
    """

    base_uri: str
    database: str
    batch_size: int = DEFAULT_BATCH_SIZE
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    dag_id: str | None = None
    run_id: str | None = None
    masking: ColumnMasking | None = None
    log: logging.Logger | None = None

    def writer(
        self, filesystem: pafs.FileSystem, window_dir: str, schema: pa.Schema, instance: CaptureInstance
    ) -> ParquetWindowWriter:
        """
        Return the writer of a window of ``instance``'s rows: this run's file size, the table's masking.

        :param filesystem: the windows' filesystem.
        :param window_dir: the window directory on it.
        :param schema: the schema of the batches as read.
        :param instance: the capture instance whose rows are written.
        :raises ColumnMaskingError: a masking rule of the table cannot apply.
        """
        masking = instance_masking(self.masking, instance)
        return ParquetWindowWriter(
            filesystem, window_dir, schema, max_file_bytes=self.max_file_bytes, masking=masking
        )

    def manifest(
        self, writer: ParquetWindowWriter, kind: str, instance: CaptureInstance, *, server: str, **fields: Any
    ) -> WindowManifest:
        """
        Return the manifest of a window ``writer`` wrote (``ParquetWindowWriter.manifest``) for this run.

        :param writer: the window's writer, its files closed.
        :param kind: ``changes`` or ``snapshot``.
        :param instance: the capture instance whose rows were read.
        :param server: ``host:port`` of the source (no credentials).
        :param fields: the window's range, counts and optional fields (``build_manifest``).
        """
        source = source_description(server, self.database, instance)
        return writer.manifest(
            kind, instance, source=source, dag_id=self.dag_id, run_id=self.run_id, **fields
        )


#: the fields of a :class:`WindowOutput`: the options a producer passes on to it
OUTPUT_FIELDS = frozenset(f.name for f in fields(WindowOutput))
