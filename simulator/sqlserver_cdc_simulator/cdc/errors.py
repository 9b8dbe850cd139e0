"""The SQL Server errors CDC raises: numbers, severities, states and message texts as SQL Server has them."""

from __future__ import annotations

from sqlserver_cdc_simulator.errors import SqlError


# One function per SQL Server message, on purpose: each mirrors one catalogue entry (number, severity,
# state, text) that a client may match, so these same-shape blocks stay one by one (issue 34 item 6).
class CdcError(SqlError):
    """
    A SQL Server error raised by a CDC object.

    :param number: SQL Server's message number (``sys.messages.message_id``).
    :param message: the formatted message text.
    :param severity: the error's severity (class).
    :param state: the error's state.
    """

    def __init__(self, number: int, message: str, severity: int = 16, state: int = 1) -> None:
        super().__init__(number, severity, state, message)


def insufficient_arguments(function_kind: str) -> CdcError:
    """
    Error 313, which the query functions raise for every invalid request.

    SQL Server's functions force it by calling a placeholder function literally named
    ``cdc.fn_cdc_get_all_changes_ ...`` (or ``..._net_changes_ ...``), so the text is the same for
    every capture instance and every cause (range below the low-water mark, above the max LSN,
    from > to, NULL bounds, bad row filter option).
    """
    return CdcError(
        313,
        "An insufficient number of arguments were supplied for the procedure or function "
        f"cdc.fn_cdc_get_{function_kind}_changes_ ... .",
        severity=16,
        state=3,
    )


def select_permission_denied(object_name: str, database: str, schema: str = "cdc") -> CdcError:
    """Error 229: the caller lacks SELECT on a query function (e.g. not in the gating role)."""
    return CdcError(
        229,
        f"The SELECT permission was denied on the object '{object_name}', database '{database}', schema '{schema}'.",
        severity=14,
        state=5,
    )


def invalid_object_name(name: str) -> CdcError:
    """Error 208 (e.g. a net changes function of an instance created without net changes)."""
    return CdcError(208, f"Invalid object name '{name}'.", severity=16, state=1)


def truncate_blocked(table: str) -> CdcError:
    """Error 4711: TRUNCATE TABLE on a table enabled for CDC."""
    return CdcError(
        4711,
        f"Cannot truncate table '{table}' because it is published for replication or enabled for Change Data Capture.",
        severity=16,
        state=1,
    )


def database_not_enabled(database: str) -> CdcError:
    """Error 22901."""
    return CdcError(
        22901,
        f"The database '{database}' is not enabled for Change Data Capture. Ensure that the correct database "
        "context is set and retry the operation. To report on the databases enabled for Change Data Capture, "
        "query the is_cdc_enabled column in the sys.databases catalog view.",
    )


def cleanup_database_not_enabled(database: str) -> CdcError:
    """Error 22910 (the cleanup procedures' check)."""
    return CdcError(
        22910,
        f"The cleanup request for database '{database}' failed. The database is not enabled for Change Data Capture.",
    )


def database_already_enabled(database: str) -> CdcError:
    """Message 22905 (severity 10: an informational message, not an error)."""
    return CdcError(
        22905,
        f"Database '{database}' is already enabled for Change Data Capture. Ensure that the correct database "
        "context is set, and retry the operation. To report on the databases enabled for Change Data Capture, "
        "query the is_cdc_enabled column in the sys.databases catalog view.",
        severity=10,
    )


def cdc_schema_exists(database: str) -> CdcError:
    """Error 22906."""
    return CdcError(
        22906,
        f"The database '{database}' cannot be enabled for Change Data Capture because a database user named "
        "'cdc' or a schema named 'cdc' already exists in the current database. These objects are required "
        "exclusively by Change Data Capture. Drop or rename the user or schema and retry the operation.",
    )


def not_authorized(privileges: str = "sysadmin") -> CdcError:
    """Error 22902."""
    return CdcError(
        22902,
        f"Caller is not authorized to initiate the requested action. {privileges} privileges are required.",
    )


def dbo_required() -> CdcError:
    """Error 22904."""
    return CdcError(
        22904, "Caller is not authorized to initiate the requested action. DBO privileges are required."
    )


def role_name_empty() -> CdcError:
    """Error 22907."""
    return CdcError(
        22907,
        "Parameter @role_name cannot be empty. Specify a value for @role_name and retry the operation. Supply "
        "null as the value if no role is to be used to gate access to captured change data.",
    )


