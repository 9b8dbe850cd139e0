"""ChangeTrackingHook: the Change Tracking questions a CT source asks of SQL Server, over pyodbc.

A table replicated through Change Tracking (CT) travels through the pipeline like a capture
instance: :meth:`ChangeTrackingHook.get_tracked_table` describes it as a
:class:`~airflow_provider_sqlserver_cdc.capture_instance.CaptureInstance` named ``schema_table``
(every column, key = the primary key, ``start_lsn`` = the version tracking began at, encoded as
:func:`version_lsn` does). What CT cannot give: the values between two versions (only the net
change per key and the row as it is now) and before-images (a deleted row has only its key).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.errors import RetentionGapError, SqlServerCdcError
from airflow_provider_sqlserver_cdc.hooks.sqlserver_cdc import SqlServerCdcHook
from airflow_provider_sqlserver_cdc.lsn import Lsn

if TYPE_CHECKING:
    import pyodbc

SOURCE_KIND = "change_tracking"


class ChangeTrackingNotEnabledError(SqlServerCdcError):
    """Change tracking is off for the database, or the table is not tracked."""


class ChangeTrackingRetentionError(RetentionGapError):
    """The changes after a table's last synchronized version were cleaned up: the table must be re-snapshotted."""


def version_lsn(version: int) -> Lsn:
    """
    Encode a change tracking version as a position the window format and the merge job order.

    Version ``v`` becomes the 10-byte big-endian integer ``v`` (``0x`` + 20 hex digits), so
    versions and their encodings sort alike and the merge's LSN-position guard works unchanged.

    :param version: a change tracking version (``bigint``, not negative).
    """
    if version < 0:
        raise ValueError(f"A change tracking version is not negative, got {version}")
    return Lsn.from_int(version)


def lsn_version(lsn: Lsn) -> int:
    """The change tracking version a :func:`version_lsn` position encodes."""
    return int(lsn)


def tracked_table_name(schema: str, table: str) -> str:
    """The name a tracked table goes by in windows, watermarks and targets: ``schema_table``."""
    return f"{schema}_{table}"


def split_table_name(name: str) -> tuple[str, str]:
    """``schema.table`` (or ``table``, schema ``dbo``) as (schema, table), each checked."""
    schema, _, table = name.rpartition(".")
    schema = schema.strip("[]") or "dbo"
    table = table.strip("[]")
    tsql.validate_name(schema, kind="schema")
    tsql.validate_name(table, kind="table")
    return schema, table


def retention_error(instance: CaptureInstance, database: str, last_version: int, min_valid: int) -> Exception:
    """The loud failure for a table whose changes after ``last_version`` were cleaned up."""
    return ChangeTrackingRetentionError(
        f"Change tracking table {instance.source} (database {database}): the last synchronized version "
        f"{last_version} is below CHANGE_TRACKING_MIN_VALID_VERSION {min_valid}, so changes after it were "
        "cleaned up (the retention period passed, the table was truncated, or tracking was re-enabled). "
        f'Re-snapshot the table: trigger the DAG with conf {{"resnapshot": ["{instance.name}"]}}, or set '
        "change_tracking.auto_resnapshot: true to do it automatically. Raise CHANGE_RETENTION "
        "(ALTER DATABASE ... SET CHANGE_TRACKING (CHANGE_RETENTION = n DAYS)) if runs fall behind it.",
        capture_instance=instance.name,
        from_lsn=version_lsn(last_version + 1).hex,
        min_lsn=version_lsn(min_valid).hex,
    )


def database_not_tracked_error(where: str) -> ChangeTrackingNotEnabledError:
    """The failure for a database whose ``CHANGE_TRACKING_CURRENT_VERSION()`` is NULL: change tracking is off.

    :param where: the server and database, e.g. ``host:1433, database shop``.
    """
    return ChangeTrackingNotEnabledError(
        f"CHANGE_TRACKING_CURRENT_VERSION() is NULL on {where}: change tracking is not enabled for the "
        "database. Run ALTER DATABASE [<db>] SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS, AUTO_CLEANUP = ON)."
    )


