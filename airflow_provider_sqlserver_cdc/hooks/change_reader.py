"""
Change rows of ``cdc.fn_cdc_get_all_changes_<ci>`` as Arrow record batches.

Two readers over the same ODBC driver: arrow-odbc fetches column-wise straight into Arrow
(much less CPU), pyodbc fetches rows that are transposed into Arrow arrays. Either way a batch
has the schema of :func:`changes_schema`, with ``__$commit_time`` in UTC.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.parquet.type_mapping import arrow_field, column_converter, is_large_object

if TYPE_CHECKING:
    import pyodbc

    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow, ServerTimeZone

SQL_SS_TIMESTAMPOFFSET = -155
SQL_GUID = -11
LOB_MAX_BYTES = 1024 * 1024
ARROW_ODBC_MAX_BYTES_PER_BATCH = 64 * 1024 * 1024
ARROW_ODBC = "arrow-odbc"
PYODBC = "pyodbc"
READERS = ("auto", ARROW_ODBC, PYODBC)

METADATA_FIELDS = [
    pa.field("__$start_lsn", pa.binary()),
    pa.field("__$seqval", pa.binary()),
    pa.field("__$operation", pa.int32()),
    pa.field("__$update_mask", pa.binary()),
    pa.field("__$commit_time", pa.timestamp("us", tz="UTC")),
]


def decode_datetimeoffset(raw: bytes) -> datetime:
    """
    Decode the ODBC SQL_SS_TIMESTAMPOFFSET struct (pyodbc reports type -155) into an aware datetime.

    :param raw: the struct's bytes.
    """
    year, month, day, hour, minute, second, fraction_ns, tz_hour, tz_minute = struct.unpack("<6hI2h", raw)
    offset = timezone(timedelta(hours=tz_hour, minutes=tz_minute))
    return datetime(year, month, day, hour, minute, second, fraction_ns // 1000, tzinfo=offset)


def decode_guid(raw: bytes) -> uuid.UUID:
    """
    Decode SQL_GUID bytes (little-endian fields, as SQL Server stores them) into a UUID.

    :param raw: the 16 bytes.
    """
    return uuid.UUID(bytes_le=raw)


def register_output_converters(conn: pyodbc.Connection) -> None:
    """
    Register the provider's pyodbc output converters (``datetimeoffset``, ``uniqueidentifier``) on a connection.

    :param conn: a pyodbc connection.
    """
    conn.add_output_converter(SQL_SS_TIMESTAMPOFFSET, decode_datetimeoffset)
    conn.add_output_converter(SQL_GUID, decode_guid)


def changes_schema(instance: CaptureInstance) -> pa.Schema:
    """
    Return the Arrow schema of the instance's change rows (metadata columns, then captured columns).

    :param instance: the capture instance with its columns loaded.
    """
    return pa.schema(METADATA_FIELDS + [arrow_field(c) for c in instance.columns])


def arrow_odbc_available() -> bool:
    """Whether the arrow-odbc package can be imported."""
    try:
        import arrow_odbc  # noqa: F401
    except ImportError:
        return False
    return True


def _commit_time_utc(local_commit: pa.Array, tz: ServerTimeZone) -> pa.Array:
    if local_commit.type != pa.timestamp("us"):
        local_commit = local_commit.cast(pa.timestamp("us"))
    return pc.assume_timezone(
        local_commit, timezone=tz.arrow_timezone, ambiguous="earliest", nonexistent="earliest"
    ).cast(pa.timestamp("us", tz="UTC"))


def arrow_batch_to_schema(
    batch: pa.RecordBatch, schema: pa.Schema, converters: Sequence[Any], tz: ServerTimeZone
) -> pa.RecordBatch:
    """
    Turn a batch of the change query as a columnar reader returns it into one record batch of ``schema``.

    :param batch: the reader's batch (metadata columns first, then captured columns).
    :param schema: the target schema (:func:`changes_schema`).
    :param converters: one per captured column (``column_converter``).
    :param tz: the server's time zone, for ``__$commit_time`` in UTC.
    """
    cols = batch.columns
    arrays = [
        cols[0].cast(pa.binary()),
        cols[1].cast(pa.binary()),
        cols[2].cast(pa.int32()),
        cols[3].cast(pa.binary()),
        _commit_time_utc(cols[4], tz),
    ]
    arrays.extend(convert(values) for convert, values in zip(converters, cols[5:], strict=True))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_to_batch(
    rows: Sequence[Sequence[Any]], schema: pa.Schema, converters: Sequence[Any], tz: ServerTimeZone
) -> pa.RecordBatch:
    """
    Turn driver rows of the change query into one record batch of ``schema``.

    :param rows: pyodbc rows (metadata columns first, then captured columns).
    :param schema: the target schema (:func:`changes_schema`).
    :param converters: one per captured column (``column_converter``).
    :param tz: the server's time zone, for ``__$commit_time`` in UTC.
    """
    cols = list(zip(*rows, strict=True))
    commit = _commit_time_utc(pa.array(cols[4], pa.timestamp("us")), tz)
    arrays = [
        pa.array(cols[0], pa.binary()),
        pa.array(cols[1], pa.binary()),
        pa.array(cols[2], pa.int32()),
        pa.array(cols[3], pa.binary()),
        commit,
    ]
    arrays.extend(convert(values) for convert, values in zip(converters, cols[5:], strict=True))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


@dataclass(frozen=True)
class ChangeReader:
    """
    Read the change rows of one capture instance over an LSN window as record batches.

    Rows come in commit order (``__$start_lsn``, ``__$seqval``, ``__$operation``).

    :param instance: the capture instance with its columns loaded.
    :param window: the LSN window.
    :param tz: the server's time zone, for ``__$commit_time`` in UTC.
    :param row_filter_option: ``all`` or ``all update old``.
    :param batch_size: rows per batch.
    :param choice: ``auto``, ``arrow-odbc`` or ``pyodbc``; ``auto`` uses arrow-odbc when it is
        installed and no captured column is a (max)/LOB type, whose size arrow-odbc must bound.
    """

    instance: CaptureInstance
    window: LsnWindow
    _: KW_ONLY
    tz: ServerTimeZone
    row_filter_option: str
    batch_size: int
    choice: str = "auto"

    def __post_init__(self) -> None:
        tsql.validate_row_filter_option(self.row_filter_option)
        if self.choice not in READERS:
            raise ValueError(f"reader must be one of {READERS}, got {self.choice!r}")
        if not self.instance.columns:
            raise ValueError(f"Capture instance {self.instance.name!r} was loaded without its columns")

    @cached_property
    def reader(self) -> str:
        """The reader used: ``arrow-odbc`` or ``pyodbc`` (``auto`` resolved)."""
        if self.choice != "auto":
            return self.choice
        lob = any(map(is_large_object, self.instance.columns))
        return ARROW_ODBC if arrow_odbc_available() and not lob else PYODBC

    @cached_property
    def schema(self) -> pa.Schema:
        """The schema of every batch."""
        return changes_schema(self.instance)

    @cached_property
    def converters(self) -> list[Any]:
        """One converter per captured column, from driver values to Arrow arrays."""
        return [column_converter(c) for c in self.instance.columns]

    def driver_errors(self) -> tuple[type[Exception], ...]:
        """The exception types the reader's driver raises."""
        if self.reader == ARROW_ODBC:
            import arrow_odbc

            return (arrow_odbc.Error,)
        import pyodbc

        return (pyodbc.Error,)

    def read_pyodbc(self, conn: pyodbc.Connection) -> Iterator[pa.RecordBatch]:
        """
        Fetch the rows with pyodbc, ``batch_size`` at a time, and close ``conn`` when done.

        :param conn: a pyodbc connection of this read's own, with the output converters registered.
        """
        sql = tsql.all_changes_query(self.instance.name, self.instance.columns)
        window = self.window
        try:
            cursor = conn.cursor()
            try:
                cursor.execute(sql, window.from_lsn.value, window.to_lsn.value, self.row_filter_option)
                while rows := cursor.fetchmany(self.batch_size):
                    yield rows_to_batch(rows, self.schema, self.converters, self.tz)
            finally:
                cursor.close()
        finally:
            conn.close()

    def read_arrow_odbc(self, connection_string: str) -> Iterator[pa.RecordBatch]:
        """
        Fetch the rows column-wise with arrow-odbc (LSN parameters passed as hex text).

        :param connection_string: the ODBC connection string.
        """
        import arrow_odbc

        sql = tsql.all_changes_query(self.instance.name, self.instance.columns, lsn_parameters_as_text=True)
        window = self.window
        batches = arrow_odbc.read_arrow_batches_from_odbc(
            sql,
            connection_string,
            batch_size=self.batch_size,
            parameters=[window.from_lsn.hex, window.to_lsn.hex, self.row_filter_option],
            max_bytes_per_batch=ARROW_ODBC_MAX_BYTES_PER_BATCH,
            max_text_size=LOB_MAX_BYTES,
            max_binary_size=LOB_MAX_BYTES,
        )
        for batch in batches:
            yield arrow_batch_to_schema(batch, self.schema, self.converters, self.tz)