def capture_instance_exists(name: str) -> CdcError:
    """Error 22926."""
    return CdcError(
        22926,
        f"Could not create a capture instance because the capture instance name '{name}' already exists in the "
        "current database. Specify an explicit unique name for the parameter @capture_instance.",
    )


def capture_instance_too_long(name: str) -> CdcError:
    """Error 22927."""
    return CdcError(
        22927,
        f"Capture instance name '{name}' exceeds the length limit of 100 characters. Specify a name that "
        "satisfies the length constraint.",
    )


def index_not_found(index: str, schema: str, table: str) -> CdcError:
    """Error 22928."""
    return CdcError(
        22928,
        f"Index name '{index}' is not an index for table '{schema}.{table}'. Specify a valid index name for the table.",
    )


def index_not_unique(index: str, schema: str, table: str) -> CdcError:
    """Error 22929."""
    return CdcError(
        22929,
        f"Index '{index}' must be either a primary key or a unique index for table '{schema}.{table}'. Specify "
        "an index that meets at least one of these requirements.",
    )


def column_not_found(column: str, schema: str, table: str) -> CdcError:
    """Error 22930."""
    return CdcError(
        22930,
        f"Could not locate '{column}' as a column of source table '{schema}.{table}'. Specify a valid column name.",
    )


def source_table_missing(schema: str, table: str) -> CdcError:
    """Error 22931."""
    return CdcError(
        22931,
        f"Source table '{schema}.{table}' does not exist in the current database. Ensure that the correct "
        "database context is set. Specify a valid schema and table name for the database.",
    )


def net_changes_need_unique_index() -> CdcError:
    """Error 22939."""
    return CdcError(
        22939,
        "The parameter @supports_net_changes is set to 1, but the source table does not have a primary key "
        "defined and no alternate unique index has been specified.",
    )


def captured_columns_unmapped(schema: str, table: str) -> CdcError:
    """Error 22942."""
    return CdcError(
        22942,
        f"Columns specified in the captured column list could not be mapped to columns in source table "
        f"'{schema}.{table}'. Verify that the columns specified in the parameter @captured_column_list are "
        "delimited properly and match columns in the source table.",
    )


def index_columns_not_captured() -> CdcError:
    """Error 22943."""
    return CdcError(
        22943,
        "Columns used to uniquely identify a row for net change tracking must be included in the list of "
        "captured columns. Add either the primary key columns of the source table, or the columns defined for "
        "the index specified in the parameter @index_name to the list of captured columns and retry the operation.",
    )


def instance_not_enabled_for_table(name: str, schema: str, table: str) -> CdcError:
    """Error 22960."""
    return CdcError(
        22960,
        f"Change data capture instance '{name}' has not been enabled for the source table '{schema}.{table}'. "
        "Use sys.sp_cdc_help_change_data_capture to verify the capture instance name and retry the operation.",
    )


def two_capture_instances(schema: str, table: str) -> CdcError:
    """Error 22962: a third capture instance for one table."""
    return CdcError(
        22962,
        f"Two capture instances already exist for source table '{schema}.{table}'. A table can have at most two "
        "capture instances. If the current tracking options are not appropriate, disable change tracking for "
        "the obsolete instance by using sys.sp_cdc_disable_table and retry the operation.",
    )


def parameter_null_or_empty(parameter: str) -> CdcError:
    """Error 22963."""
    return CdcError(
        22963,
        f"Parameter '{parameter}' cannot be null or empty. Specify a value for the named parameter and retry the operation.",
    )


def low_water_mark_not_in_mapping(lsn_hex: str) -> CdcError:
    """Error 22964 (SQL Server formats the LSN as ``upper(sys.fn_varbintohexstr(lsn))``: ``0X...``)."""
    return CdcError(
        22964,
        f"LSN {lsn_hex}, specified as the new low end point for change table cleanup must represent the "
        "start_lsn value of a current entry in the cdc.lsn_time_mapping table. Choose an LSN value that "
        "satisfies this requirement.",
    )


def cdc_schema_table() -> CdcError:
    """Error 22974."""
    return CdcError(22974, "Tables contained in the cdc schema cannot be enabled for Change Data Capture.")


