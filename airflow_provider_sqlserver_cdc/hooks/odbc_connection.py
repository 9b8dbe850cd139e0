"""
ODBC connection strings for SQL Server: the one place that builds them.

:func:`odbc_connection_string` turns explicit parts (host, port, database, user, password,
driver, options) into a connection string; :func:`airflow_odbc_connection_string` does the same
for an Airflow connection of type ``mssql`` and its extras. Values are quoted with braces as ODBC
requires. A connection string holds the password: log :func:`redact` of it, never the string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MS_ODBC_DRIVER = "ODBC Driver 18 for SQL Server"
FREETDS_DRIVER = "FreeTDS"
DEFAULT_PORT = 1433
DEFAULT_TDS_VERSION = "7.4"
REDACTED = "***"
_SECRET_KEYS = frozenset({"PWD", "PASSWORD"})
_TRUE_WORDS = ("1", "true", "yes", "mandatory", "strict")


def odbc_value(value: str) -> str:
    """
    Quote an ODBC connection-string value with braces when it needs it (``}`` doubled).

    :param value: the raw value.
    """
    if value == "" or any(ch in value for ch in ";{}=") or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


def yes_no(value: Any) -> str:
    """
    Spell a boolean connection extra as ODBC's ``yes`` or ``no``.

    :param value: a bool, or a string such as ``true``, ``1``, ``mandatory`` or ``false``.
    """
    if isinstance(value, str):
        return "yes" if value.strip().lower() in _TRUE_WORDS else "no"
    return "yes" if value else "no"


def is_freetds(driver: str) -> bool:
    """
    Whether ``driver`` names the FreeTDS ODBC driver (it takes ``SERVER`` and ``PORT`` apart).

    :param driver: the ODBC driver name.
    """
    return "freetds" in driver.lower()


def installed_default_driver() -> str:
    """Return Microsoft's ODBC Driver 18 when it is installed, else FreeTDS."""
    import pyodbc

    return MS_ODBC_DRIVER if MS_ODBC_DRIVER in pyodbc.drivers() else FREETDS_DRIVER


def odbc_connection_string(
    *,
    host: str,
    port: int | None = None,
    database: str | None = None,
    user: str | None = None,
    password: str | None = None,
    driver: str = FREETDS_DRIVER,
    options: Mapping[str, Any] | None = None,
) -> str:
    """
    Build an ODBC connection string for SQL Server from explicit parts. It contains the password: never log it.

    FreeTDS gets ``SERVER`` and ``PORT`` apart and, unless ``options`` say otherwise,
    ``TDS_Version=7.4;ClientCharset=UTF-8``; other drivers get ``SERVER=tcp:host,port`` and
    ``Encrypt=yes;TrustServerCertificate=no``.

    :param host: the server's host name or address.
    :param port: the TCP port (1433 when not given).
    :param database: the database to use (the login's default when not given).
    :param user: the SQL Server login; without it, no ``UID``/``PWD`` (integrated security).
    :param password: the login's password.
    :param driver: the ODBC driver name, without braces.
    :param options: further ``KEY=value`` pairs; they replace the driver defaults of the same key.
    """
    driver = driver.strip("{}")
    port = int(port or DEFAULT_PORT)
    parts = {"DRIVER": "{" + driver + "}"}
    if is_freetds(driver):
        parts.update({"SERVER": odbc_value(host), "PORT": str(port)})
        defaults = {"TDS_Version": DEFAULT_TDS_VERSION, "ClientCharset": "UTF-8"}
    else:
        parts["SERVER"] = odbc_value(f"tcp:{host},{port}")
        defaults = {"Encrypt": "yes", "TrustServerCertificate": "no"}
    given = {key.upper(): (key, value) for key, value in (options or {}).items()}
    for key, value in defaults.items():
        key, value = given.pop(key.upper(), (key, value))
        parts[key] = odbc_value(str(value))
    parts.update({key: odbc_value(str(value)) for key, value in given.values()})
    if database:
        parts["DATABASE"] = odbc_value(database)
    if user:
        parts["UID"] = odbc_value(user)
        parts["PWD"] = odbc_value(password or "")
    return ";".join(f"{key}={value}" for key, value in parts.items()) + ";"


def airflow_odbc_driver(extras: Mapping[str, Any]) -> str:
    """
    Return the ODBC driver of an Airflow connection: its ``driver`` extra, else the installed default.

    :param extras: the connection's extras.
    """
    configured = extras.get("driver")
    return str(configured).strip("{}") if configured else installed_default_driver()


def airflow_odbc_connection_string(connection: Any, *, database: str | None = None) -> str:
    """
    Build the ODBC connection string of an Airflow ``mssql`` connection. It contains the password: never log it.

    Host, port, login, password and schema (the database) come from the connection; the extras
    ``driver``, ``tds_version`` (FreeTDS, default 7.4), ``encrypt`` (default yes) and
    ``trust_server_certificate`` (default no; both for Microsoft's driver) from its extras.

    :param connection: the Airflow connection.
    :param database: the database to use instead of the connection's schema.
    """
    extras = dict(connection.extra_dejson or {})
    driver = airflow_odbc_driver(extras)
    if is_freetds(driver):
        options = {"TDS_Version": str(extras.get("tds_version", DEFAULT_TDS_VERSION))}
    else:
        options = {
            "Encrypt": yes_no(extras.get("encrypt", True)),
            "TrustServerCertificate": yes_no(extras.get("trust_server_certificate", False)),
        }
    return odbc_connection_string(
        host=connection.host or "localhost",
        port=connection.port,
        database=database or connection.schema or None,
        user=connection.login or None,
        password=connection.password,
        driver=driver,
        options=options,
    )


def parse_odbc_connection_string(text: str) -> dict[str, str]:
    """
    Split an ODBC connection string into its ``KEY: value`` pairs (keys upper-cased, braces removed).

    :param text: e.g. ``DRIVER={FreeTDS};SERVER=db;PWD={a;b}};``.
    """
    pairs: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        end = text.find("=", i)
        if end < 0:
            break
        key = text[i:end].strip().upper()
        i = end + 1
        if i < n and text[i] == "{":
            value, i = _braced(text, i + 1)
            i = text.find(";", i)
            i = n if i < 0 else i + 1
        else:
            end = text.find(";", i)
            end = n if end < 0 else end
            value, i = text[i:end].strip(), end + 1
        if key:
            pairs[key] = value
    return pairs


def _braced(text: str, i: int) -> tuple[str, int]:
    """The value of a braced ODBC value starting after its ``{``, and the index after its ``}``."""
    chars = []
    while i < len(text):
        if text[i] == "}":
            if text[i + 1 : i + 2] == "}":
                chars.append("}")
                i += 2
                continue
            return "".join(chars), i + 1
        chars.append(text[i])
        i += 1
    return "".join(chars), i


def redact(text: str) -> str:
    """
    Return an ODBC connection string with its password replaced by ``***``, fit for logs and messages.

    :param text: the connection string.
    """
    pairs = parse_odbc_connection_string(text)
    return ";".join(
        f"{key}={REDACTED if key in _SECRET_KEYS else odbc_value(value)}" for key, value in pairs.items()
    ) + (";" if pairs else "")
