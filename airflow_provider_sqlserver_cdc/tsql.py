"""
All T-SQL the provider sends to SQL Server, and ``quote_name`` (SQL Server's QUOTENAME rules).

Values are always ``?`` parameters. The only text built at run time is object names (the
capture instance's change function and captured column names), validated and quoted here
exactly as ``QUOTENAME`` does.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.errors import InvalidIdentifierError

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn

SYSNAME_MAX_CHARS = 128
CAPTURE_INSTANCE_MAX_CHARS = 100
ROW_FILTER_OPTIONS = ("all", "all update old")
#: The extract's default: keeps the before-images of updates (an update is then two rows, 3 and 4).
DEFAULT_ROW_FILTER_OPTION = "all update old"

# sys.fn_cdc_map_time_to_lsn relational operators.
SMALLEST_GREATER_THAN_OR_EQUAL = "smallest greater than or equal"
SMALLEST_GREATER_THAN = "smallest greater than"
LARGEST_LESS_THAN = "largest less than"
LARGEST_LESS_THAN_OR_EQUAL = "largest less than or equal"
RELATIONAL_OPERATORS = (
    SMALLEST_GREATER_THAN_OR_EQUAL,
    SMALLEST_GREATER_THAN,
    LARGEST_LESS_THAN,
    LARGEST_LESS_THAN_OR_EQUAL,
)


def quote_name(name: str) -> str:
    """
    Quote an identifier the way ``QUOTENAME(name)`` does: wrap in brackets, double every ``]``.

    QUOTENAME returns NULL above 128 characters; here that, an empty name and NUL characters
    raise InvalidIdentifierError instead.

    :param name: the identifier, unquoted.
    """
    if not isinstance(name, str) or name == "":
        raise InvalidIdentifierError(f"An identifier must be a non-empty string, got {name!r}")
    if len(name) > SYSNAME_MAX_CHARS:
        raise InvalidIdentifierError(
            f"Identifier {name[:40]!r}... is {len(name)} characters; SQL Server names (sysname) have at most "
            f"{SYSNAME_MAX_CHARS}"
        )
    if "\x00" in name:
        raise InvalidIdentifierError(f"Identifier {name!r} contains a NUL character")
    return "[" + name.replace("]", "]]") + "]"


def validate_name(name: str, *, kind: str, max_chars: int = SYSNAME_MAX_CHARS) -> str:
    """
    Check a schema, table or column name and return it unchanged.

    :param name: the name as stored in the catalog (unquoted).
    :param kind: what the name is, for the error message (e.g. ``"schema"``).
    :param max_chars: the longest name SQL Server accepts for this kind.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidIdentifierError(f"The {kind} name must be a non-empty string, got {name!r}")
    if len(name) > max_chars:
        raise InvalidIdentifierError(
            f"The {kind} name {name!r} has {len(name)} characters; at most {max_chars} are allowed"
        )
    if any(ord(ch) < 32 for ch in name):
        raise InvalidIdentifierError(f"The {kind} name {name!r} contains control characters")
    if name != name.strip():
        raise InvalidIdentifierError(f"The {kind} name {name!r} has leading or trailing spaces")
    return name


def validate_capture_instance(name: str) -> str:
    """Check a capture-instance name (sysname of at most 100 characters) and return it."""
    return validate_name(name, kind="capture instance", max_chars=CAPTURE_INSTANCE_MAX_CHARS)


def validate_row_filter_option(option: str) -> str:
    """Check the row filter option of ``fn_cdc_get_all_changes`` and return it."""
    if option not in ROW_FILTER_OPTIONS:
        raise ValueError(f"row_filter_option must be one of {ROW_FILTER_OPTIONS}, got {option!r}")
    return option


# --- server and database -------------------------------------------------------------------

SERVER_NOW = "SELECT SYSDATETIMEOFFSET()"
"""The server's clock with its current UTC offset (datetimeoffset)."""

CURRENT_DATABASE = "SELECT DB_NAME()"

DATABASE_ID = "SELECT DB_ID(?)"

DATABASE_CDC_ENABLED = "SELECT name, is_cdc_enabled FROM sys.databases WHERE name = DB_NAME()"

TABLE_CDC_TRACKED = (
    "SELECT t.is_tracked_by_cdc FROM sys.tables AS t "
    "JOIN sys.schemas AS s ON s.schema_id = t.schema_id "
    "WHERE s.name = ? AND t.name = ?"
)

