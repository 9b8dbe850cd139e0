"""SqlError: an error the simulator reports to clients with SQL Server's number, severity and state.

Every error the simulator raises is a :class:`SqlError`; the TDS layer turns it into an ERROR
token. The helper functions build the errors SQL Server gives for the same situation, with the
message texts from SQL Server's error catalog (``sys.messages``).
"""

from __future__ import annotations


# One function per SQL Server message, on purpose: each mirrors one catalogue entry (number, severity,
# state, text) that a client may match, so these same-shape blocks stay one by one (issue 34 item 6).
class SqlError(Exception):
    """An error with SQL Server's number, severity (class), state and message text."""

    def __init__(self, number: int, severity: int, state: int, message: str) -> None:
        super().__init__(f"Msg {number}, Level {severity}, State {state}: {message}")
        self.number = number
        self.severity = severity
        self.state = state
        self.message = message


def syntax_error(near: str) -> SqlError:
    """Msg 102: incorrect syntax."""
    return SqlError(102, 15, 1, f"Incorrect syntax near '{near}'.")


def invalid_object(name: str) -> SqlError:
    """Msg 208: unknown table or view."""
    return SqlError(208, 16, 1, f"Invalid object name '{name}'.")


def invalid_column(name: str) -> SqlError:
    """Msg 207: unknown column."""
    return SqlError(207, 16, 1, f"Invalid column name '{name}'.")


def ambiguous_column(name: str) -> SqlError:
    """Msg 209: a column name that more than one table of the FROM clause has."""
    return SqlError(209, 16, 1, f"Ambiguous column name '{name}'.")


def not_supported(what: str) -> SqlError:
    """A statement or feature the simulator does not implement (SQL Server's 'not supported' number 40517)."""
    return SqlError(
        40517,
        16,
        1,
        f"The SQL Server simulator does not support {what}. See docs/simulator.md for what it supports.",
    )


def must_declare(name: str) -> SqlError:
    """Msg 137: an undeclared variable."""
    return SqlError(137, 15, 2, f'Must declare the scalar variable "{name}".')


def null_not_allowed(column: str, table: str, statement: str) -> SqlError:
    """Msg 515: NULL into a NOT NULL column."""
    return SqlError(
        515,
        16,
        2,
        f"Cannot insert the value NULL into column '{column}', table '{table}'; "
        f"column does not allow nulls. {statement} fails.",
    )


def duplicate_key(constraint: str, kind: str, table: str, key: str) -> SqlError:
    """Msg 2627: PRIMARY KEY or UNIQUE constraint violation."""
    return SqlError(
        2627,
        14,
        1,
        f"Violation of {kind} constraint '{constraint}'. Cannot insert duplicate key in object "
        f"'{table}'. The duplicate key value is ({key}).",
    )


def object_exists(name: str) -> SqlError:
    """Msg 2714: CREATE of an object that exists."""
    return SqlError(2714, 16, 6, f"There is already an object named '{name}' in the database.")


def conversion_failed(value: str, from_type: str, to_type: str) -> SqlError:
    """Msg 245 / 241 / 8114 family: a value that does not convert."""
    if to_type in ("int", "smallint", "tinyint", "bigint", "bit"):
        return SqlError(
            245,
            16,
            1,
            f"Conversion failed when converting the {from_type} value '{value}' to data type {to_type}.",
        )
    if to_type in ("date", "time", "datetime", "datetime2", "smalldatetime", "datetimeoffset"):
        return SqlError(
            241, 16, 1, "Conversion failed when converting date and/or time from character string."
        )
    if to_type == "uniqueidentifier":
        return SqlError(
            8169, 16, 2, "Conversion failed when converting from a character string to uniqueidentifier."
        )
    return SqlError(8114, 16, 5, f"Error converting data type {from_type} to {to_type}.")


def arithmetic_overflow(to_type: str) -> SqlError:
    """Msg 8115: arithmetic overflow."""
    return SqlError(8115, 16, 2, f"Arithmetic overflow error converting expression to data type {to_type}.")


def truncation(table: str, column: str, value: str) -> SqlError:
    """Msg 2628: string or binary data would be truncated."""
    return SqlError(
        2628,
        16,
        1,
        f"String or binary data would be truncated in table '{table}', column '{column}'. "
        f"Truncated value: '{value[:40]}'.",
    )


def divide_by_zero() -> SqlError:
    """Msg 8134."""
    return SqlError(8134, 16, 1, "Divide by zero error encountered.")


def login_failed(user: str) -> SqlError:
    """Msg 18456."""
    return SqlError(18456, 14, 1, f"Login failed for user '{user}'.")


def unknown_procedure(name: str) -> SqlError:
    """Msg 2812."""
    return SqlError(2812, 16, 62, f"Could not find stored procedure '{name}'.")


def unknown_function(name: str) -> SqlError:
    """Msg 195: not a recognized built-in function."""
    return SqlError(195, 15, 10, f"'{name}' is not a recognized built-in function name.")


def unknown_database(name: str) -> SqlError:
    """Msg 911."""
    return SqlError(
        911,
        16,
        1,
        f"Database '{name}' does not exist. Make sure that the name is entered correctly.",
    )


def cannot_drop(kind: str, name: str, state: int = 1) -> SqlError:
    """Msg 3701: DROP of a table, index, database or schema that does not exist (or is not visible).

    :param kind: ``table``, ``index``, ``database``, ``schema``.
    :param state: SQL Server's state for the kind of object (5 for tables, 7 for indexes).
    """
    return SqlError(
        3701,
        11,
        state,
        f"Cannot drop the {kind} '{name}', because it does not exist or you do not have permission.",
    )


def missing_principal(action: str, kind: str, name: str) -> SqlError:
    """Msg 15151: a login, user or role that does not exist (or is not visible).

    :param action: what the statement does to it (``drop``, ``alter``, ``add``, ``find``).
    :param kind: ``login``, ``user``, ``role``, ``principal``.
    """
    return SqlError(
        15151,
        16,
        1,
        f"Cannot {action} the {kind} '{name}', because it does not exist or you do not have permission.",
    )
