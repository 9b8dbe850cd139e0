"""SqlServerCdcHook: pyodbc connections to SQL Server and the typed CDC questions the operators ask."""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from airflow.sdk import BaseHook

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.errors import (
    CaptureInstanceNotFoundError,
    CdcNotEnabledError,
    ChangeDataPermissionError,
    LsnRangeError,
    SqlServerCdcError,
    SqlServerLoginError,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import arrow_field, column_converter, is_large_object
from airflow_provider_sqlserver_cdc.windows import ServerTimeZone

if TYPE_CHECKING:
    import pyodbc

    from airflow_provider_sqlserver_cdc.windows import LsnWindow

MS_ODBC_DRIVER = "ODBC Driver 18 for SQL Server"
FREETDS_DRIVER = "FreeTDS"
SQL_SS_TIMESTAMPOFFSET = -155
SQL_GUID = -11
DEFAULT_BATCH_SIZE = 20_000
LOB_MAX_BYTES = 1024 * 1024

METADATA_FIELDS = [
    pa.field("__$start_lsn", pa.binary()),
    pa.field("__$seqval", pa.binary()),
    pa.field("__$operation", pa.int32()),
    pa.field("__$update_mask", pa.binary()),
    pa.field("__$commit_time", pa.timestamp("us", tz="UTC")),
]

_NATIVE_ERROR = re.compile(r"\((\d+)\) \(SQL\w+\)\s*$")
_ARROW_ODBC_NATIVE_ERROR = re.compile(r"Native error: (\d+)")
READERS = ("auto", "arrow-odbc", "pyodbc")
ARROW_ODBC_MAX_BYTES_PER_BATCH = 64 * 1024 * 1024


def decode_datetimeoffset(raw: bytes) -> datetime:
    """Decode the ODBC SQL_SS_TIMESTAMPOFFSET struct (pyodbc reports type -155) into an aware datetime."""
    year, month, day, hour, minute, second, fraction_ns, tz_hour, tz_minute = struct.unpack("<6hI2h", raw)
    offset = timezone(timedelta(hours=tz_hour, minutes=tz_minute))
    return datetime(year, month, day, hour, minute, second, fraction_ns // 1000, tzinfo=offset)


def decode_guid(raw: bytes) -> uuid.UUID:
    """Decode SQL_GUID bytes (little-endian fields, as SQL Server stores them) into a UUID."""
    return uuid.UUID(bytes_le=raw)


def _error_text(err: BaseException) -> str:
    """The driver's message: pyodbc puts it second in ``args`` (after the SQLSTATE)."""
    return str(err.args[1]) if len(err.args) > 1 else str(err)


def native_error_number(err: BaseException) -> int | None:
    """Return SQL Server's error number from a pyodbc error message, e.g. 18456 from ``... (18456) (SQLDriverConnect)``."""
    text = _error_text(err)
    match = _NATIVE_ERROR.search(text) or _ARROW_ODBC_NATIVE_ERROR.search(text)
    if match:
        return int(match.group(1))
    numbers = re.findall(r"\((\d{3,5})\)", text)
    return int(numbers[-1]) if numbers else None


def driver_message(err: BaseException) -> str:
    """Return the server's message of a pyodbc or arrow-odbc error without the driver's ``[...]`` prefixes."""
    text = _error_text(err)
    if "Message:" in text:  # arrow-odbc: "... State: 42000, Native error: 229, Message: [FreeTDS]..."
        text = text.split("Message:", 1)[1]
    return re.sub(r"^(\[[^\]]*\]\s*)+", "", text.strip()).strip()


def odbc_value(value: str) -> str:
    """Quote an ODBC connection-string value with braces when it needs it (``}`` doubled)."""
    if value == "" or any(ch in value for ch in ";{}=") or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


@dataclass(frozen=True)
class CaptureJobStatus:
    """
    How far the capture job (SQL Server Agent) has got.

    :param configured: whether ``msdb.dbo.cdc_jobs`` lists a capture job for the database.
    :param polling_interval_s: the job's polling interval in seconds.
    :param server_now: the server's local clock.
    :param max_lsn: ``sys.fn_cdc_get_max_lsn()``.
    :param max_lsn_time: the local commit time mapped to the max LSN.
    :param last_scan_end: the end of the latest log scan session (server local), when readable.
    """

    configured: bool | None
    polling_interval_s: int | None
    server_now: datetime
    max_lsn: Lsn
    max_lsn_time: datetime | None
    last_scan_end: datetime | None = None

    @property
    def lag(self) -> timedelta | None:
        """How far the max LSN's commit time is behind the server clock."""
        return None if self.max_lsn_time is None else self.server_now - self.max_lsn_time

    @property
    def seems_running(self) -> bool:
        """Whether the capture job appears to be running (it keeps the max LSN's time close to now)."""
        if self.configured is False:
            return False
        limit = timedelta(seconds=max(60, 10 * (self.polling_interval_s or 5)))
        if self.last_scan_end is not None and self.server_now - self.last_scan_end <= limit:
            return True
        return self.lag is not None and self.lag <= limit

    def describe(self) -> str:
        """One human sentence for logs and error messages."""
        parts = []
        if self.configured is False:
            parts.append("no capture job is configured in msdb.dbo.cdc_jobs for this database")
        elif self.seems_running:
            parts.append("the capture job appears to be running")
        else:
            parts.append(
                "the capture job appears to be STOPPED (SQL Server Agent down or sys.sp_cdc_stop_job); "
                "start it with EXEC sys.sp_cdc_start_job"
            )
        if self.max_lsn_time is not None:
            parts.append(
                f"max LSN {self.max_lsn.hex} maps to {self.max_lsn_time.isoformat(sep=' ')} server time, "
                f"{self.lag.total_seconds():.0f} s behind the server clock ({self.server_now.isoformat(sep=' ')})"
            )
        else:
            parts.append(f"max LSN {self.max_lsn.hex} has no mapped time yet")
        if self.last_scan_end is not None:
            parts.append(f"last log scan ended {self.last_scan_end.isoformat(sep=' ')}")
        return "; ".join(parts)


class SqlServerCdcHook(BaseHook):
    """
    Talk to a CDC-enabled SQL Server database through pyodbc.

    Uses Airflow connections of type ``mssql``: host, port, login, password, and schema as the
    database (as the Microsoft SQL Server provider does). Extras: ``driver`` (ODBC driver name;
    default ``ODBC Driver 18 for SQL Server`` when installed, else ``FreeTDS``), ``encrypt``
    and ``trust_server_certificate`` (Microsoft driver), ``tds_version`` (FreeTDS, default 7.4),
    ``server_time_zone`` (IANA zone of the server, for servers with daylight-saving time).

    :param sqlserver_cdc_conn_id: the Airflow connection id.
    :param database: database to use instead of the connection's schema.
    :param server_time_zone: IANA zone of the server; overrides the connection extra.
    """

    conn_name_attr = "sqlserver_cdc_conn_id"
    default_conn_name = "mssql_default"
    conn_type = "mssql"
    hook_name = "Microsoft SQL Server CDC"

    def __init__(
        self,
        sqlserver_cdc_conn_id: str = default_conn_name,
        *,
        database: str | None = None,
        server_time_zone: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sqlserver_cdc_conn_id = sqlserver_cdc_conn_id
        self._database = database
        self._server_time_zone = server_time_zone
        self._conn: pyodbc.Connection | None = None

    # --- connection ----------------------------------------------------------------------

    @cached_property
    def connection(self) -> Any:
        """The Airflow connection."""
        return self.get_connection(self.sqlserver_cdc_conn_id)

    @property
    def extras(self) -> dict[str, Any]:
        """The connection's extras."""
        return dict(self.connection.extra_dejson or {})

    @property
    def database(self) -> str | None:
        """The database the hook connects to."""
        return self._database or self.connection.schema or None

    @property
    def server(self) -> str:
        """``host:port`` of the server (no credentials)."""
        return f"{self.connection.host}:{self.connection.port or 1433}"

    @property
    def odbc_driver(self) -> str:
        """The ODBC driver name: the ``driver`` extra, else Microsoft's driver 18 when installed, else FreeTDS."""
        configured = self.extras.get("driver")
        if configured:
            return str(configured).strip("{}")
        import pyodbc

        installed = pyodbc.drivers()
        return MS_ODBC_DRIVER if MS_ODBC_DRIVER in installed else FREETDS_DRIVER

    def odbc_connection_string(self) -> str:
        """Build the ODBC connection string. It contains the password: never log it."""
        conn = self.connection
        extras = self.extras
        driver = self.odbc_driver
        port = int(conn.port or 1433)
        parts = {"DRIVER": "{" + driver + "}"}
        if "freetds" in driver.lower():
            parts.update(
                {
                    "SERVER": odbc_value(conn.host or "localhost"),
                    "PORT": str(port),
                    "TDS_Version": odbc_value(str(extras.get("tds_version", "7.4"))),
                    "ClientCharset": "UTF-8",
                }
            )
        else:
            parts["SERVER"] = odbc_value(f"tcp:{conn.host or 'localhost'},{port}")
            parts["Encrypt"] = odbc_value(_yes_no(extras.get("encrypt", True)))
            parts["TrustServerCertificate"] = odbc_value(
                _yes_no(extras.get("trust_server_certificate", False))
            )
        if self.database:
            parts["DATABASE"] = odbc_value(self.database)
        if conn.login:
            parts["UID"] = odbc_value(conn.login)
            parts["PWD"] = odbc_value(conn.password or "")
        return ";".join(f"{k}={v}" for k, v in parts.items()) + ";"

    def get_conn(self) -> pyodbc.Connection:
        """Return the hook's pyodbc connection (autocommit, converters registered), opening it once."""
        if self._conn is None:
            self._conn = self.new_connection()
        return self._conn

    def new_connection(self) -> pyodbc.Connection:
        """Open a new pyodbc connection in autocommit mode with the provider's output converters."""
        import pyodbc

        try:
            conn = pyodbc.connect(self.odbc_connection_string(), autocommit=True)
        except pyodbc.Error as err:
            raise self._translate(err, "connecting") from None
        conn.add_output_converter(SQL_SS_TIMESTAMPOFFSET, decode_datetimeoffset)
        conn.add_output_converter(SQL_GUID, decode_guid)
        return conn

    def close(self) -> None:
        """Close the hook's connection."""
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def _translate(self, err: Exception, doing: str, capture_instance: str | None = None) -> Exception:
        """Turn a driver error into the provider's error with an actionable message."""
        number = native_error_number(err)
        text = driver_message(err)
        where = f"server {self.server}, database {self.database or '(default)'}"
        ci = f" for capture instance {capture_instance!r}" if capture_instance else ""
        if number in (18456, 4060, 18452) or (doing == "connecting" and "Login failed" in text):
            return SqlServerLoginError(
                f"SQL Server refused the login of {self.connection.login!r} ({where}): {text}. Check the login, "
                f"password and database of Airflow connection {self.sqlserver_cdc_conn_id!r}."
            )
        if doing == "connecting":
            return SqlServerLoginError(
                f"Cannot connect to SQL Server ({where}) with ODBC driver {self.odbc_driver!r}: {text}. Check host, "
                f"port and the driver/encrypt extras of Airflow connection {self.sqlserver_cdc_conn_id!r}."
            )
        if number in (229, 230, 297, 916):
            return ChangeDataPermissionError(
                f"Permission denied while {doing}{ci} ({where}): {text}. The login needs SELECT on the captured "
                "columns of the source table and membership in the capture instance's gating role (role_name in "
                "cdc.change_tables / sys.sp_cdc_help_change_data_capture), or db_owner."
            )
        if number == 313:
            return LsnRangeError(
                f"SQL Server rejected the LSN range while {doing}{ci} ({where}): {text}. The range is outside the "
                "instance's valid range (below sys.fn_cdc_get_min_lsn, above sys.fn_cdc_get_max_lsn, or from > to)."
            )
        if number == 208 and "cdc." in text.lower():
            return CdcNotEnabledError(
                f"Change data capture objects are missing while {doing}{ci} ({where}): {text}. Enable CDC on the "
                "database (EXEC sys.sp_cdc_enable_db) and the table (EXEC sys.sp_cdc_enable_table)."
            )
        return SqlServerCdcError(f"SQL Server error while {doing}{ci} ({where}): {text}")

    def _query(self, sql: str, *params: Any, doing: str, capture_instance: str | None = None) -> list[Any]:
        import pyodbc

        cursor = self.get_conn().cursor()
        try:
            cursor.execute(sql, *params)
            return cursor.fetchall()
        except pyodbc.Error as err:
            raise self._translate(err, doing, capture_instance) from None
        finally:
            cursor.close()

    def _scalar(self, sql: str, *params: Any, doing: str, capture_instance: str | None = None) -> Any:
        rows = self._query(sql, *params, doing=doing, capture_instance=capture_instance)
        return rows[0][0] if rows else None

    # --- server clock ---------------------------------------------------------------------

    def get_server_now(self) -> datetime:
        """The server's clock as an aware datetime (``SYSDATETIMEOFFSET()``)."""
        value = self._scalar(tsql.SERVER_NOW, doing="reading the server clock")
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise SqlServerCdcError(f"SYSDATETIMEOFFSET() returned {value!r}, expected a datetimeoffset")
        return value

    def get_database_name(self) -> str:
        """``DB_NAME()``: the database the connection uses."""
        return str(self._scalar(tsql.CURRENT_DATABASE, doing="reading DB_NAME()"))

    def get_server_time_zone(self) -> ServerTimeZone:
        """
        Learn the server's time zone: its current UTC offset from ``SYSDATETIMEOFFSET()``.

        With a ``server_time_zone`` (argument or connection extra), that IANA zone is used and
        checked against the server's current offset.
        """
        server_now = self.get_server_now()
        offset = server_now.utcoffset() or timedelta(0)
        zone = self._server_time_zone or self.extras.get("server_time_zone")
        if not zone:
            return ServerTimeZone(offset=offset)
        tz = ServerTimeZone(offset=offset, zone=str(zone))
        expected = server_now.astimezone(tz.tzinfo).utcoffset()
        if expected != offset:
            raise SqlServerCdcError(
                f"server_time_zone {zone!r} has UTC offset {expected} at the server's current time "
                f"{server_now.isoformat()}, but the server ({self.server}) reports {offset}. Set "
                "server_time_zone to the server's time zone, or remove it to use the offset the server reports."
            )
        return tz

    # --- LSN functions --------------------------------------------------------------------

    def get_max_lsn(self) -> Lsn:
        """``sys.fn_cdc_get_max_lsn()``: the highest LSN the capture job has processed."""
        value = self._scalar(tsql.MAX_LSN, doing="reading sys.fn_cdc_get_max_lsn()")
        if value is None:
            raise CdcNotEnabledError(
                f"sys.fn_cdc_get_max_lsn() returned NULL on {self.server}, database {self.database}: CDC is not "
                "enabled on this database or the capture job has not run yet. EXEC sys.sp_cdc_enable_db and "
                "make sure SQL Server Agent runs the capture job."
            )
        return Lsn(value)

    def get_min_lsn(self, capture_instance: str) -> Lsn:
        """``sys.fn_cdc_get_min_lsn(ci)``: the instance's low-water mark (zero when unknown or not permitted)."""
        tsql.validate_capture_instance(capture_instance)
        value = self._scalar(
            tsql.MIN_LSN,
            capture_instance,
            doing="reading sys.fn_cdc_get_min_lsn",
            capture_instance=capture_instance,
        )
        return Lsn(value) if value is not None else Lsn.zero()

    def increment_lsn(self, lsn: Lsn) -> Lsn:
        """``sys.fn_cdc_increment_lsn``: the next LSN after ``lsn``."""
        return Lsn(self._scalar(tsql.INCREMENT_LSN, lsn.value, doing="incrementing an LSN"))

    def decrement_lsn(self, lsn: Lsn) -> Lsn:
        """``sys.fn_cdc_decrement_lsn``: the LSN before ``lsn``."""
        return Lsn(self._scalar(tsql.DECREMENT_LSN, lsn.value, doing="decrementing an LSN"))

    def map_time_to_lsn(self, relational_operator: str, local_time: datetime) -> Lsn | None:
        """
        ``sys.fn_cdc_map_time_to_lsn``: an LSN from ``cdc.lsn_time_mapping`` by commit time.

        :param relational_operator: one of :data:`tsql.RELATIONAL_OPERATORS`.
        :param local_time: naive server-local time.
        """
        if relational_operator not in tsql.RELATIONAL_OPERATORS:
            raise ValueError(f"Unknown relational operator {relational_operator!r}")
        value = self._scalar(
            tsql.MAP_TIME_TO_LSN, relational_operator, local_time, doing="mapping a time to an LSN"
        )
        return Lsn(value) if value is not None and any(value) else None

    def map_lsn_to_time(self, lsn: Lsn) -> datetime | None:
        """``sys.fn_cdc_map_lsn_to_time``: the server-local commit time of an LSN."""
        return self._scalar(tsql.MAP_LSN_TO_TIME, lsn.value, doing="mapping an LSN to a time")

    # --- database, capture instances, columns -----------------------------------------------

    def is_cdc_enabled(self) -> bool:
        """Whether ``sys.databases.is_cdc_enabled`` is set for the current database."""
        rows = self._query(tsql.DATABASE_CDC_ENABLED, doing="checking sys.databases.is_cdc_enabled")
        return bool(rows and rows[0][1])

    def ensure_cdc_enabled(self) -> None:
        """Raise CdcNotEnabledError unless CDC is enabled on the database."""
        if not self.is_cdc_enabled():
            name = self.get_database_name()
            raise CdcNotEnabledError(
                f"Change data capture is not enabled on database {name!r} ({self.server}). Run "
                f"EXEC sys.sp_cdc_enable_db in {name!r} (needs sysadmin), then sys.sp_cdc_enable_table for each table."
            )

    def get_capture_instances(self) -> list[CaptureInstance]:
        """Every capture instance of the database with its source table (columns not loaded)."""
        self.ensure_cdc_enabled()
        rows = self._query(tsql.CAPTURE_INSTANCES, doing="listing capture instances (cdc.change_tables)")
        return [
            CaptureInstance(
                name=r[0],
                source_schema=r[1],
                source_table=r[2],
                start_lsn=Lsn(r[3]),
                supports_net_changes=bool(r[4]),
                role_name=r[5],
                index_name=r[6],
                create_date=r[7],
            )
            for r in rows
        ]

    def get_captured_columns(self, capture_instance: str) -> list[CapturedColumn]:
        """The captured columns of an instance with their full types, in ``column_ordinal`` order."""
        tsql.validate_capture_instance(capture_instance)
        rows = self._query(
            tsql.CAPTURED_COLUMNS,
            capture_instance,
            doing="reading captured columns",
            capture_instance=capture_instance,
        )
        return [
            CapturedColumn(
                name=r[0],
                ordinal=int(r[1]),
                sql_type=str(r[2]),
                max_length=int(r[3]),
                precision=int(r[4]),
                scale=int(r[5]),
                nullable=bool(r[6]),
            )
            for r in rows
        ]

    def get_key_columns(self, instance: CaptureInstance) -> list[str]:
        """Key columns: ``cdc.index_columns`` of the instance, else the source table's primary key."""
        rows = self._query(
            tsql.INDEX_COLUMNS,
            instance.name,
            doing="reading cdc.index_columns",
            capture_instance=instance.name,
        )
        if rows:
            return [r[0] for r in rows]
        rows = self._query(
            tsql.PRIMARY_KEY_COLUMNS,
            instance.source_schema,
            instance.source_table,
            doing="reading the primary key",
            capture_instance=instance.name,
        )
        return [r[0] for r in rows]

    def get_capture_instance(self, name: str, *, with_columns: bool = True) -> CaptureInstance:
        """
        Return one capture instance, with its columns and key columns.

        :param name: the capture instance, or ``schema.table`` for the newest instance of that table.
        :param with_columns: also load captured columns and key columns.
        """
        return self.get_named_capture_instances([name], with_columns=with_columns)[0]

    def get_named_capture_instances(
        self, names: Sequence[str], *, with_columns: bool = True
    ) -> list[CaptureInstance]:
        """
        Return the named capture instances in the given order, listing the database's instances once.

        :param names: capture instances, or ``schema.table`` for the newest instance of that table.
        :param with_columns: also load captured columns and key columns.
        """
        if not names:
            return []
        instances = self.get_capture_instances()
        found = [self._find_capture_instance(name, instances) for name in names]
        if not with_columns:
            return found
        return [
            replace(
                instance,
                columns=tuple(self.get_captured_columns(instance.name)),
                key_columns=tuple(self.get_key_columns(instance)),
            )
            for instance in found
        ]

    def _find_capture_instance(self, name: str, instances: list[CaptureInstance]) -> CaptureInstance:
        """The instance ``name`` stands for among ``instances``; an actionable error when there is none."""
        if "." in name and name not in {i.name for i in instances}:
            schema, _, table = name.partition(".")
            matching = [i for i in instances if i.source_schema == schema and i.source_table == table]
            if not matching:
                self._raise_unknown(name, instances, candidates=[(schema, table)])
            found = max(matching, key=lambda i: i.start_lsn)
        else:
            tsql.validate_capture_instance(name)
            found = next((i for i in instances if i.name == name), None)
            if found is None:
                candidates = [(name[:k], name[k + 1 :]) for k, ch in enumerate(name) if ch == "_"]
                self._raise_unknown(name, instances, candidates=candidates)
        return found

    def _raise_unknown(
        self, name: str, instances: list[CaptureInstance], candidates: list[tuple[str, str]]
    ) -> None:
        for schema, table in candidates:
            tracked = self._query(
                tsql.TABLE_CDC_TRACKED, schema, table, doing="checking sys.tables.is_tracked_by_cdc"
            )
            if tracked and not tracked[0][0]:
                raise CdcNotEnabledError(
                    f"Table {schema}.{table} is not tracked by change data capture (database {self.database}, "
                    f"{self.server}), so capture instance {name!r} does not exist. Enable it with EXEC "
                    f"sys.sp_cdc_enable_table @source_schema = N'{schema}', @source_name = N'{table}', "
                    "@role_name = NULL."
                )
        known = ", ".join(sorted(i.name for i in instances)) or "none"
        raise CaptureInstanceNotFoundError(
            f"Capture instance {name!r} does not exist in database {self.database} ({self.server}), or this "
            f"login may not see it. Capture instances visible: {known}. Check the name (default: "
            "<schema>_<table>) in cdc.change_tables."
        )

    def get_capture_job_status(self) -> CaptureJobStatus:
        """Whether the capture job runs and how far behind it is."""
        import pyodbc

        server_now = self.get_server_now().replace(tzinfo=None)
        max_lsn = self.get_max_lsn()
        max_time = self.map_lsn_to_time(max_lsn)
        configured: bool | None = None
        polling: int | None = None
        last_scan: datetime | None = None
        cursor = self.get_conn().cursor()
        try:
            try:
                rows = cursor.execute(tsql.CAPTURE_JOB).fetchall()
                capture = [r for r in rows if str(r[0]).lower() == "capture"]
                configured = bool(capture)
                polling = int(capture[0][1]) if capture and capture[0][1] is not None else None
            except pyodbc.Error:
                self.log.debug("msdb.dbo.cdc_jobs is not readable with this login")
            try:
                row = cursor.execute(tsql.LAST_LOG_SCAN).fetchone()
                last_scan = row[1] if row else None
            except pyodbc.Error:
                self.log.debug("sys.dm_cdc_log_scan_sessions is not readable with this login")
        finally:
            cursor.close()
        return CaptureJobStatus(configured, polling, server_now, max_lsn, max_time, last_scan)

    # --- change data ------------------------------------------------------------------------

    def changes_schema(self, instance: CaptureInstance) -> pa.Schema:
        """The Arrow schema of the instance's change rows (metadata columns, then captured columns)."""
        return pa.schema(METADATA_FIELDS + [arrow_field(c) for c in instance.columns])

    def stream_changes(
        self,
        instance: CaptureInstance,
        window: LsnWindow,
        *,
        tz: ServerTimeZone,
        row_filter_option: str = "all update old",
        batch_size: int = DEFAULT_BATCH_SIZE,
        reader: str = "auto",
    ) -> Iterator[pa.RecordBatch]:
        """
        Stream ``cdc.fn_cdc_get_all_changes_<ci>`` over the window as record batches of at most ``batch_size`` rows.

        Rows come in commit order (``__$start_lsn``, ``__$seqval``, ``__$operation``), on a connection
        of their own. ``reader="arrow-odbc"`` fetches column-wise straight into Arrow over the same
        ODBC driver (much less CPU); ``"pyodbc"`` fetches rows; ``"auto"`` uses arrow-odbc when it is
        installed and no captured column is a (max)/LOB type, whose size arrow-odbc must bound.

        :param instance: the capture instance with its columns loaded.
        :param window: the LSN window (not queried when empty).
        :param tz: the server's time zone, for ``__$commit_time`` in UTC.
        :param row_filter_option: ``all`` or ``all update old``.
        :param batch_size: rows per batch.
        :param reader: ``auto``, ``arrow-odbc`` or ``pyodbc``.
        """
        tsql.validate_row_filter_option(row_filter_option)
        if reader not in READERS:
            raise ValueError(f"reader must be one of {READERS}, got {reader!r}")
        if not instance.columns:
            raise ValueError(f"Capture instance {instance.name!r} was loaded without its columns")
        if window.is_empty:
            return
        schema = self.changes_schema(instance)
        converters = [column_converter(c) for c in instance.columns]
        if reader == "auto":
            reader = (
                "arrow-odbc"
                if _arrow_odbc_available() and not any(map(is_large_object, instance.columns))
                else "pyodbc"
            )
        self.log.info("%s: reading changes with %s", instance.name, reader)
        if reader == "arrow-odbc":
            yield from self._stream_arrow_odbc(
                instance, window, schema, converters, tz, row_filter_option, batch_size
            )
        else:
            yield from self._stream_pyodbc(
                instance, window, schema, converters, tz, row_filter_option, batch_size
            )

    def _stream_pyodbc(
        self,
        instance: CaptureInstance,
        window: LsnWindow,
        schema: pa.Schema,
        converters: Sequence[Any],
        tz: ServerTimeZone,
        row_filter_option: str,
        batch_size: int,
    ) -> Iterator[pa.RecordBatch]:
        import pyodbc

        sql = tsql.all_changes_query(instance.name, instance.columns)
        conn = self.new_connection()
        cursor = conn.cursor()
        try:
            try:
                cursor.execute(sql, window.from_lsn.value, window.to_lsn.value, row_filter_option)
            except pyodbc.Error as err:
                raise self._translate(err, "reading change data", instance.name) from None
            while True:
                try:
                    rows = cursor.fetchmany(batch_size)
                except pyodbc.Error as err:
                    raise self._translate(err, "reading change data", instance.name) from None
                if not rows:
                    break
                yield rows_to_batch(rows, schema, converters, tz)
        finally:
            cursor.close()
            conn.close()

    def _stream_arrow_odbc(
        self,
        instance: CaptureInstance,
        window: LsnWindow,
        schema: pa.Schema,
        converters: Sequence[Any],
        tz: ServerTimeZone,
        row_filter_option: str,
        batch_size: int,
    ) -> Iterator[pa.RecordBatch]:
        import arrow_odbc

        sql = tsql.all_changes_query(instance.name, instance.columns, lsn_parameters_as_text=True)
        try:
            batches = arrow_odbc.read_arrow_batches_from_odbc(
                sql,
                self.odbc_connection_string(),
                batch_size=batch_size,
                parameters=[window.from_lsn.hex, window.to_lsn.hex, row_filter_option],
                max_bytes_per_batch=ARROW_ODBC_MAX_BYTES_PER_BATCH,
                max_text_size=LOB_MAX_BYTES,
                max_binary_size=LOB_MAX_BYTES,
            )
            for batch in batches:
                yield arrow_batch_to_schema(batch, schema, converters, tz)
        except arrow_odbc.Error as err:
            raise self._translate(err, "reading change data", instance.name) from None


def _arrow_odbc_available() -> bool:
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
    """Turn a batch of the change query as a columnar reader returns it into one record batch of ``schema``."""
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
    """Turn driver rows of the change query into one record batch of ``schema``."""
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


def _yes_no(value: Any) -> str:
    if isinstance(value, str):
        return "yes" if value.strip().lower() in ("1", "true", "yes", "mandatory", "strict") else "no"
    return "yes" if value else "no"
