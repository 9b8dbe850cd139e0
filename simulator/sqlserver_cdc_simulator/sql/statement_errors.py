"""The errors of INSERT's column and value lists and of ALTER TABLE ... ALTER COLUMN, as SQL Server has them.

Each entry is a :class:`~sqlserver_cdc_simulator.errors.Message`: call it with the text's values
(by name where the text has more than one) to get the :class:`~sqlserver_cdc_simulator.errors.SqlError`.
"""

from __future__ import annotations

from sqlserver_cdc_simulator.errors import Message

_COUNT_MISMATCH = "The number of values in the VALUES clause must match the number of columns specified in the INSERT statement."

# INSERT without a column list into a table with IDENTITY_INSERT ON
identity_insert_needs_column_list = Message(
    8101,
    "An explicit value for the identity column in table '{table}' can only be specified when a column list is "
    "used and IDENTITY_INSERT is ON.",
)
# a column named twice in INSERT's column list
column_listed_twice = Message(
    264,
    "The column name '{column}' is specified more than once in the SET clause or column list of an INSERT. "
    "A column cannot be assigned more than one value in the same clause.",
)
# a rowversion (timestamp) column in INSERT's column list
timestamp_insert = Message(
    273,
    "Cannot insert an explicit value into a timestamp column. Use INSERT with a column list to exclude the "
    "timestamp column, or insert a DEFAULT into the timestamp column.",
)
# an identity column in INSERT's column list while IDENTITY_INSERT is OFF
identity_insert_off = Message(
    544,
    "Cannot insert explicit value for identity column in table '{table}' when IDENTITY_INSERT is set to OFF.",
)
more_values_than_columns = Message(
    110,
    "There are fewer columns in the INSERT statement than values specified in the VALUES clause. "
    + _COUNT_MISMATCH,
    severity=15,
)
fewer_values_than_columns = Message(
    109,
    "There are more columns in the INSERT statement than values specified in the VALUES clause. "
    + _COUNT_MISMATCH,
    severity=15,
)
_SELECT_LIST_MISMATCH = (
    "The select list for the INSERT statement contains {} items than the insert list. The number of SELECT "
    "values must match the number of INSERT columns."
)
more_selected_than_columns = Message(121, _SELECT_LIST_MISMATCH.format("more"), severity=15)
fewer_selected_than_columns = Message(120, _SELECT_LIST_MISMATCH.format("fewer"), severity=15)
# INSERT ... EXEC whose result set has another number of columns
exec_columns_mismatch = Message(
    213, "Column name or number of supplied values does not match table definition.", state=7
)
# ALTER TABLE ... ALTER COLUMN of a column the table does not have
alter_column_missing = Message(
    4924, "ALTER TABLE ALTER COLUMN failed because column '{column}' does not exist in table '{table}'."
)
alter_computed_column = Message(4928, "Cannot alter column '{column}' because it is 'COMPUTED'.")