def reserved_column_names(table: str) -> CdcError:
    """Error 22975."""
    return CdcError(
        22975,
        f"Source table '{table}' contains one of the following reserved column names: __$start_lsn, __$end_lsn, "
        "__$seqval, __$operation, and __$update_mask. To enable Change Data Capture for this table, specify a "
        "captured column list and ensure that these columns are excluded from the list.",
    )


def object_missing_or_denied() -> CdcError:
    """Error 22981."""
    return CdcError(22981, "Object does not exist or access is denied.")


def table_not_enabled(schema: str, table: str) -> CdcError:
    """Error 22985 (text as far as SQL Server 2022's message catalogue gives it)."""
    return CdcError(
        22985,
        f"Change data capture has not been enabled for source table '{schema}.{table}'. Specify the name of a "
        "table enabled for Change Data Capture. To report on the tables enabled for Change Data Capture, query "
        "the is_tracked_by_cdc column in the sys.tables catalog view.",
    )


def help_arguments_mismatch() -> CdcError:
    """Error 22972."""
    return CdcError(
        22972,
        "When calling stored procedure [sys].sp_cdc_help_change_data capture, if either @source_schema or "
        "@source_name is non-null and non-empty, the other parameter must also be non-null and non-empty.",
    )


def maxscans_not_positive() -> CdcError:
    """Error 22970."""
    return CdcError(
        22970,
        "The value for parameter @maxscans specified for the Change Data Capture job must be greater than 0.",
    )


def threshold_not_positive() -> CdcError:
    """Error 22850."""
    return CdcError(
        22850,
        "The threshold value specified for the Change Data Capture cleanup process must be greater than 0. When "
        "creating or modifying the cleanup job, specify a positive threshold value. If this error is encountered "
        "when executing the sys.sp_cdc_cleanup_change_table stored procedure, reset the threshold value "
        "associated with the job to a non-negative value by using the sp_cdc_change_job stored procedure.",
    )


def polling_interval_out_of_range() -> CdcError:
    """Error 22990."""
    return CdcError(
        22990,
        "The value specified for the parameter @pollinginterval must be greater than or equal to 0 and less than "
        "24 hours(Max: 86399 seconds). Specify a polling interval (in seconds) that is less than 24 hours "
        "(86,400 seconds).",
    )


def maxtrans_not_positive() -> CdcError:
    """Error 22991."""
    return CdcError(22991, "The value specified for the parameter @maxtrans must be greater than 0.")


def job_type_unsupported(job_type: str) -> CdcError:
    """Error 22992."""
    return CdcError(
        22992,
        f"The specified @job_type, {job_type}, is not supported. The value specified for the parameter @job_type "
        "must be N'capture' to indicate a capture job, or N'cleanup' to indicate a cleanup job.",
    )


def retention_out_of_range() -> CdcError:
    """Error 22994."""
    return CdcError(
        22994,
        "The retention value specified for the Change Data Capture cleanup process must be greater than 0 and "
        "less than or equal to 52594800. When creating or modifying the cleanup job, specify a retention value "
        "(in minutes) that is within that range. If this error is encountered when executing the "
        "sys.sp_cdc_cleanup_change_table stored procedure, reset the retention value associated with the job to "
        "a non-negative value less than 52594800 by using the sp_cdc_change_job stored procedure.",
    )


def retention_for_capture_job() -> CdcError:
    """Error 22995."""
    return CdcError(
        22995,
        "A value for the parameter @retention cannot be specified when the job type is 'capture'. Specify NULL "
        "for the parameter, or omit the parameter from the statement.",
    )


def capture_options_for_cleanup_job() -> CdcError:
    """Error 22996."""
    return CdcError(
        22996,
        "When adding or modifying the CDC cleanup job, @pollinginterval, @maxtrans, @maxscans, and @continuous "
        "may not be assigned non-null values.",
    )


def job_missing(job_type: str) -> CdcError:
    """Error 22997."""
    return CdcError(
        22997,
        f"The Change Data Capture '{job_type}' job does not exist in the system table 'msdb.dbo.cdc_jobs'. Use "
        "the stored procedure 'sys.sp_cdc_add_job' to add the Change Data Capture job.",
    )


def continuous_not_bit() -> CdcError:
    """Error 22998."""
    return CdcError(22998, "The value specified for the parameter @continuous must be 0 or 1.")
