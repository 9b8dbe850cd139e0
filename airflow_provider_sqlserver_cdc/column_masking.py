"""
Column masking: hash, mask, truncate or drop a table's personal-data columns before Parquet is written.

Standard library only: the extraction applies it to every batch (``parquet.masked_columns``) and the
merge job reads its notes from the manifest on the cluster (docs/column-masking.md).

Rules come from the settings as ``{"schema.table.column": "method"}`` with the methods

- ``hash``: HMAC-SHA-256 of the value's text keyed by the salt, as 64 lower-case hex digits. The same
  value under the same salt gives the same hash, so a hashed key still matches its updates and deletes.
- ``mask`` or ``mask(text)``: every non-NULL value becomes ``text`` (default ``****``).
- ``truncate(n)``: a string keeps its first ``n`` characters.
- ``drop``: the column is not written at all.

NULL stays NULL under every method. The salt is a secret: it never appears in a repr, a log, the
manifest or the Parquet metadata.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

METHODS = ("hash", "mask", "truncate", "drop")
DEFAULT_MASK = "****"
#: What a hashed column holds: 64 hex digits (SHA-256), described in the manifest as ``char(64)``.
HASH_LENGTH = 64
#: SQL Server string types (``truncate`` takes only these; ``mask`` keeps them as they are).
STRING_TYPES = frozenset({"char", "varchar", "nchar", "nvarchar", "text", "ntext", "sysname"})
_TWO_BYTE = frozenset({"nchar", "nvarchar", "sysname"})
_RULE = re.compile(r"^\s*(hash|drop|mask|truncate)\s*(?:\((.*)\))?\s*$", re.IGNORECASE | re.DOTALL)


class ColumnMaskingError(ValueError):
    """A masking rule is invalid or cannot apply to its column; the message names table, column and fix."""


@dataclass(frozen=True)
class MaskingRule:
    """
    One column's masking.

    :param column: the column name as the rule gives it.
    :param method: ``hash``, ``mask``, ``truncate`` or ``drop``.
    :param length: the characters ``truncate`` keeps.
    :param replacement: the text ``mask`` writes.
    """

    column: str
    method: str
    length: int | None = None
    replacement: str | None = None

    @property
    def spec(self) -> str:
        """The rule as the settings spell it, e.g. ``truncate(4)`` (the manifest records this)."""
        if self.method == "truncate":
            return f"truncate({self.length})"
        if self.method == "mask" and self.replacement != DEFAULT_MASK:
            return f"mask({self.replacement})"
        return self.method

    @classmethod
    def parse(cls, column: str, text: str, where: str) -> MaskingRule:
        """
        Parse ``hash``, ``mask``, ``mask(text)``, ``truncate(n)`` or ``drop``.

        :param column: the column the rule is for.
        :param text: the rule.
        :param where: the table and column, for messages.
        """
        match = _RULE.match(text or "")
        if match is None:
            raise ColumnMaskingError(
                f"column masking of {where}: unknown method {text!r}; use one of hash, mask, mask(text), "
                "truncate(n) or drop"
            )
        method, argument = match.group(1).lower(), match.group(2)
        if method == "truncate":
            if argument is None or not argument.strip().isdigit() or int(argument) < 1:
                raise ColumnMaskingError(
                    f"column masking of {where}: {text!r} needs the characters to keep, e.g. truncate(4)"
                )
            return cls(column, method, length=int(argument))
        if method == "mask":
            replacement = DEFAULT_MASK if argument is None else argument
            if not replacement:
                raise ColumnMaskingError(f"column masking of {where}: mask() needs a replacement text")
            return cls(column, method, replacement=replacement)
        if argument is not None:
            raise ColumnMaskingError(f"column masking of {where}: {method} takes no argument, got {text!r}")
        return cls(column, method)


def split_column_key(key: str) -> tuple[str, str, str]:
    """
    Split a rule key ``schema.table.column`` into its three parts (lower-cased schema and table).

    :param key: the settings key.
    """
    parts = key.split(".")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise ColumnMaskingError(
            f"column masking key {key!r} must be schema.table.column, e.g. dbo.customers.email"
        )
    schema, table, column = (p.strip() for p in parts)
    return schema.lower(), table.lower(), column


def parse_rules(columns: Mapping[str, str]) -> dict[tuple[str, str], list[MaskingRule]]:
    """
    Parse the settings' ``{"schema.table.column": "method"}`` into the rules of each table.

    :param columns: the rules as the settings give them.
    :raises ColumnMaskingError: naming the key of a malformed rule.
    """
    tables: dict[tuple[str, str], list[MaskingRule]] = {}
    for key, text in columns.items():
        schema, table, column = split_column_key(key)
        rules = tables.setdefault((schema, table), [])
        if any(r.column.lower() == column.lower() for r in rules):
            raise ColumnMaskingError(f"column masking names {schema}.{table}.{column} twice")
        rules.append(MaskingRule.parse(column, text, f"{schema}.{table}.{column}"))
    return tables


def value_text(value: Any) -> str:
    """
    Return the text a value is hashed as: the same value gives the same text whichever reader read it.

    Strings as they are; ``bytes`` as lower-case hex; booleans ``true``/``false``; numbers, dates and
    times in their Python text form (``Decimal`` keeps its scale, a datetime is ISO 8601).

    :param value: a non-NULL value as Arrow's ``to_pylist`` gives it.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)  # int, float, Decimal (its scale kept)