# --- LSN functions -----------------------------------------------------------------------

MAX_LSN = "SELECT sys.fn_cdc_get_max_lsn()"
MIN_LSN = "SELECT sys.fn_cdc_get_min_lsn(?)"
INCREMENT_LSN = "SELECT sys.fn_cdc_increment_lsn(?)"
DECREMENT_LSN = "SELECT sys.fn_cdc_decrement_lsn(?)"
MAP_TIME_TO_LSN = "SELECT sys.fn_cdc_map_time_to_lsn(?, ?)"
MAP_LSN_TO_TIME = "SELECT sys.fn_cdc_map_lsn_to_time(?)"

# --- capture instances and their columns -------------------------------------------------

CAPTURE_INSTANCES = (
    "SELECT ct.capture_instance, s.name AS source_schema, t.name AS source_table, ct.start_lsn, "
    "ct.supports_net_changes, ct.role_name, ct.index_name, ct.create_date "
    "FROM cdc.change_tables AS ct "
    "JOIN sys.tables AS t ON t.object_id = ct.source_object_id "
    "JOIN sys.schemas AS s ON s.schema_id = t.schema_id "
    "ORDER BY ct.capture_instance"
)

CAPTURED_COLUMNS = (
    "SELECT cc.column_name, cc.column_ordinal, cc.column_type, c.max_length, c.precision, c.scale, "
    "COALESCE(sc.is_nullable, 1) AS is_nullable, cc.is_computed "
    "FROM cdc.captured_columns AS cc "
    "JOIN cdc.change_tables AS ct ON ct.object_id = cc.object_id "
    "JOIN sys.columns AS c ON c.object_id = ct.object_id AND c.name = cc.column_name "
    "LEFT JOIN sys.columns AS sc ON sc.object_id = ct.source_object_id AND sc.name = cc.column_name "
    "WHERE ct.capture_instance = ? "
    "ORDER BY cc.column_ordinal"
)
"""Captured columns with their full types, read from the change table's own columns (which keep
a column's type even after it was dropped from the source table); nullability from the source
table (change-table columns are all nullable), NULL-able when the source column was dropped;
``is_computed`` as CDC recorded it (a computed column is captured as NULL)."""

SOURCE_COLUMNS = (
    "SELECT c.name, c.column_id, TYPE_NAME(c.user_type_id), c.max_length, c.precision, c.scale, c.is_nullable, "
    "c.is_computed "
    "FROM cdc.change_tables AS ct "
    "JOIN sys.columns AS c ON c.object_id = ct.source_object_id "
    "WHERE ct.capture_instance = ? "
    "ORDER BY c.column_id"
)
"""The source table's columns now, with their types, in the shape of CAPTURED_COLUMNS (schema drift)."""

DDL_EVENTS = (
    "SELECT h.ddl_command, h.ddl_lsn, h.ddl_time, h.required_column_update "
    "FROM cdc.ddl_history AS h "
    "JOIN cdc.change_tables AS ct ON ct.object_id = h.object_id "
    "WHERE ct.capture_instance = ? AND h.ddl_lsn BETWEEN ? AND ? "
    "ORDER BY h.ddl_lsn"
)
"""The DDL run on a capture instance's source table between two LSNs (``cdc.ddl_history``)."""

INDEX_COLUMNS = (
    "SELECT ic.column_name FROM cdc.index_columns AS ic "
    "JOIN cdc.change_tables AS ct ON ct.object_id = ic.object_id "
    "WHERE ct.capture_instance = ? "
    "ORDER BY ic.index_ordinal"
)
"""Key columns CDC recorded for the instance: the primary key or the unique ``@index_name``."""

PRIMARY_KEY_COLUMNS = (
    "SELECT c.name FROM sys.indexes AS i "
    "JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id "
    "JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id "
    "JOIN sys.tables AS t ON t.object_id = i.object_id "
    "JOIN sys.schemas AS s ON s.schema_id = t.schema_id "
    "WHERE i.is_primary_key = 1 AND s.name = ? AND t.name = ? "
    "ORDER BY ic.key_ordinal"
)

# --- capture job --------------------------------------------------------------------------

