"""SqlError: an error the simulator reports to clients with SQL Server's number, severity and state.

Every error the simulator raises is a :class:`SqlError`; the TDS layer turns it into an ERROR
token. The errors SQL Server gives for the same situation are entries of a catalogue: each
:class:`Message` holds one message's number, severity, state and text (from SQL Server's error
catalog, ``sys.messages``) and builds the :class:`SqlError` when called with the text's values.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass


class SqlError(Exception):
    """An error with SQL Server's number, severity (class), state and message text."""

    def __init__(self, number: int, severity: int, state: int, message: str) -> None:
        super().__init__(f"Msg {number}, Level {severity}, State {state}: {message}")
        self.number = number
        self.severity = severity
        self.state = state
        self.message = message


@functools.cache
def _field_names(text: str) -> tuple[str, ...]:
    """The names of a :meth:`str.format` template's fields, each once, in order."""
    return tuple(dict.fromkeys(name for _, name, _, _ in string.Formatter().parse(text) if name))


@dataclass(frozen=True)
class Message:
    """
    One SQL Server message: calling it with the values of its text's fields builds the :class:`SqlError`.

    :param number: SQL Server's message number (``sys.messages.message_id``).
    :param text: the message text as a :meth:`str.format` template. A text with one field takes its
        value positionally or by name; a text with more takes them by name.
    :param severity: the error's severity (class).
    :param state: the error's state; a call may pass ``state=`` where SQL Server's state depends on the
        raising site.
    """

    number: int
    text: str
    severity: int = 16
    state: int = 1

    def __call__(self, *value: object, state: int | None = None, **values: object) -> SqlError:
        """The :class:`SqlError` this message gives with these values."""
        if value:
            fields = _field_names(self.text)
            if len(value) > 1 or len(fields) != 1:
                raise TypeError(f"message {self.number} takes its values by name: {list(fields)}")
            values[fields[0]] = value[0]
        text = self.text.format(**values)
        return SqlError(self.number, self.severity, self.state if state is None else state, text)


syntax_error = Message(102, "Incorrect syntax near '{near}'.", severity=15)
invalid_object = Message(208, "Invalid object name '{name}'.")
invalid_column = Message(207, "Invalid column name '{name}'.")
# a column name that more than one table of the FROM clause has
ambiguous_column = Message(209, "Ambiguous column name '{name}'.")
# a statement or feature the simulator does not implement (SQL Server's 'not supported' number)
not_supported = Message(
    40517,
    "The SQL Server simulator does not support {what}. See docs/simulator.md for what it supports.",
)
must_declare = Message(137, 'Must declare the scalar variable "{name}".', severity=15, state=2)
# NULL into a NOT NULL column
null_not_allowed = Message(
    515,
    "Cannot insert the value NULL into column '{column}', table '{table}'; column does not allow nulls. "
    "{statement} fails.",
    state=2,
)
# PRIMARY KEY or UNIQUE constraint violation
duplicate_key = Message(
    2627,
    "Violation of {kind} constraint '{constraint}'. Cannot insert duplicate key in object '{table}'. "
    "The duplicate key value is ({key}).",
    severity=14,
)
object_exists = Message(2714, "There is already an object named '{name}' in the database.", state=6)
arithmetic_overflow = Message(
    8115, "Arithmetic overflow error converting expression to data type {to_type}.", state=2
)
# the value as SQL Server shows it: its first 40 characters
truncation = Message(
    2628,
    "String or binary data would be truncated in table '{table}', column '{column}'. "
    "Truncated value: '{value:.40}'.",
)
divide_by_zero = Message(8134, "Divide by zero error encountered.")
login_failed = Message(18456, "Login failed for user '{user}'.", severity=14)
unknown_procedure = Message(2812, "Could not find stored procedure '{name}'.", state=62)
unknown_function = Message(195, "'{name}' is not a recognized built-in function name.", severity=15, state=10)
unknown_database = Message(
    911, "Database '{name}' does not exist. Make sure that the name is entered correctly."
)
# DROP of a table, index, database or schema that does not exist (or is not visible): kind is
# table, index, database or schema; SQL Server's state depends on it (5 for tables, 7 for indexes)
cannot_drop = Message(
    3701,
    "Cannot drop the {kind} '{name}', because it does not exist or you do not have permission.",
    severity=11,
)
# a login, user or role that does not exist (or is not visible): action is what the statement does
# to it (drop, alter, add, find), kind is login, user, role or principal
missing_principal = Message(
    15151,
    "Cannot {action} the {kind} '{name}', because it does not exist or you do not have permission.",
)
# DROP ROLE of a role with members (drop-role-transact-sql.md: remove the members first)
role_has_members = Message(15144, "The role has members. It must be empty before it can be dropped.")
# DROP USER / DROP ROLE of a principal that owns a schema (transfer or drop the schema first)
owns_schema = Message(15138, "The database principal owns a schema in the database, and cannot be dropped.")
# DROP USER / DROP ROLE of a principal every database has (dbo, public, the fixed roles); kind is user or role
fixed_principal = Message(15150, "Cannot drop the {kind} '{name}'.")

_INTEGER_TYPES = ("int", "smallint", "tinyint", "bigint", "bit")
_DATE_TIME_TYPES = ("date", "time", "datetime", "datetime2", "smalldatetime", "datetimeoffset")
_integer_conversion_failed = Message(
    245, "Conversion failed when converting the {from_type} value '{value}' to data type {to_type}."
)
_date_time_conversion_failed = Message(
    241, "Conversion failed when converting date and/or time from character string."
)
_uniqueidentifier_conversion_failed = Message(
    8169, "Conversion failed when converting from a character string to uniqueidentifier.", state=2
)
_conversion_error = Message(8114, "Error converting data type {from_type} to {to_type}.", state=5)


def conversion_failed(value: str, from_type: str, to_type: str) -> SqlError:
    """Msg 245 / 241 / 8169 / 8114: a value that does not convert (the number depends on the target type)."""
    if to_type in _INTEGER_TYPES:
        return _integer_conversion_failed(from_type=from_type, value=value, to_type=to_type)
    if to_type in _DATE_TIME_TYPES:
        return _date_time_conversion_failed()
    if to_type == "uniqueidentifier":
        return _uniqueidentifier_conversion_failed()
    return _conversion_error(from_type=from_type, to_type=to_type)
