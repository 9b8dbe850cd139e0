"""The SQL Server errors CDC raises: numbers, severities, states and message texts as SQL Server has them.

Each entry is a :class:`~sqlserver_cdc_simulator.errors.Message`: call it with the text's values
(by name where the text has more than one) to get the :class:`~sqlserver_cdc_simulator.errors.SqlError`.
"""

from __future__ import annotations

from sqlserver_cdc_simulator.errors import Message

# The query functions raise 313 for every invalid request: SQL Server's functions force it by calling
# a placeholder function literally named ``cdc.fn_cdc_get_all_changes_ ...`` (or ``..._net_changes_
# ...``), so the text is the same for every capture instance and every cause (range below the
# low-water mark, above the max LSN, from > to, NULL bounds, bad row filter option).
insufficient_arguments = Message(
    313,
    "An insufficient number of arguments were supplied for the procedure or function "
    "cdc.fn_cdc_get_{function_kind}_changes_ ... .",
    state=3,
)
# the caller lacks SELECT on a query function (e.g. not in the gating role)
select_permission_denied = Message(
    229,
    "The SELECT permission was denied on the object '{object_name}', database '{database}', schema '{schema}'.",
    severity=14,
    state=5,
)
# e.g. a net changes function of an instance created without net changes
invalid_object_name = Message(208, "Invalid object name '{name}'.")
# TRUNCATE TABLE on a table enabled for CDC
truncate_blocked = Message(
    4711,
    "Cannot truncate table '{table}' because it is published for replication or enabled for Change Data Capture.",
)
database_not_enabled = Message(
    22901,
    "The database '{database}' is not enabled for Change Data Capture. Ensure that the correct database "
    "context is set and retry the operation. To report on the databases enabled for Change Data Capture, "
    "query the is_cdc_enabled column in the sys.databases catalog view.",
)
# the cleanup procedures' check
cleanup_database_not_enabled = Message(
    22910,
    "The cleanup request for database '{database}' failed. The database is not enabled for Change Data Capture.",
)
# severity 10: an informational message, not an error
database_already_enabled = Message(
    22905,
    "Database '{database}' is already enabled for Change Data Capture. Ensure that the correct database "
    "context is set, and retry the operation. To report on the databases enabled for Change Data Capture, "
    "query the is_cdc_enabled column in the sys.databases catalog view.",
    severity=10,
)
cdc_schema_exists = Message(
    22906,
    "The database '{database}' cannot be enabled for Change Data Capture because a database user named "
    "'cdc' or a schema named 'cdc' already exists in the current database. These objects are required "
    "exclusively by Change Data Capture. Drop or rename the user or schema and retry the operation.",
)
not_authorized = Message(
    22902, "Caller is not authorized to initiate the requested action. {privileges} privileges are required."
)
dbo_required = Message(
    22904, "Caller is not authorized to initiate the requested action. DBO privileges are required."
)
role_name_empty = Message(
    22907,
    "Parameter @role_name cannot be empty. Specify a value for @role_name and retry the operation. Supply "
    "null as the value if no role is to be used to gate access to captured change data.",
)
capture_instance_exists = Message(
    22926,
    "Could not create a capture instance because the capture instance name '{name}' already exists in the "
    "current database. Specify an explicit unique name for the parameter @capture_instance.",
)
capture_instance_too_long = Message(
    22927,
    "Capture instance name '{name}' exceeds the length limit of 100 characters. Specify a name that "
    "satisfies the length constraint.",
)
index_not_found = Message(
    22928,
    "Index name '{index}' is not an index for table '{schema}.{table}'. Specify a valid index name for the table.",
)
index_not_unique = Message(
    22929,
    "Index '{index}' must be either a primary key or a unique index for table '{schema}.{table}'. Specify "
    "an index that meets at least one of these requirements.",
)
column_not_found = Message(
    22930,
    "Could not locate '{column}' as a column of source table '{schema}.{table}'. Specify a valid column name.",
)
source_table_missing = Message(
    22931,
    "Source table '{schema}.{table}' does not exist in the current database. Ensure that the correct "
    "database context is set. Specify a valid schema and table name for the database.",
)
net_changes_need_unique_index = Message(
    22939,
    "The parameter @supports_net_changes is set to 1, but the source table does not have a primary key "
    "defined and no alternate unique index has been specified.",
)
captured_columns_unmapped = Message(
    22942,
    "Columns specified in the captured column list could not be mapped to columns in source table "
    "'{schema}.{table}'. Verify that the columns specified in the parameter @captured_column_list are "
    "delimited properly and match columns in the source table.",
)
index_columns_not_captured = Message(
    22943,
    "Columns used to uniquely identify a row for net change tracking must be included in the list of "
    "captured columns. Add either the primary key columns of the source table, or the columns defined for "
    "the index specified in the parameter @index_name to the list of captured columns and retry the operation.",
)
instance_not_enabled_for_table = Message(
    22960,
    "Change data capture instance '{name}' has not been enabled for the source table '{schema}.{table}'. "
    "Use sys.sp_cdc_help_change_data_capture to verify the capture instance name and retry the operation.",
)
# a third capture instance for one table
two_capture_instances = Message(
    22962,
    "Two capture instances already exist for source table '{schema}.{table}'. A table can have at most two "
    "capture instances. If the current tracking options are not appropriate, disable change tracking for "
    "the obsolete instance by using sys.sp_cdc_disable_table and retry the operation.",
)
parameter_null_or_empty = Message(
    22963,
    "Parameter '{parameter}' cannot be null or empty. Specify a value for the named parameter and retry the operation.",
)
# SQL Server formats the LSN as ``upper(sys.fn_varbintohexstr(lsn))``: ``0X...``
low_water_mark_not_in_mapping = Message(
    22964,
    "LSN {lsn_hex}, specified as the new low end point for change table cleanup must represent the "
    "start_lsn value of a current entry in the cdc.lsn_time_mapping table. Choose an LSN value that "
    "satisfies this requirement.",
)
cdc_schema_table = Message(
    22974, "Tables contained in the cdc schema cannot be enabled for Change Data Capture."
)
reserved_column_names = Message(
    22975,
    "Source table '{table}' contains one of the following reserved column names: __$start_lsn, __$end_lsn, "
    "__$seqval, __$operation, and __$update_mask. To enable Change Data Capture for this table, specify a "
    "captured column list and ensure that these columns are excluded from the list.",
)
object_missing_or_denied = Message(22981, "Object does not exist or access is denied.")
# text as far as SQL Server 2022's message catalogue gives it
table_not_enabled = Message(
    22985,
    "Change data capture has not been enabled for source table '{schema}.{table}'. Specify the name of a "
    "table enabled for Change Data Capture. To report on the tables enabled for Change Data Capture, query "
    "the is_tracked_by_cdc column in the sys.tables catalog view.",
)
help_arguments_mismatch = Message(
    22972,
    "When calling stored procedure [sys].sp_cdc_help_change_data capture, if either @source_schema or "
    "@source_name is non-null and non-empty, the other parameter must also be non-null and non-empty.",
)
maxscans_not_positive = Message(
    22970,
    "The value for parameter @maxscans specified for the Change Data Capture job must be greater than 0.",
)
threshold_not_positive = Message(
    22850,
    "The threshold value specified for the Change Data Capture cleanup process must be greater than 0. When "
    "creating or modifying the cleanup job, specify a positive threshold value. If this error is encountered "
    "when executing the sys.sp_cdc_cleanup_change_table stored procedure, reset the threshold value "
    "associated with the job to a non-negative value by using the sp_cdc_change_job stored procedure.",
)
polling_interval_out_of_range = Message(
    22990,
    "The value specified for the parameter @pollinginterval must be greater than or equal to 0 and less than "
    "24 hours(Max: 86399 seconds). Specify a polling interval (in seconds) that is less than 24 hours "
    "(86,400 seconds).",
)
maxtrans_not_positive = Message(
    22991, "The value specified for the parameter @maxtrans must be greater than 0."
)
job_type_unsupported = Message(
    22992,
    "The specified @job_type, {job_type}, is not supported. The value specified for the parameter @job_type "
    "must be N'capture' to indicate a capture job, or N'cleanup' to indicate a cleanup job.",
)
retention_out_of_range = Message(
    22994,
    "The retention value specified for the Change Data Capture cleanup process must be greater than 0 and "
    "less than or equal to 52594800. When creating or modifying the cleanup job, specify a retention value "
    "(in minutes) that is within that range. If this error is encountered when executing the "
    "sys.sp_cdc_cleanup_change_table stored procedure, reset the retention value associated with the job to "
    "a non-negative value less than 52594800 by using the sp_cdc_change_job stored procedure.",
)
retention_for_capture_job = Message(
    22995,
    "A value for the parameter @retention cannot be specified when the job type is 'capture'. Specify NULL "
    "for the parameter, or omit the parameter from the statement.",
)
capture_options_for_cleanup_job = Message(
    22996,
    "When adding or modifying the CDC cleanup job, @pollinginterval, @maxtrans, @maxscans, and @continuous "
    "may not be assigned non-null values.",
)
job_missing = Message(
    22997,
    "The Change Data Capture '{job_type}' job does not exist in the system table 'msdb.dbo.cdc_jobs'. Use "
    "the stored procedure 'sys.sp_cdc_add_job' to add the Change Data Capture job.",
)
continuous_not_bit = Message(22998, "The value specified for the parameter @continuous must be 0 or 1.")