CAPTURE_JOB = "SELECT job_type, pollinginterval, retention FROM msdb.dbo.cdc_jobs WHERE database_id = DB_ID()"

LAST_LOG_SCAN = "SELECT TOP 1 start_time, end_time FROM sys.dm_cdc_log_scan_sessions ORDER BY session_id DESC"

# The error of the latest log scan session when it failed (sys.dm_cdc_errors keeps 32 sessions'
# errors: an older one the capture job has since got past is not reported).
LAST_SCAN_ERROR = (
    "SELECT TOP 1 e.error_number, e.error_message, e.start_lsn FROM sys.dm_cdc_errors AS e "
    "WHERE e.session_id = (SELECT MAX(s.session_id) FROM sys.dm_cdc_log_scan_sessions AS s) "
    "ORDER BY e.entry_time DESC"
)

# --- change data ------------------------------------------------------------------------------

METADATA_COLUMNS = ("__$start_lsn", "__$seqval", "__$operation", "__$update_mask")
COMMIT_TIME_COLUMN = "__$commit_time"


class ReadForm(enum.Enum):
    """How the change query reads a column so that no digit is lost."""

    NATIVE = "native"
    TEXT = "text"  # CAST(col AS varchar(40)): datetime2, datetimeoffset, time
    GUID_TEXT = "guid_text"  # CAST(col AS char(36))
    NTEXT = "ntext"  # CAST(col AS nvarchar(max)): xml


def read_form(column: CapturedColumn) -> ReadForm:
    """Return how the column is selected (see :class:`ReadForm`)."""
    t = column.sql_type.lower()
    if t in ("datetime2", "datetimeoffset", "time"):
        return ReadForm.TEXT
    if t == "uniqueidentifier":
        return ReadForm.GUID_TEXT
    if t == "xml":
        return ReadForm.NTEXT
    return ReadForm.NATIVE


def column_read_expression(column: CapturedColumn) -> str:
    """
    The select-list expression that reads one captured column without losing precision.

    datetime2, datetimeoffset and time are read as their default string form (every digit of
    the declared scale and the offset), uniqueidentifier as its 36-character form; every other
    type is read natively.
    """
    name = quote_name(column.name)
    form = read_form(column)
    if form is ReadForm.TEXT:
        return f"CAST({name} AS varchar(40)) AS {name}"
    if form is ReadForm.GUID_TEXT:
        return f"CAST({name} AS char(36)) AS {name}"
    return name


def all_changes_query(
    capture_instance: str, columns: Sequence[CapturedColumn], *, lsn_parameters_as_text: bool = False
) -> str:
    """
    The query that streams ``cdc.fn_cdc_get_all_changes_<ci>(?, ?, ?)`` in commit order.

    Parameters: from LSN, to LSN (binary(10)), row filter option. The commit time of every row
    comes from ``sys.fn_cdc_map_lsn_to_time`` (server local time).

    :param capture_instance: the capture instance (validated and quoted here).
    :param columns: the captured columns in ``column_ordinal`` order.
    :param lsn_parameters_as_text: the LSN parameters are bound as ``0x…`` text (for readers that bind
        only text, such as arrow-odbc) and converted with ``CONVERT(binary(10), ?, 1)``.
    """
    validate_capture_instance(capture_instance)
    function = quote_name("fn_cdc_get_all_changes_" + capture_instance)
    select = [quote_name(c) for c in METADATA_COLUMNS]
    select.append(
        f"sys.fn_cdc_map_lsn_to_time({quote_name('__$start_lsn')}) AS {quote_name(COMMIT_TIME_COLUMN)}"
    )
    select.extend(column_read_expression(c) for c in columns)
    lsn = "CONVERT(binary(10), ?, 1)" if lsn_parameters_as_text else "?"
    return (
        f"SELECT {', '.join(select)} FROM [cdc].{function}({lsn}, {lsn}, ?) "
        "ORDER BY [__$start_lsn], [__$seqval], [__$operation]"
    )


def change_count_query(capture_instance: str) -> str:
    """
    The count, first and last ``__$start_lsn`` of an instance's changes in an LSN range (contiguity guard).

    Parameters: from LSN, to LSN (binary(10)); both inside the instance's valid range.

    :param capture_instance: the capture instance (validated and quoted here).
    """
    validate_capture_instance(capture_instance)
    function = quote_name("fn_cdc_get_all_changes_" + capture_instance)
    return (
        f"SELECT COUNT_BIG(*), MIN([__$start_lsn]), MAX([__$start_lsn]) FROM [cdc].{function}(?, ?, N'all')"
    )