class ChangeTrackingHook(SqlServerCdcHook):
    """
    Talk to a database with Change Tracking through pyodbc (same connections as SqlServerCdcHook).

    :param sqlserver_cdc_conn_id: the Airflow connection id.
    :param database: database to use instead of the connection's schema.
    :param server_time_zone: IANA zone of the server; overrides the connection extra.
    :param driver: ODBC driver name (see SqlServerCdcHook).
    """

    hook_name = "Microsoft SQL Server Change Tracking"

    def current_version(self) -> int:
        """``CHANGE_TRACKING_CURRENT_VERSION()``; raises when change tracking is off for the database."""
        value = self.query_value(tsql.CT_CURRENT_VERSION, doing="reading CHANGE_TRACKING_CURRENT_VERSION()")
        if value is None:
            raise database_not_tracked_error(f"{self.server}, database {self.database}")
        return int(value)

    def min_valid_version(self, instance: CaptureInstance) -> int | None:
        """``CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID(t))``; None when the table is not tracked."""
        sql = tsql.ct_min_valid_version_query(instance.source_schema, instance.source_table)
        value = self.query_value(sql, doing=f"reading the min valid version of {instance.source}")
        return None if value is None else int(value)

    def get_tracked_table(self, name: str) -> CaptureInstance:
        """
        Describe a tracked table as the pipeline's unit: all columns, key = primary key, start = begin version.

        :param name: ``schema.table`` (or ``table`` in ``dbo``).
        :raises ChangeTrackingNotEnabledError: the table does not exist or is not tracked.
        """
        schema, table = split_table_name(name)
        rows = self.query(
            tsql.CT_TRACKED_TABLE, schema, table, doing=f"reading the tracking of {schema}.{table}"
        )
        if not rows:
            self.current_version()  # a database without change tracking says so first
            raise ChangeTrackingNotEnabledError(
                f"Table {schema}.{table} (database {self.database} on {self.server}) is not tracked by change "
                f"tracking, or does not exist. Run ALTER TABLE [{schema}].[{table}] ENABLE CHANGE_TRACKING."
            )
        columns = tuple(
            CapturedColumn(
                name=r[0],
                ordinal=position,
                sql_type=str(r[2]),
                max_length=int(r[3]),
                precision=int(r[4]),
                scale=int(r[5]),
                nullable=bool(r[6]),
            )
            for position, r in enumerate(
                self.query(
                    tsql.TABLE_COLUMNS, schema, table, doing=f"reading the columns of {schema}.{table}"
                ),
                start=1,
            )
        )
        keys = tuple(
            r[0]
            for r in self.query(
                tsql.PRIMARY_KEY_COLUMNS, schema, table, doing=f"reading the primary key of {schema}.{table}"
            )
        )
        return CaptureInstance(
            name=tracked_table_name(rows[0][0], rows[0][1]),
            source_schema=rows[0][0],
            source_table=rows[0][1],
            start_lsn=version_lsn(int(rows[0][2] or 0)),
            supports_net_changes=True,
            columns=columns,
            key_columns=keys,
        )

    def get_tracked_tables(self, names: Sequence[str]) -> list[CaptureInstance]:
        """:meth:`get_tracked_table` of each name, in order."""
        return [self.get_tracked_table(name) for name in names]

    def version_at(self, utc_time: datetime) -> int | None:
        """
        The last version committed before ``utc_time``, from ``sys.dm_tran_commit_table``.

        Returns None when the view is not readable (it needs VIEW SERVER STATE): the caller then cuts
        windows at the current version instead (watermark-based).
        """
        import pyodbc

        cursor = self.get_conn().cursor()
        try:
            cursor.execute(tsql.CT_VERSION_AT, utc_time.replace(tzinfo=None))
            row = cursor.fetchone()
        except pyodbc.Error as err:
            self.log.info("sys.dm_tran_commit_table is not readable (%s): windows are watermark-based", err)
            return None
        finally:
            cursor.close()
        return int(row[0]) if row and row[0] is not None else 0

    @contextmanager
    def snapshot_transaction(self) -> Iterator[pyodbc.Connection]:
        """
        A connection inside a SNAPSHOT transaction of its own, rolled back (read only) and closed afterwards.

        Reading CHANGE_TRACKING_CURRENT_VERSION() and the rows inside it makes them agree (the
        database needs ALLOW_SNAPSHOT_ISOLATION ON).
        """
        import pyodbc

        conn = self.new_connection()
        try:
            cursor = conn.cursor()
            try:
                cursor.execute(tsql.SET_SNAPSHOT_ISOLATION)
            finally:
                cursor.close()
            conn.autocommit = False
            yield conn
        except pyodbc.Error as err:
            raise self._translate(err, "reading change tracking data in a SNAPSHOT transaction") from None
        finally:
            try:
                conn.rollback()
            finally:
                conn.close()

    def read_in_transaction(self, conn: pyodbc.Connection, sql: str, *params: Any) -> Any:
        """The first value of ``sql`` run on ``conn`` (a snapshot transaction)."""
        cursor = conn.cursor()
        try:
            cursor.execute(sql, *params)
            row = cursor.fetchone()
        finally:
            cursor.close()
        return row[0] if row else None
