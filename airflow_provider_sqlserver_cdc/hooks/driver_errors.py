"""Driver errors (pyodbc, arrow-odbc) read and turned into the provider's errors with actionable messages."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_sqlserver_cdc.errors import (
    CdcNotEnabledError,
    ChangeDataPermissionError,
    LsnRangeError,
    SqlServerCdcError,
    SqlServerLoginError,
)
from airflow_provider_sqlserver_cdc.hooks.odbc_connection import REDACTED

_NATIVE_ERROR = re.compile(r"\((\d+)\) \(SQL\w+\)\s*$")
_ARROW_ODBC_NATIVE_ERROR = re.compile(r"Native error: (\d+)")
LOGIN_FAILED = (18456, 4060, 18452)
PERMISSION_DENIED = (229, 230, 297, 916)
LSN_RANGE_INVALID = 313
INVALID_OBJECT = 208


def _error_text(err: BaseException) -> str:
    """The driver's message: pyodbc puts it second in ``args`` (after the SQLSTATE)."""
    return str(err.args[1]) if len(err.args) > 1 else str(err)


def native_error_number(err: BaseException) -> int | None:
    """
    Return SQL Server's error number from a pyodbc error message, e.g. 18456 from ``... (18456) (SQLDriverConnect)``.

    :param err: a pyodbc or arrow-odbc error.
    """
    text = _error_text(err)
    match = _NATIVE_ERROR.search(text) or _ARROW_ODBC_NATIVE_ERROR.search(text)
    if match:
        return int(match.group(1))
    numbers = re.findall(r"\((\d{3,5})\)", text)
    return int(numbers[-1]) if numbers else None


def driver_message(err: BaseException) -> str:
    """
    Return the server's message of a pyodbc or arrow-odbc error without the driver's ``[...]`` prefixes.

    :param err: a pyodbc or arrow-odbc error.
    """
    text = _error_text(err)
    if "Message:" in text:  # arrow-odbc: "... State: 42000, Native error: 229, Message: [FreeTDS]..."
        text = text.split("Message:", 1)[1]
    return re.sub(r"^(\[[^\]]*\]\s*)+", "", text.strip()).strip()


@dataclass(frozen=True)
class ErrorContext:
    """
    Where a driver error happened, for the message (no secrets).

    :param server: ``host:port``.
    :param database: the database, or None for the login's default.
    :param conn_id: the Airflow connection id.
    :param login: the SQL Server login.
    :param driver: the ODBC driver name.
    :param password: the login's password, only to scrub it from driver messages.
    """

    server: str
    database: str | None
    conn_id: str
    login: str | None
    driver: str
    password: str | None = field(default=None, repr=False)

    @classmethod
    def of_connection(
        cls, connection: Any, *, server: str, database: str | None, driver: str
    ) -> ErrorContext:
        """
        The context of an Airflow connection: its id and login, and its password to scrub.

        :param connection: the Airflow connection (``conn_id``, ``login``, ``password``).
        :param server: ``host:port`` as the hook resolved it.
        :param database: the database the hook uses.
        :param driver: the ODBC driver the hook uses.
        """
        return cls(server, database, connection.conn_id, connection.login, driver, connection.password)


def translate_driver_error(
    err: BaseException, doing: str, context: ErrorContext, capture_instance: str | None = None
) -> SqlServerCdcError:
    """
    Turn a driver error into the provider's error with an actionable message.

    :param err: the pyodbc or arrow-odbc error.
    :param doing: what was being done, e.g. ``reading change data`` (``connecting`` for a login).
    :param context: where it happened.
    :param capture_instance: the capture instance concerned, if any.
    """
    number = native_error_number(err)
    text = driver_message(err)
    if context.password and len(context.password) >= 4:  # a driver that echoes the connection string
        text = text.replace(context.password, REDACTED)
    where = f"server {context.server}, database {context.database or '(default)'}"
    ci = f" for capture instance {capture_instance!r}" if capture_instance else ""
    conn_id = context.conn_id
    if number in LOGIN_FAILED or (doing == "connecting" and "Login failed" in text):
        return SqlServerLoginError(
            f"SQL Server refused the login of {context.login!r} ({where}): {text}. Check the login, "
            f"password and database of Airflow connection {conn_id!r}.",
            refused=True,
        )
    if doing == "connecting":
        return SqlServerLoginError(
            f"Cannot connect to SQL Server ({where}) with ODBC driver {context.driver!r}: {text}. Check host, "
            f"port, the ODBC driver and the encrypt settings of Airflow connection {conn_id!r}."
        )
    if number in PERMISSION_DENIED:
        return ChangeDataPermissionError(
            f"Permission denied while {doing}{ci} ({where}): {text}. The login needs SELECT on the captured "
            "columns of the source table and membership in the capture instance's gating role (role_name in "
            "cdc.change_tables / sys.sp_cdc_help_change_data_capture), or db_owner."
        )
    if number == LSN_RANGE_INVALID:
        return LsnRangeError(
            f"SQL Server rejected the LSN range while {doing}{ci} ({where}): {text}. The range is outside the "
            "instance's valid range (below sys.fn_cdc_get_min_lsn, above sys.fn_cdc_get_max_lsn, or from > to)."
        )
    if number == INVALID_OBJECT and "cdc." in text.lower():
        return CdcNotEnabledError(
            f"Change data capture objects are missing while {doing}{ci} ({where}): {text}. Enable CDC on the "
            "database (EXEC sys.sp_cdc_enable_db) and the table (EXEC sys.sp_cdc_enable_table)."
        )
    return SqlServerCdcError(f"SQL Server error while {doing}{ci} ({where}): {text}")