# --- snapshot (initial load; see docs/snapshot.md) -----------------------------------------------

SNAPSHOT_SAVEPOINT = "sqlserver_cdc_snapshot"
SNAPSHOT_ROW_ALIAS = "src"

SNAPSHOT_ISOLATION_STATE = (
    "SELECT snapshot_isolation_state, snapshot_isolation_state_desc FROM sys.databases WHERE name = DB_NAME()"
)
"""Whether ALLOW_SNAPSHOT_ISOLATION is on (state 1 = ON) for the current database."""

SET_SNAPSHOT_ISOLATION = "SET TRANSACTION ISOLATION LEVEL SNAPSHOT"
SET_READ_COMMITTED = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"

SAVE_SNAPSHOT_SAVEPOINT = f"SAVE TRANSACTION {SNAPSHOT_SAVEPOINT}"
"""Makes the (read-only) snapshot transaction write a log record, so that it gets a begin LSN."""

TRANSACTION_BEGIN_LSN = (
    "SELECT database_transaction_begin_lsn, SYSDATETIMEOFFSET() FROM sys.dm_tran_database_transactions "
    "WHERE transaction_id = CURRENT_TRANSACTION_ID() AND database_id = DB_ID()"
)
"""The current transaction's begin LSN (numeric(25,0)) in this database, and the server clock.

Needs VIEW SERVER STATE (SQL Server 2022: VIEW SERVER PERFORMANCE STATE)."""


def set_lock_timeout(milliseconds: int) -> str:
    """``SET LOCK_TIMEOUT n`` (the statement takes no parameter; ``n`` is validated as an integer)."""
    if isinstance(milliseconds, bool) or not isinstance(milliseconds, int) or milliseconds < -1:
        raise ValueError(
            f"lock timeout must be an integer number of milliseconds >= -1, got {milliseconds!r}"
        )
    return f"SET LOCK_TIMEOUT {milliseconds}"


def _source_table(schema: str, table: str) -> str:
    validate_name(schema, kind="schema")
    validate_name(table, kind="table")
    return f"{quote_name(schema)}.{quote_name(table)}"


def lock_table_statement(schema: str, table: str) -> str:
    """
    Take a shared table lock held to the end of the transaction: writers wait, readers do not.

    The TABLOCK hint asks for a table-level lock, HOLDLOCK keeps it until the transaction ends;
    the lock is granted only once every open transaction that wrote the table has ended.
    """
    return f"SELECT TOP (1) 1 FROM {_source_table(schema, table)} WITH (TABLOCK, HOLDLOCK)"


def fix_snapshot_statement(schema: str, table: str) -> str:
    """A first read of the table: a SNAPSHOT transaction's view of the data is fixed by its first read."""
    return f"SELECT TOP (1) 1 FROM {_source_table(schema, table)}"


def keyset_predicate(key_columns: Sequence[CapturedColumn]) -> str:
    """
    ``(k1, k2, ...) > (?, ?, ...)`` in T-SQL, which has no row-value comparison.

    Nested form ``k1 > ? OR (k1 = ? AND (k2 > ? OR (k2 = ? AND k3 > ?)))``; every parameter is
    cast to the key column's declared type, so the comparison uses the column's own ordering
    (collation, uniqueidentifier byte order) exactly as ``ORDER BY`` does. Parameters: each
    key value twice except the last, in key order (see :func:`keyset_parameters`).
    """
    if not key_columns:
        raise ValueError("keyset pagination needs at least one key column")
    return _key_bound_predicate(key_columns, ">", ">")


def keyset_parameters(last_key: Sequence[object]) -> list[object]:
    """The parameters of :func:`keyset_predicate` for the last key read."""
    values: list[object] = []
    for value in last_key[:-1]:
        values += [value, value]
    values.append(last_key[-1])
    return values


