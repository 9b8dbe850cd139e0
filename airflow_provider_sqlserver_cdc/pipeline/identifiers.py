"""
The names settings give to targets and tables, checked when the settings are read.

A target name is dotted (``catalog.namespace.table`` for Iceberg, ``schema.table`` for PostgreSQL);
the merge job quotes each part (Spark SQL backticks, PostgreSQL double quotes), the Hadoop catalog
makes it a directory, and PostgreSQL keeps only the first 63 bytes of an identifier. So each part
is held to what both engines take unquoted, plus ``-``: Spark SQL's regular identifiers are
letters, digits and ``_`` (sql-ref-identifier.html); PostgreSQL's are letters (also non-Latin),
digits, ``_`` and ``$``, at most 63 bytes (sql-syntax-lexical.html, "Identifiers and Key Words").
A name such as ``lake; DROP`` is refused here, naming its key, instead of failing inside Spark.

Capture instance names (``tables``, the keys of ``merge.tables``) and Change Tracking tables name
staging directories and Airflow Variables: they may hold what SQL Server allows, except path
separators, control characters and surrounding blanks.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping

from airflow_provider_sqlserver_cdc.pipeline.settings_fields import SettingsError

#: one part of a dotted target name
_PART = re.compile(r"[\w$-]+")
_ALLOWED = "letters, digits, '_', '$' and '-'"
#: PostgreSQL's NAMEDATALEN - 1: the bytes of an identifier it keeps (longer ones are truncated)
POSTGRES_MAX_IDENTIFIER_BYTES = 63
#: the fields ``merge.table_name_template`` may use (the merge job fills them from the manifest)
TEMPLATE_FIELDS = ("schema", "table", "capture_instance", "database")
_NOT_IN_SOURCE_NAMES = "/\\"


def _bad_characters(text: str) -> str:
    bad = sorted({c for c in text if not _PART.fullmatch(c)})
    return " ".join(repr(c) for c in bad)


def check_target_name(
    key: str, name: str, *, parts: tuple[int, int | None], jdbc: bool, example: str
) -> None:
    """
    Refuse a dotted target name whose parts are not plain identifiers.

    :param key: the setting's dotted key, for the error.
    :param name: the name, e.g. ``lake.cdc``.
    :param parts: the fewest and most dotted parts (None: no most).
    :param jdbc: a PostgreSQL target: each part at most 63 bytes.
    :param example: a valid name, for the error.
    """
    pieces = name.split(".")
    fewest, most = parts
    what = f"{fewest}" if fewest == most else (f"{fewest} or more" if most is None else f"{fewest} to {most}")
    if len(pieces) < fewest or (most is not None and len(pieces) > most):
        raise SettingsError(
            key, f"{name!r} has {len(pieces)} dotted part(s), expected {what} (e.g. {example})"
        )
    for piece in pieces:
        if not piece:
            raise SettingsError(key, f"{name!r} has an empty part (e.g. {example})")
        if not _PART.fullmatch(piece):
            raise SettingsError(
                key,
                f"{name!r} is not a valid name: each dot-separated part may hold {_ALLOWED}, not "
                f"{_bad_characters(piece)} (e.g. {example})",
            )
        if jdbc and len(piece.encode()) > POSTGRES_MAX_IDENTIFIER_BYTES:
            raise SettingsError(
                key,
                f"{piece!r} is {len(piece.encode())} bytes: PostgreSQL keeps only the first "
                f"{POSTGRES_MAX_IDENTIFIER_BYTES} bytes of an identifier, so two names could become one",
            )


def check_table_name_template(key: str, template: str) -> None:
    """
    Refuse a template with unknown fields, format specs, or literal text that is not identifier text.

    :param key: the setting's dotted key.
    :param template: e.g. ``{schema}_{table}``.
    """
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as err:
        raise SettingsError(
            key, f"{template!r} is not a valid template ({err}); e.g. {{schema}}_{{table}}"
        ) from None
    for literal, field, spec, conversion in parsed:
        if literal and not _PART.fullmatch(literal):
            raise SettingsError(
                key,
                f"{template!r}: the text around the fields may hold {_ALLOWED} (the result is one table "
                f"name part), not {_bad_characters(literal)}",
            )
        if field is None:
            continue
        if field not in TEMPLATE_FIELDS:
            raise SettingsError(
                key, f"{template!r} uses unknown field {{{field}}}; known: {', '.join(TEMPLATE_FIELDS)}"
            )
        if spec or conversion:
            raise SettingsError(key, f"{template!r}: field {{{field}}} takes no format spec or conversion")


def check_source_names(key: str, names: Iterable[str]) -> None:
    """
    Refuse capture instance or table names that cannot name a staging directory.

    :param key: the setting's dotted key.
    :param names: the names.
    """
    for i, name in enumerate(names):
        item = f"{key}[{name!r}]" if isinstance(names, Mapping) else f"{key}[{i}]"
        if name != name.strip():
            raise SettingsError(item, f"{name!r} has blanks around it")
        if any(c in _NOT_IN_SOURCE_NAMES or not c.isprintable() for c in name):
            raise SettingsError(
                item, f"{name!r} holds a path separator or control character; it names a staging directory"
            )
