"""
ODBC connection strings for SQL Server: the one place that builds them.

:func:`odbc_connection_string` turns explicit parts (host, port, database, user, password,
driver, options) into a connection string; :func:`airflow_odbc_connection_string` does the same
for an Airflow connection of type ``sqlserver_cdc`` (or ``mssql``) and its extras. Values are quoted
with braces as ODBC requires. A connection string holds the password: log :func:`redact` of it,
never the string.

The ODBC driver is a shared library the worker loads, so who may name it matters (as in Airflow's
``OdbcHook``): DAG code (the hook's ``driver`` argument) and the Airflow configuration
(``[sqlserver_cdc] default_driver``) may; a connection's ``driver`` extra only when
``[sqlserver_cdc] allow_driver_in_extra`` is true.

Airflow is imported only inside the functions that read its configuration, so that building a
connection string (tests, the opt-in harness) does not configure Airflow before a conftest has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_sqlserver_cdc.get_provider_info import CONFIG_SECTION

MS_ODBC_DRIVER = "ODBC Driver 18 for SQL Server"
FREETDS_DRIVER = "FreeTDS"
DEFAULT_PORT = 1433
DEFAULT_TDS_VERSION = "7.4"
REDACTED = "***"
_SECRET_KEYS = frozenset({"PWD", "PASSWORD"})
_TRUE_WORDS = ("1", "true", "yes", "mandatory", "strict")
ALLOW_DRIVER_IN_EXTRA = "allow_driver_in_extra"
DEFAULT_DRIVER = "default_driver"
APPLICATION_INTENTS = ("ReadWrite", "ReadOnly")


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


def driver_in_extra_allowed() -> bool:
    """Whether ``[sqlserver_cdc] allow_driver_in_extra`` lets connections name their ODBC driver."""
    from airflow.sdk import conf

    return conf.getboolean(CONFIG_SECTION, ALLOW_DRIVER_IN_EXTRA, fallback=False)


def configured_default_driver() -> str | None:
    """Return ``[sqlserver_cdc] default_driver``, or None when it is not set."""
    from airflow.sdk import conf

    return conf.get(CONFIG_SECTION, DEFAULT_DRIVER, fallback=None) or None


def _extra(extras: Mapping[str, Any], name: str) -> Any:
    """The extra ``name`` whatever its case (``Driver`` is still the driver)."""
    return next((value for key, value in extras.items() if key.lower() == name), None)


def airflow_odbc_driver(
    extras: Mapping[str, Any], *, driver: str | None = None, conn_id: str | None = None
) -> str:
    """
    Return the ODBC driver for an Airflow connection, refusing a ``driver`` extra unless allowed.

    In order: ``driver`` (DAG code), the connection's ``driver`` extra when
    ``[sqlserver_cdc] allow_driver_in_extra`` is true, ``[sqlserver_cdc] default_driver``, then
    Microsoft's ODBC Driver 18 when installed, else FreeTDS.

    :param extras: the connection's extras.
    :param driver: the driver the hook was given, if any.
    :param conn_id: the connection id, for the error message.
    :raises DriverNotAllowedError: the extras name a driver and the configuration does not allow it.
    """
    extra_driver = _extra(extras, "driver")
    if extra_driver and not driver_in_extra_allowed():
        from airflow_provider_sqlserver_cdc.errors import DriverNotAllowedError

        raise DriverNotAllowedError(
            f"Airflow connection {conn_id!r} names ODBC driver {str(extra_driver)!r} in its extra, which is "
            "refused: remove 'driver' from the extra (the driver then comes from the hook's driver argument, "
            f"option {DEFAULT_DRIVER} in section {CONFIG_SECTION} of the Airflow config, or the installed "
            f"default), or allow it with option {ALLOW_DRIVER_IN_EXTRA} = True in section {CONFIG_SECTION} "
            f"(AIRFLOW__{CONFIG_SECTION.upper()}__{ALLOW_DRIVER_IN_EXTRA.upper()}=True)."
        )
    chosen = driver or extra_driver or configured_default_driver() or installed_default_driver()
    return str(chosen).strip().strip("{}").strip()


def _given(value: Any, default: Any) -> Any:
    """``value``, or ``default`` when the extra is missing or left empty in the connection form."""
    return default if value in (None, "") else value


def application_intent(value: Any) -> str | None:
    """
    Spell the ``application_intent`` extra as ODBC's ``ReadOnly`` or ``ReadWrite`` (None when not set).

    :param value: ``ReadOnly`` or ``ReadWrite`` in any case, or empty.
    """
    if value in (None, ""):
        return None
    for intent in APPLICATION_INTENTS:
        if str(value).strip().lower() == intent.lower():
            return intent
    raise ValueError(f"application_intent must be one of {', '.join(APPLICATION_INTENTS)}, not {value!r}")


def airflow_odbc_connection_string(
    connection: Any, *, database: str | None = None, driver: str | None = None
) -> str:
    """
    Build the ODBC connection string of an Airflow connection. It contains the password: never log it.

    Host, port, login, password and schema (the database) come from the connection; from its extras
    ``tds_version`` (FreeTDS, default 7.4), ``encrypt`` (default yes) and ``trust_server_certificate``
    (default no; both for Microsoft's driver), ``application_intent`` (``ReadOnly`` for a readable
    secondary) and ``driver`` only as :func:`airflow_odbc_driver` allows.

    :param connection: the Airflow connection (type ``sqlserver_cdc`` or ``mssql``).
    :param database: the database to use instead of the connection's schema.
    :param driver: the ODBC driver the hook was given (DAG code), if any.
    """
    extras = dict(connection.extra_dejson or {})
    driver = airflow_odbc_driver(extras, driver=driver, conn_id=connection.conn_id)
    if is_freetds(driver):
        options = {"TDS_Version": str(extras.get("tds_version") or DEFAULT_TDS_VERSION)}
    else:
        options = {
            "Encrypt": yes_no(_given(extras.get("encrypt"), True)),
            "TrustServerCertificate": yes_no(_given(extras.get("trust_server_certificate"), False)),
        }
    intent = application_intent(extras.get("application_intent"))
    if intent:
        options["ApplicationIntent"] = intent
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