def snapshot_chunk_query(
    schema: str,
    table: str,
    columns: Sequence[CapturedColumn],
    key_columns: Sequence[CapturedColumn],
    *,
    after_key: bool,
) -> str:
    """
    One key-range chunk of the table: ``SELECT TOP (?) <columns> ... ORDER BY <key>``.

    Parameters: the chunk's row limit, then (when ``after_key``) :func:`keyset_parameters` of
    the last key of the previous chunk. With no key columns the whole table is read in one
    query (no TOP, no ORDER BY).

    :param schema: source schema.
    :param table: source table.
    :param columns: the captured columns in ``column_ordinal`` order (read as in change windows).
    :param key_columns: the key columns in index order.
    :param after_key: continue after a previous chunk's last key.
    """
    select = ", ".join(column_read_expression(c) for c in columns)
    source = f"{_source_table(schema, table)} AS {quote_name(SNAPSHOT_ROW_ALIAS)}"
    if not key_columns:
        return f"SELECT {select} FROM {source}"
    where = f" WHERE {keyset_predicate(key_columns)}" if after_key else ""
    order = ", ".join(f"{quote_name(SNAPSHOT_ROW_ALIAS)}.{quote_name(c.name)}" for c in key_columns)
    return f"SELECT TOP (?) {select} FROM {source}{where} ORDER BY {order}"


# --- Change Tracking (a second source; see docs/change-tracking.md) --------------------------------

CT_CURRENT_VERSION = "SELECT CHANGE_TRACKING_CURRENT_VERSION()"
"""The version of the last committed transaction that changed a tracked table (NULL: CT is off)."""

CT_TRACKED_TABLE = (
    "SELECT s.name, t.name, ctt.begin_version, ctt.is_track_columns_updated_on "
    "FROM sys.change_tracking_tables AS ctt "
    "JOIN sys.tables AS t ON t.object_id = ctt.object_id "
    "JOIN sys.schemas AS s ON s.schema_id = t.schema_id "
    "WHERE s.name = ? AND t.name = ?"
)
"""One table's change tracking registration; no row when the table is not tracked."""

CT_DATABASE_RETENTION = (
    "SELECT retention_period, retention_period_units_desc FROM sys.change_tracking_databases "
    "WHERE database_id = DB_ID()"
)

TABLE_COLUMNS = (
    "SELECT c.name, c.column_id, ty.name, c.max_length, c.precision, c.scale, c.is_nullable "
    "FROM sys.columns AS c "
    "JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id "
    "JOIN sys.tables AS t ON t.object_id = c.object_id "
    "JOIN sys.schemas AS s ON s.schema_id = t.schema_id "
    "WHERE s.name = ? AND t.name = ? "
    "ORDER BY c.column_id"
)
"""A table's columns with their full types, in column order (a Change Tracking source reads them all)."""

CT_VERSION_AT = "SELECT MAX(commit_ts) FROM sys.dm_tran_commit_table WHERE commit_time < ?"
"""The last change tracking version committed before a UTC time (needs VIEW SERVER STATE)."""

CT_OPERATION_COLUMN = "__$ct_operation"
CT_VERSION_COLUMN = "__$ct_version"
CT_ROW_ALIAS = "T"
CT_CHANGE_ALIAS = "CT"


def ct_min_valid_version_query(schema: str, table: str) -> str:
    """``CHANGE_TRACKING_MIN_VALID_VERSION`` of one table (NULL: not tracked)."""
    name = _source_table(schema, table).replace("'", "''")
    return f"SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID(N'{name}'))"


def _aliased_read(alias: str, column: CapturedColumn) -> str:
    """:func:`column_read_expression` of a column of the row source ``alias``."""
    read = column_read_expression(column)
    name = quote_name(column.name)
    qualified = f"{quote_name(alias)}.{name}"
    if read == name:
        return f"{qualified} AS {name}"
    return read.replace(f"CAST({name} ", f"CAST({qualified} ", 1)


