"""SQL Server's Change Tracking errors (numbers and texts from the error catalogue).

Each entry is a :class:`~sqlserver_cdc_simulator.errors.Message`: call it with the text's values
(by name where the text has more than one) to get the :class:`~sqlserver_cdc_simulator.errors.SqlError`.
"""

from __future__ import annotations

from sqlserver_cdc_simulator.errors import Message

# ENABLE CHANGE_TRACKING on a table of a database without change tracking
database_not_enabled_for_table = Message(
    1718,
    "Change tracking must be enabled on database '{database}' before it can be enabled on table '{table}'.",
)
# ENABLE CHANGE_TRACKING twice
table_already_enabled = Message(4996, "Change tracking is already enabled for table '{table}'.")
# a table without a primary key
primary_key_required = Message(
    4997,
    "Cannot enable change tracking on table '{table}'. Change tracking requires a primary key on the "
    "table. Create a primary key on the table before enabling change tracking.",
)
# DISABLE CHANGE_TRACKING on a table that is not tracked
table_not_enabled_for_disable = Message(4998, "Change tracking is not enabled on table '{table}'.")
# CHANGETABLE on a table that is not tracked
table_not_enabled = Message(22105, "Change tracking is not enabled on table '{table}'.")
# SET CHANGE_TRACKING = ON twice
database_already_enabled = Message(5088, "Change tracking is already enabled for database '{database}'.")
# change tracking options or OFF on a database without change tracking
database_not_enabled = Message(
    5089,
    "Change tracking is disabled for database '{database}'. Change tracking must be enabled on a "
    "database to modify change tracking settings.",
)
# SET CHANGE_TRACKING = OFF while tables are tracked
tables_still_enabled = Message(
    22115,
    "Change tracking is enabled for one or more tables in database '{database}'. Disable change "
    "tracking on each table before disabling it for the database. Use the sys.change_tracking_tables "
    "catalog view to obtain a list of tables for which change tracking is enabled.",
)
# change tracking options mixed with other ALTER DATABASE options
options_combined = Message(
    22114,
    "Change tracking options for ALTER DATABASE cannot be combined with other ALTER DATABASE options.",
)
# CHANGETABLE(...) without a table alias (changetable-transact-sql.md: the alias is required)
changetable_alias_required = Message(22104, "A table returned by the CHANGETABLE function must be aliased.")
# ALTER TABLE ... DROP CONSTRAINT of a change-tracked table's primary key
primary_key_drop_refused = Message(
    3735,
    "The primary key constraint '{constraint}' on table '{table}' cannot be dropped because change tracking "
    "is enabled on the table. Change tracking requires a primary key constraint on the table. Disable change "
    "tracking before dropping the constraint.",
)
