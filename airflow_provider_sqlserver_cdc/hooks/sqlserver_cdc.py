"""SqlServerCdcHook: the typed CDC questions the operators ask of SQL Server, over pyodbc."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.errors import CdcNotEnabledError, SqlServerCdcError, SqlServerLoginError
from airflow_provider_sqlserver_cdc.hooks.capture_instance_names import find_capture_instance
from airflow_provider_sqlserver_cdc.hooks.capture_job import (
    CaptureJobStatus,
    read_capture_job,
    read_last_scan_error,
)
from airflow_provider_sqlserver_cdc.hooks.change_reader import (
    ARROW_ODBC,
    ChangeReader,
    changes_schema,
    register_output_converters,
)
from airflow_provider_sqlserver_cdc.hooks.driver_errors import ErrorContext, translate_driver_error
from airflow_provider_sqlserver_cdc.hooks.odbc_connection import (
    DEFAULT_PORT,
    airflow_odbc_connection_string,
    airflow_odbc_driver,
)
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.contiguity import ChangeCount
from airflow_provider_sqlserver_cdc.window.planning import ServerTimeZone
from airflow_provider_sqlserver_cdc.window.schema_drift import DdlEvent

if TYPE_CHECKING:
    import pyarrow as pa
    import pyodbc

    from airflow_provider_sqlserver_cdc.window.planning import LsnWindow

DEFAULT_BATCH_SIZE = 50_000


class SqlServerCdcHook(BaseHook):
    """
    Talk to a CDC-enabled SQL Server database through pyodbc.

    Uses Airflow connections of type ``sqlserver_cdc`` (or ``mssql``, as the Microsoft SQL Server
    provider writes them): host, port, login, password, and schema as the database. Extras (form
    fields of the ``sqlserver_cdc`` type): ``encrypt`` and ``trust_server_certificate`` (Microsoft
    driver), ``application_intent``, ``tds_version`` (FreeTDS, default 7.4), ``server_time_zone``
    (IANA zone of the server, for servers with daylight-saving time), and ``driver`` only when
    ``[sqlserver_cdc] allow_driver_in_extra`` is true (see :func:`.odbc_connection.airflow_odbc_driver`).

    :param sqlserver_cdc_conn_id: the Airflow connection id.
    :param database: database to use instead of the connection's schema.
    :param server_time_zone: IANA zone of the server; overrides the connection extra.
    :param driver: ODBC driver name; default ``[sqlserver_cdc] default_driver``, else
        ``ODBC Driver 18 for SQL Server`` when installed, else ``FreeTDS``.
    """

    conn_name_attr = "sqlserver_cdc_conn_id"
    default_conn_name = "sqlserver_cdc_default"
    conn_type = "sqlserver_cdc"
    hook_name = "Microsoft SQL Server CDC"

    def __init__(
        self,
        sqlserver_cdc_conn_id: str = default_conn_name,
        *,
        database: str | None = None,
        server_time_zone: str | None = None,
        driver: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sqlserver_cdc_conn_id = sqlserver_cdc_conn_id
        self._database = database
        self._server_time_zone = server_time_zone
        self._driver = driver
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
        return f"{self.connection.host}:{self.connection.port or DEFAULT_PORT}"

    @property
    def odbc_driver(self) -> str:
        """The ODBC driver name (see :func:`.odbc_connection.airflow_odbc_driver`)."""
        return airflow_odbc_driver(self.extras, driver=self._driver, conn_id=self.sqlserver_cdc_conn_id)

    def odbc_connection_string(self) -> str:
        """Build the ODBC connection string (see :mod:`.odbc_connection`). It contains the password: never log it."""
        return airflow_odbc_connection_string(self.connection, database=self.database, driver=self._driver)

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
        register_output_converters(conn)
        return conn

    def test_connection(self) -> tuple[bool, str]:
        """Log in and read the database's name and CDC state; return whether that worked and a one-line message."""
        try:
            database = self.get_database_name()
            cdc = "CDC enabled" if self.is_cdc_enabled() else "CDC not enabled: run EXEC sys.sp_cdc_enable_db"
            driver = self.odbc_driver
        except SqlServerLoginError as err:
            return False, self._explain_refused_login(err)
        except Exception as err:
            return False, " ".join(str(err).split())
        finally:
            self.close()
        return (
            True,
            f"Connected to SQL Server {self.server}, database {database!r} ({cdc}), ODBC driver {driver!r}.",
        )

    def _explain_refused_login(self, err: SqlServerLoginError) -> str:
        """Tell a database that is missing (or that the login may not open) from a wrong login or password."""
        refused = " ".join(str(err).split())
        if not err.refused or not self.database or self.database.lower() == "master":
            return refused
        probe = SqlServerCdcHook(self.sqlserver_cdc_conn_id, database="master", driver=self._driver)
        try:
            exists = (
                probe.query_value(tsql.DATABASE_ID, self.database, doing="looking up the database")
                is not None
            )
        except SqlServerCdcError:
            return refused  # the login itself is refused
        finally:
            probe.close()
        conn_id = self.sqlserver_cdc_conn_id
        if exists:
            return (
                f"Login {self.connection.login!r} may not open database {self.database!r} on SQL Server "
                f"{self.server}: add a user for it there (CREATE USER ... FOR LOGIN ...), or set the Database "
                f"(schema) of Airflow connection {conn_id!r} to one it may use."
            )
        return (
            f"There is no database {self.database!r} on SQL Server {self.server}: set the Database (schema) "
            f"of Airflow connection {conn_id!r} to an existing database."
        )

    def close(self) -> None:
        """Close the hook's connection."""
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def _translate(self, err: Exception, doing: str, capture_instance: str | None = None) -> Exception:
        """Turn a driver error into the provider's error with an actionable message."""
        context = ErrorContext.of_connection(
            self.connection, server=self.server, database=self.database, driver=self.odbc_driver
        )
        return translate_driver_error(err, doing, context, capture_instance)

    def query(self, sql: str, *params: Any, doing: str, capture_instance: str | None = None) -> list[Any]:
        """Run one query and return its rows; a driver error becomes the provider's error.

        :param sql: the query (from ``tsql``), with ``?`` parameters.
        :param params: its parameters.
        :param doing: what it does, for the error message.
        :param capture_instance: the capture instance it concerns, for the error message.
        """
        import pyodbc

        cursor = self.get_conn().cursor()
        try:
            cursor.execute(sql, *params)
            return cursor.fetchall()
        except pyodbc.Error as err:
            raise self._translate(err, doing, capture_instance) from None
        finally:
            cursor.close()

    def run_statement(self, sql: str, *, doing: str, capture_instance: str | None = None) -> None:
        """Run one statement that returns no rows (autocommit), draining its result sets and messages.

        :param sql: the statement (from ``tsql``).
        :param doing: what it does, for the error message.
        :param capture_instance: the capture instance it concerns, for the error message.
        """
        import pyodbc

        cursor = self.get_conn().cursor()
        try:
            cursor.execute(sql)
            while cursor.nextset():
                pass
        except pyodbc.Error as err:
            raise self._translate(err, doing, capture_instance) from None
        finally:
            cursor.close()

    def _query_instance(self, sql: str, capture_instance: str, *, doing: str) -> list[Any]:
        """Run ``sql`` with the capture instance (checked to be a valid name) as its one parameter."""
        tsql.validate_capture_instance(capture_instance)
        return self.query(sql, capture_instance, doing=doing, capture_instance=capture_instance)

    def query_value(self, sql: str, *params: Any, doing: str, capture_instance: str | None = None) -> Any:
        """Run one query (as :meth:`query`) and return the first column of its first row, None without rows."""
        rows = self.query(sql, *params, doing=doing, capture_instance=capture_instance)
        return rows[0][0] if rows else None

    # --- server clock ---------------------------------------------------------------------

    def get_server_now(self) -> datetime:
        """The server's clock as an aware datetime (``SYSDATETIMEOFFSET()``)."""
        value = self.query_value(tsql.SERVER_NOW, doing="reading the server clock")
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise SqlServerCdcError(f"SYSDATETIMEOFFSET() returned {value!r}, expected a datetimeoffset")
        return value

    def get_database_name(self) -> str:
        """``DB_NAME()``: the database the connection uses."""
        return str(self.query_value(tsql.CURRENT_DATABASE, doing="reading DB_NAME()"))

    def source_database(self) -> str:
        """The configured database, else the one the login lands in (``DB_NAME()``): part of watermark keys."""
        return self.database or self.get_database_name()

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
        value = self.query_value(tsql.MAX_LSN, doing="reading sys.fn_cdc_get_max_lsn()")
        if value is None:
            raise CdcNotEnabledError(
                f"sys.fn_cdc_get_max_lsn() returned NULL on {self.server}, database {self.database}: CDC is not "
                "enabled on this database or the capture job has not run yet. EXEC sys.sp_cdc_enable_db and "
                "make sure SQL Server Agent runs the capture job."
            )
        return Lsn(value)

    def get_min_lsn(self, capture_instance: str) -> Lsn:
        """``sys.fn_cdc_get_min_lsn(ci)``: the instance's low-water mark (zero when unknown or not permitted)."""
        rows = self._query_instance(tsql.MIN_LSN, capture_instance, doing="reading sys.fn_cdc_get_min_lsn")
        return Lsn(rows[0][0]) if rows and rows[0][0] is not None else Lsn.zero()

    def increment_lsn(self, lsn: Lsn) -> Lsn:
        """``sys.fn_cdc_increment_lsn``: the next LSN after ``lsn``."""
        return Lsn(self.query_value(tsql.INCREMENT_LSN, lsn.value, doing="incrementing an LSN"))

    def decrement_lsn(self, lsn: Lsn) -> Lsn:
        """``sys.fn_cdc_decrement_lsn``: the LSN before ``lsn``."""
        return Lsn(self.query_value(tsql.DECREMENT_LSN, lsn.value, doing="decrementing an LSN"))

    def count_changes(self, capture_instance: str, from_lsn: Lsn, to_lsn: Lsn) -> ChangeCount:
        """
        Count the instance's changes in ``[from_lsn, to_lsn]`` (both inside its valid range).

        :param capture_instance: the capture instance.
        :param from_lsn: the first LSN of the range.
        :param to_lsn: the last LSN of the range.
        """
        rows = self.query(
            tsql.change_count_query(capture_instance),
            from_lsn.value,
            to_lsn.value,
            doing=f"counting the changes of {capture_instance} in {from_lsn.hex}..{to_lsn.hex}",
            capture_instance=capture_instance,
        )
        count, first, last = rows[0] if rows else (0, None, None)
        return ChangeCount(
            int(count or 0),
            Lsn(first) if first is not None else None,
            Lsn(last) if last is not None else None,
        )

    def first_change_lsn(self, capture_instance: str, from_lsn: Lsn, to_lsn: Lsn) -> Lsn | None:
        """
        The LSN of the instance's first change in ``[from_lsn, to_lsn]`` (both inside its valid range); None: none.

        :param capture_instance: the capture instance.
        :param from_lsn: the first LSN of the range.
        :param to_lsn: the last LSN of the range.
        """
        sql = tsql.first_change_query(capture_instance)
        doing = f"reading the oldest unapplied change of {capture_instance}"
        value = self.query_value(
            sql, from_lsn.value, to_lsn.value, doing=doing, capture_instance=capture_instance
        )
        return None if value is None else Lsn(value)

    def map_time_to_lsn(self, relational_operator: str, local_time: datetime) -> Lsn | None:
        """
        ``sys.fn_cdc_map_time_to_lsn``: an LSN from ``cdc.lsn_time_mapping`` by commit time.

        :param relational_operator: one of :data:`tsql.RELATIONAL_OPERATORS`.
        :param local_time: naive server-local time.
        """
        if relational_operator not in tsql.RELATIONAL_OPERATORS:
            raise ValueError(f"Unknown relational operator {relational_operator!r}")
        value = self.query_value(
            tsql.MAP_TIME_TO_LSN, relational_operator, local_time, doing="mapping a time to an LSN"
        )
        return Lsn(value) if value is not None and any(value) else None

    def map_lsn_to_time(self, lsn: Lsn) -> datetime | None:
        """``sys.fn_cdc_map_lsn_to_time``: the server-local commit time of an LSN."""
        return self.query_value(tsql.MAP_LSN_TO_TIME, lsn.value, doing="mapping an LSN to a time")

    # --- database, capture instances, columns -----------------------------------------------

    def is_cdc_enabled(self) -> bool:
        """Whether ``sys.databases.is_cdc_enabled`` is set for the current database."""
        rows = self.query(tsql.DATABASE_CDC_ENABLED, doing="checking sys.databases.is_cdc_enabled")
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
        rows = self.query(tsql.CAPTURE_INSTANCES, doing="listing capture instances (cdc.change_tables)")
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

    def get_captured_columns(
        self, capture_instance: str, *, with_computed: bool = False
    ) -> list[CapturedColumn]:
        """The captured columns of an instance with their full types, in ``column_ordinal`` order.

        :param with_computed: also the computed columns, which CDC captures as NULL and the
            provider leaves out (docs/operations.md, "Computed columns").
        """
        rows = self._query_instance(tsql.CAPTURED_COLUMNS, capture_instance, doing="reading captured columns")
        return [c for c in map(_captured_column, rows) if with_computed or not c.computed]

    def get_source_columns(self, capture_instance: str) -> list[CapturedColumn]:
        """The instance's source table's columns now, with their types (``ordinal`` is ``column_id``).

        Computed columns are left out: the provider never replicates them from CDC, so adding or
        dropping one is no schema drift.
        """
        rows = self._query_instance(tsql.SOURCE_COLUMNS, capture_instance, doing="reading the source columns")
        return [c for c in map(_captured_column, rows) if not c.computed]

    def get_ddl_events(self, capture_instance: str, from_lsn: Lsn, to_lsn: Lsn) -> list[DdlEvent]:
        """The DDL run on the instance's source table in ``[from_lsn, to_lsn]`` (``cdc.ddl_history``).

        :param capture_instance: the capture instance.
        :param from_lsn: the first LSN.
        :param to_lsn: the last LSN.
        """
        rows = self.query(
            tsql.DDL_EVENTS,
            capture_instance,
            from_lsn.value,
            to_lsn.value,
            doing="reading cdc.ddl_history",
            capture_instance=capture_instance,
        )
        return [DdlEvent(str(r[0]), Lsn(r[1]), r[2], bool(r[3])) for r in rows]

    def get_key_columns(self, instance: CaptureInstance) -> list[str]:
        """Key columns: ``cdc.index_columns`` of the instance, else the source table's primary key."""
        rows = self.query(
            tsql.INDEX_COLUMNS,
            instance.name,
            doing="reading cdc.index_columns",
            capture_instance=instance.name,
        )
        if rows:
            return [r[0] for r in rows]
        rows = self.query(
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
        found = [
            find_capture_instance(
                name,
                instances,
                is_tracked=self._is_tracked_by_cdc,
                database=self.database,
                server=self.server,
            )
            for name in names
        ]
        if not with_columns:
            return found
        return [self.with_columns(instance) for instance in found]

    def with_columns(self, instance: CaptureInstance) -> CaptureInstance:
        """The instance with its columns and key columns loaded; computed columns left out, and said so."""
        captured = self.get_captured_columns(instance.name, with_computed=True)
        computed = tuple(c.name for c in captured if c.computed)
        keys = tuple(self.get_key_columns(instance))
        computed_keys = tuple(k for k in keys if k.lower() in {name.lower() for name in computed})
        if computed:
            self.log.info(
                "%s (source %s): computed columns %s are left out of the target: CDC captures computed "
                "columns as NULL, so their values never reach the change data (docs/operations.md, "
                '"Computed columns")',
                instance.name,
                instance.source,
                ", ".join(computed),
            )
        return replace(
            instance,
            columns=tuple(c for c in captured if not c.computed),
            key_columns=() if computed_keys else keys,
            computed_columns=computed,
            computed_key_columns=computed_keys,
        )

    def _is_tracked_by_cdc(self, schema: str, table: str) -> bool | None:
        """``sys.tables.is_tracked_by_cdc`` of a table; None when there is no such table."""
        rows = self.query(
            tsql.TABLE_CDC_TRACKED, schema, table, doing="checking sys.tables.is_tracked_by_cdc"
        )
        return bool(rows[0][0]) if rows else None

    def get_capture_job_status(self) -> CaptureJobStatus:
        """Whether the capture job runs and how far behind it is."""
        server_now = self.get_server_now().replace(tzinfo=None)
        max_lsn = self.get_max_lsn()
        max_time = self.map_lsn_to_time(max_lsn)
        configured, polling, last_scan = read_capture_job(self.get_conn(), self.log)
        error = read_last_scan_error(self.get_conn(), self.log)
        return CaptureJobStatus(configured, polling, server_now, max_lsn, max_time, last_scan, error)

    # --- change data ------------------------------------------------------------------------

    def changes_schema(self, instance: CaptureInstance) -> pa.Schema:
        """The Arrow schema of the instance's change rows (metadata columns, then captured columns)."""
        return changes_schema(instance)

    def stream_changes(
        self,
        instance: CaptureInstance,
        window: LsnWindow,
        *,
        tz: ServerTimeZone,
        row_filter_option: str = tsql.DEFAULT_ROW_FILTER_OPTION,
        batch_size: int = DEFAULT_BATCH_SIZE,
        reader: str = "auto",
    ) -> Iterator[pa.RecordBatch]:
        """
        Stream ``cdc.fn_cdc_get_all_changes_<ci>`` over the window as record batches of at most ``batch_size`` rows.

        Rows come in commit order (``__$start_lsn``, ``__$seqval``, ``__$operation``), on a connection
        of their own. ``reader="arrow-odbc"`` fetches column-wise straight into Arrow over the same
        ODBC driver (much less CPU); ``"pyodbc"`` fetches rows; ``"auto"`` uses arrow-odbc when it is
        installed and no captured column is a (max)/LOB type, whose size arrow-odbc must bound
        (see :class:`.change_reader.ChangeReader`).

        :param instance: the capture instance with its columns loaded.
        :param window: the LSN window (not queried when empty).
        :param tz: the server's time zone, for ``__$commit_time`` in UTC.
        :param row_filter_option: ``all`` or ``all update old``.
        :param batch_size: rows per batch.
        :param reader: ``auto``, ``arrow-odbc`` or ``pyodbc``.
        """
        changes = ChangeReader(
            instance, window, tz=tz, row_filter_option=row_filter_option, batch_size=batch_size, choice=reader
        )
        if window.is_empty:
            return
        self.log.info("%s: reading changes with %s", instance.name, changes.reader)
        try:
            if changes.reader == ARROW_ODBC:
                yield from changes.read_arrow_odbc(self.odbc_connection_string())
            else:
                yield from changes.read_pyodbc(self.new_connection())
        except changes.driver_errors() as err:
            raise self._translate(err, "reading change data", instance.name) from None


def _captured_column(row: Sequence[Any]) -> CapturedColumn:
    """Return a column from a row of CAPTURED_COLUMNS or SOURCE_COLUMNS."""
    return CapturedColumn(
        name=row[0],
        ordinal=int(row[1]),
        sql_type=str(row[2]),
        max_length=int(row[3]),
        precision=int(row[4]),
        scale=int(row[5]),
        nullable=bool(row[6]),
        computed=bool(row[7]),
    )