def ct_changes_query(
    schema: str, table: str, columns: Sequence[CapturedColumn], key_columns: Sequence[str]
) -> str:
    """
    The net changes of a tracked table after a version, with the row's current values.

    ``CHANGETABLE(CHANGES t, ?)`` LEFT JOIN the table on the primary key (a deleted row has only
    its key): version, operation (``I``/``U``/``D``), then every column in column order, key
    columns from the change table, the others from the table. Parameter: the last synchronized
    version. Run it in the SNAPSHOT transaction that read CHANGE_TRACKING_CURRENT_VERSION() so the
    versions and the values agree.
    """
    source = _source_table(schema, table)
    keys = {k.lower() for k in key_columns}
    change, row = quote_name(CT_CHANGE_ALIAS), quote_name(CT_ROW_ALIAS)
    select = [
        f"{change}.[SYS_CHANGE_VERSION] AS {quote_name(CT_VERSION_COLUMN)}",
        f"{change}.[SYS_CHANGE_OPERATION] AS {quote_name(CT_OPERATION_COLUMN)}",
    ]
    select += [_aliased_read(CT_CHANGE_ALIAS if c.name.lower() in keys else CT_ROW_ALIAS, c) for c in columns]
    on = " AND ".join(f"{row}.{quote_name(k)} = {change}.{quote_name(k)}" for k in key_columns)
    return (
        f"SELECT {', '.join(select)} FROM CHANGETABLE(CHANGES {source}, ?) AS {change} "
        f"LEFT OUTER JOIN {source} AS {row} ON {on} ORDER BY {change}.[SYS_CHANGE_VERSION]"
    )


def ct_rows_with_values_query(
    schema: str, table: str, columns: Sequence[CapturedColumn], value_columns: Sequence[str]
) -> str:
    """
    The rows of a tracked table that hold a value in any of ``value_columns``, every column read as in a window.

    A Change Tracking window re-reads them after columns were added to the table (``ADD c ...
    DEFAULT x WITH VALUES`` gives every existing row a value, and those rows are not in CHANGETABLE).
    No parameters; run it in the window's SNAPSHOT transaction.

    :param value_columns: the added columns (at least one).
    """
    if not value_columns:
        raise ValueError("value_columns must name at least one column")
    row = quote_name(CT_ROW_ALIAS)
    select = ", ".join(_aliased_read(CT_ROW_ALIAS, c) for c in columns)
    where = " OR ".join(f"{row}.{quote_name(name)} IS NOT NULL" for name in value_columns)
    return f"SELECT {select} FROM {_source_table(schema, table)} AS {row} WHERE {where}"


# --- schema changes: a second capture instance and the blind-spot back-fill (docs/schema-changes.md) --


def _unicode_literal(value: str | None) -> str:
    """``N'...'`` with quotes doubled, or ``NULL``."""
    return "NULL" if value is None else "N'" + value.replace("'", "''") + "'"


def enable_capture_instance_statement(
    schema: str, table: str, capture_instance: str, *, role_name: str | None, index_name: str | None
) -> str:
    """
    ``EXEC sys.sp_cdc_enable_table`` for a further capture instance of an enabled table (needs db_owner).

    The procedure takes names as values, not identifiers, so they are validated and passed as
    ``N'...'`` literals. ``@supports_net_changes`` is left to its default.

    :param schema: source schema.
    :param table: source table.
    :param capture_instance: the new instance's name (at most 100 characters).
    :param role_name: the gating role of the old instance (None: ungated).
    :param index_name: the unique index the old instance identifies rows by (None: the primary key).
    """
    validate_name(schema, kind="schema")
    validate_name(table, kind="table")
    validate_capture_instance(capture_instance)
    statement = (
        f"EXEC sys.sp_cdc_enable_table @source_schema = {_unicode_literal(schema)}, "
        f"@source_name = {_unicode_literal(table)}, @role_name = {_unicode_literal(role_name)}, "
        f"@capture_instance = {_unicode_literal(capture_instance)}"
    )
    if index_name is not None:
        statement += f", @index_name = {_unicode_literal(validate_name(index_name, kind='index'))}"
    return statement


def disable_capture_instance_statement(schema: str, table: str, capture_instance: str) -> str:
    """``EXEC sys.sp_cdc_disable_table`` for one capture instance (needs db_owner)."""
    validate_name(schema, kind="schema")
    validate_name(table, kind="table")
    validate_capture_instance(capture_instance)
    return (
        f"EXEC sys.sp_cdc_disable_table @source_schema = {_unicode_literal(schema)}, "
        f"@source_name = {_unicode_literal(table)}, @capture_instance = {_unicode_literal(capture_instance)}"
    )