def hash_value(value: Any, salt: bytes) -> str | None:
    """
    Return the salted SHA-256 (HMAC-SHA-256 keyed by ``salt``) of a value as 64 hex digits; NULL stays None.

    :param value: the value.
    :param salt: the secret salt.
    """
    if value is None:
        return None
    return hmac.new(salt, value_text(value).encode("utf-8"), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class TableMasking:
    """
    The masking of one source table, checked against its columns.

    :param table: ``schema.table``, for messages.
    :param rules: the rules, their ``column`` spelled as the table spells it.
    :param source_types: column -> its declared SQL Server type (``int``, ``nvarchar(200)``...).
    :param salt: the secret of ``hash`` (never shown).
    """

    table: str
    rules: tuple[MaskingRule, ...]
    source_types: Mapping[str, str] = field(default_factory=dict)
    salt: bytes | None = field(default=None, repr=False, compare=False)

    def rule(self, column: str) -> MaskingRule | None:
        """Return the rule of a column (case-insensitive), or None when it is written in clear."""
        lowered = column.lower()
        return next((r for r in self.rules if r.column.lower() == lowered), None)

    def mask_values(self, rule: MaskingRule, values: Iterable[Any]) -> list[Any]:
        """
        Return the values of a column with its rule applied; NULL stays NULL.

        :param rule: the column's rule (not ``drop``).
        :param values: the column's values.
        """
        if rule.method == "hash":
            assert self.salt is not None
            salt = self.salt
            return [hash_value(v, salt) for v in values]
        if rule.method == "mask":
            return [None if v is None else rule.replacement for v in values]
        if rule.method == "truncate":
            return [None if v is None else str(v)[: rule.length] for v in values]
        raise ValueError(f"{self.table}.{rule.column}: {rule.method} has no values")

    def manifest_columns(self, columns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """
        Return the manifest's ``columns`` as the staging holds them: dropped ones left out, masked ones noted.

        A masked column keeps its entry with ``masked`` (the rule) and ``source_type`` (the declared
        SQL Server type); a hashed one, and a masked non-string one, is described as the string it holds.

        :param columns: the manifest's column entries of the capture instance.
        """
        described = []
        for column in columns:
            entry = dict(column)
            rule = self.rule(entry["name"])
            if rule is None:
                described.append(entry)
                continue
            if rule.method == "drop":
                continue
            entry["masked"] = rule.spec
            entry["source_type"] = self.source_types.get(rule.column, str(entry.get("sql_type")))
            if rule.method == "hash":
                entry.update(_string_entry("char", HASH_LENGTH))
            elif rule.method == "mask" and not _holds(entry, len(rule.replacement or "")):
                entry.update(_string_entry("nvarchar", len(rule.replacement or "")))
            described.append(entry)
        return described

    def to_manifest(self) -> dict[str, str]:
        """The manifest's ``masking``: column -> rule (which columns, which method; never the salt)."""
        return {r.column: r.spec for r in self.rules}


def _holds(column: Mapping[str, Any], characters: int) -> bool:
    """Whether a string column holds ``characters`` characters (a non-string column holds no text)."""
    sql_type = str(column.get("sql_type", "")).lower()
    if sql_type not in STRING_TYPES:
        return False
    length = int(column.get("max_length") or -1)
    if length == -1 or sql_type in ("text", "ntext"):
        return True
    return (length // 2 if sql_type in _TWO_BYTE else length) >= characters


def _string_entry(sql_type: str, characters: int) -> dict[str, Any]:
    size = characters * 2 if sql_type in _TWO_BYTE else characters
    return {"sql_type": sql_type, "max_length": size, "precision": 0, "scale": 0, "arrow_type": "string"}


@dataclass(frozen=True)
class ColumnMasking:
    """
    The pipeline's masking rules and the salt of ``hash``; :meth:`for_table` checks them against a table.

    :param columns: ``{"schema.table.column": "method"}`` (see the module's docstring).
    :param salt: the secret ``hash`` keys its HMAC with (never shown).
    """

    columns: Mapping[str, str]
    salt: str | None = field(default=None, repr=False, compare=False)
    tables: dict[tuple[str, str], list[MaskingRule]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", parse_rules(self.columns))

    def for_table(
        self,
        schema: str,
        table: str,
        columns: Sequence[Mapping[str, Any]],
        key_columns: Sequence[str] = (),
        *,
        source_types: Mapping[str, str] | None = None,
    ) -> TableMasking | None:
        """
        Return the masking of one table checked against its columns, or None when no rule names it.

        :param schema: the source table's schema.
        :param table: the source table.
        :param columns: the manifest's column entries (``name``, ``sql_type``, ``max_length``).
        :param key_columns: the columns that identify rows (only ``hash`` keeps them matching).
        :param source_types: column -> declared SQL Server type, for the target's comment.
        :raises ColumnMaskingError: naming the table and column of a rule that cannot apply.
        """
        rules = self.tables.get((schema.lower(), table.lower()))
        if not rules:
            return None
        where = f"{schema}.{table}"
        by_name = {c["name"].lower(): c for c in columns}
        keys = {k.lower() for k in key_columns}
        resolved = []
        for rule in rules:
            column = by_name.get(rule.column.lower())
            if column is None:
                raise ColumnMaskingError(
                    f"column masking of {where}.{rule.column}: the capture instance of {where} has no column "
                    f"{rule.column!r} (its columns: {', '.join(c['name'] for c in columns)}); fix the name in "
                    "masking.columns or add the column to the capture instance"
                )
            name = column["name"]
            sql_type = str(column.get("sql_type", "")).lower()
            if rule.method == "truncate" and sql_type not in STRING_TYPES:
                raise ColumnMaskingError(
                    f"column masking of {where}.{name}: truncate applies to string columns, {name} is "
                    f"{sql_type}; use hash, mask or drop"
                )
            if name.lower() in keys and rule.method != "hash":
                raise ColumnMaskingError(
                    f"column masking of {where}.{name}: {name} is a key column, and {rule.spec} would make "
                    "distinct rows match (or leave them no key); only hash keeps keys matching"
                )
            if rule.method == "hash" and not self.salt:
                raise ColumnMaskingError(
                    f"column masking of {where}.{name}: hash needs a salt: set masking.salt_conn_id "
                    "(masking_salt_conn_id) to an Airflow connection whose password is the salt (none was "
                    "given, or its password is empty)"
                )
            resolved.append(MaskingRule(name, rule.method, rule.length, rule.replacement))
        salt = self.salt.encode("utf-8") if self.salt else None
        return TableMasking(where, tuple(resolved), dict(source_types or {}), salt)


#: What a masked target column's comment holds after its type (``SQL Server char(64); masked: hash of int``).
MASKED_NOTE = "; masked: "


def is_masked_comment(comment: str | None) -> bool:
    """
    Whether a target column's comment records that the column holds masked values.

    :param comment: the column's comment, None when it has none.
    """
    return comment is not None and MASKED_NOTE in comment


def masking_note(column: Mapping[str, Any]) -> str:
    """
    Return what a target column's comment adds for a masked column (``""`` when it is in clear).

    E.g. ``; masked: hash of int`` after ``SQL Server char(64)``. The type before ``;`` stays the one the
    staging holds, so the merge's type checks read the comment as before.

    :param column: the manifest's column entry.
    """
    rule = column.get("masked")
    if not rule:
        return ""
    return f"{MASKED_NOTE}{rule} of {column.get('source_type') or column.get('sql_type')}"


def masking_change(recorded: str | None, column: Mapping[str, Any]) -> str | None:
    """
    Return how a window column's masking differs from what a target column's comment records, or None.

    A target holds a column's values either in clear or masked; windows that switch between the two
    would leave it holding both.

    :param recorded: the target column's comment (``SQL Server ...[; masked: ...]``), None when it has none.
    :param column: the window manifest's column entry.
    """
    if recorded is None:
        return None
    was, now = is_masked_comment(recorded), bool(column.get("masked"))
    if was == now:
        return None
    if now:
        return f"the windows mask it ({column['masked']}) but the table holds its values in clear"
    return "the table holds it masked but the windows carry it in clear"