def rows_by_key_query(
    schema: str,
    table: str,
    columns: Sequence[CapturedColumn],
    key_columns: Sequence[CapturedColumn],
    keys: int,
) -> str:
    """
    The current rows of ``keys`` primary-key values: ``SELECT <columns> ... WHERE (k1 = ? AND ...) OR ...``.

    Each parameter is cast to its key column's type, as in :func:`keyset_predicate`. Parameters:
    each key's values in key order, key after key.

    :param schema: source schema.
    :param table: source table.
    :param columns: the columns to read (read as in change windows).
    :param key_columns: the key columns in index order.
    :param keys: how many keys the query looks up (at least 1).
    """
    if not key_columns or keys < 1:
        raise ValueError("a lookup by key needs key columns and at least one key")
    select = ", ".join(column_read_expression(c) for c in columns)
    alias = quote_name(SNAPSHOT_ROW_ALIAS)
    one = " AND ".join(f"{alias}.{quote_name(k.name)} = CAST(? AS {k.describe()})" for k in key_columns)
    where = " OR ".join(f"({one})" for _ in range(keys))
    return f"SELECT {select} FROM {_source_table(schema, table)} AS {alias} WHERE {where}"


# --- retention headroom (hooks/retention_headroom.py; docs/operations.md "Time to loss") ----------

CLEANUP_RETENTION = (
    "SELECT retention FROM msdb.dbo.cdc_jobs WHERE database_id = DB_ID() AND job_type = N'cleanup'"
)
"""The cleanup job's retention in minutes (no row: no cleanup job; needs SELECT on msdb.dbo.cdc_jobs)."""

HELP_JOBS = "EXEC sys.sp_cdc_help_jobs"
"""The CDC jobs' settings (db_owner): the fallback when msdb.dbo.cdc_jobs is not readable."""


def first_change_query(capture_instance: str) -> str:
    """
    The first ``__$start_lsn`` of an instance's changes in an LSN range: the oldest change not applied yet.

    Parameters: from LSN, to LSN (binary(10)); both inside the instance's valid range.

    :param capture_instance: the capture instance (validated and quoted here).
    """
    validate_capture_instance(capture_instance)
    function = quote_name("fn_cdc_get_all_changes_" + capture_instance)
    return f"SELECT TOP (1) [__$start_lsn] FROM [cdc].{function}(?, ?, N'all') ORDER BY [__$start_lsn]"


CT_FIRST_COMMIT_AFTER = "SELECT MIN(commit_time) FROM sys.dm_tran_commit_table WHERE commit_ts > ?"
"""The UTC commit time (smalldatetime: to the nearest minute) of the first version after one (VIEW SERVER STATE)."""


# --- reconcile (snapshot/reconcile.py, hooks/reconcile_source.py; docs/reconcile.md) ---------------


def _key_bound_predicate(key_columns: Sequence[CapturedColumn], strict: str, last: str) -> str:
    """``(k1, k2, ...) <op> (?, ...)`` nested as :func:`keyset_predicate` does, ``last`` on the last column."""
    predicate = ""
    for column in reversed(key_columns):
        name = f"{quote_name(SNAPSHOT_ROW_ALIAS)}.{quote_name(column.name)}"
        value = f"CAST(? AS {column.describe()})"
        if not predicate:
            predicate = f"{name} {last} {value}"
        else:
            predicate = f"{name} {strict} {value} OR ({name} = {value} AND ({predicate}))"
    return predicate


def key_range_query(
    schema: str,
    table: str,
    columns: Sequence[CapturedColumn],
    key_columns: Sequence[CapturedColumn],
    *,
    lower: bool,
    upper: bool,
) -> str:
    """
    The rows of a key range in key order: ``lower <= key < upper`` (either bound may be left out).

    Parameters: :func:`keyset_parameters` of the lower bound, then of the upper bound, each cast to
    its key column's type as in :func:`keyset_predicate`. ``columns`` are read as in change windows.
    """
    if not key_columns:
        raise ValueError("a key range needs key columns")
    select = ", ".join(column_read_expression(c) for c in columns)
    source = f"{_source_table(schema, table)} AS {quote_name(SNAPSHOT_ROW_ALIAS)}"
    bounds = []
    if lower:
        bounds.append(f"({_key_bound_predicate(key_columns, '>', '>=')})")
    if upper:
        bounds.append(f"({_key_bound_predicate(key_columns, '<', '<')})")
    where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
    order = ", ".join(f"{quote_name(SNAPSHOT_ROW_ALIAS)}.{quote_name(c.name)}" for c in key_columns)
    return f"SELECT {select} FROM {source}{where} ORDER BY {order}"
