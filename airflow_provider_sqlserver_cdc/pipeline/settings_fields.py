"""
Read and check the fields of a settings dataclass by their type hints, naming the bad key.

The settings dataclasses (settings.py) call :func:`check_fields` from ``__post_init__``, so a
settings object built in Python is checked like one read from YAML; :func:`read_section` turns
a nested mapping (parsed YAML) into a dataclass, refusing unknown keys and expanding
``${NAME}`` / ``${NAME:-default}`` environment references in its strings.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_EXPECTED_TEXT = {bool: "true or false", int: "an integer", float: "a number"}


class SettingsError(ValueError):
    """A setting is unknown, missing, of the wrong type or out of range; the message names its key."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem


def join_key(prefix: str, name: str) -> str:
    """Return the dotted key of ``name`` inside ``prefix`` (``merge`` + ``namespace`` -> ``merge.namespace``)."""
    return f"{prefix}.{name}" if prefix else name


def expand_environment(text: str, key: str, environ: Mapping[str, str] | None = None) -> str:
    """
    Replace ``${NAME}`` and ``${NAME:-default}`` with environment values (an empty value counts as unset).

    :param text: a setting's text.
    :param key: the setting's dotted key, for the error.
    :param environ: the environment (default ``os.environ``).
    """
    env = os.environ if environ is None else environ

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if value:
            return value
        if default is None:
            raise SettingsError(
                key, f"${{{name}}} is not set in the environment; set it or write ${{{name}:-default}}"
            )
        return default

    return ENV_REFERENCE.sub(replace, text)


def read_section(cls: type[T], data: Any, prefix: str, environ: Mapping[str, str] | None = None) -> T:
    """
    Build the settings dataclass ``cls`` from a mapping: its keys override the field defaults.

    :param cls: a settings dataclass.
    :param data: the mapping (``None`` for an empty section).
    :param prefix: the dotted key of the section (empty for the top level).
    :param environ: the environment for ``${NAME}`` references (default ``os.environ``).
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SettingsError(prefix or "settings", f"expected a mapping of settings, got {_describe(data)}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    for key in data:
        if key not in names:
            raise SettingsError(
                join_key(prefix, str(key)), f"unknown setting; known here: {', '.join(names)}"
            )
    values = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = join_key(prefix, field.name)
        hint = hints[field.name]
        if field.name in data:
            values[field.name] = _read_value(data[field.name], hint, key, environ)
        elif _is_section(hint):
            values[field.name] = read_section(hint, {}, key, environ)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise SettingsError(key, "required (it has no default)")
    return cls(**values)


def check_fields(instance: Any, prefix: str) -> None:
    """
    Check (and normalize in place) every field of a frozen settings dataclass against its type hint.

    Lists become tuples, integers of float fields floats, mappings read-only ``str -> str``,
    ISO 8601 text of datetime fields a datetime, and the empty text of an optional field None.

    :param instance: the dataclass instance (from its ``__post_init__``).
    :param prefix: the dotted key of its section.
    """
    hints = typing.get_type_hints(type(instance))
    for field in dataclasses.fields(instance):
        key = join_key(prefix, field.name)
        value = _checked(getattr(instance, field.name), hints[field.name], key)
        object.__setattr__(instance, field.name, value)


def _read_value(raw: Any, hint: Any, key: str, environ: Mapping[str, str] | None) -> Any:
    """Expand environment references in ``raw`` and turn an expanded text into the field's type."""
    if _is_section(hint):
        return read_section(hint, raw, key, environ)
    item = _section_item(hint)
    if item is not None and isinstance(raw, list | tuple):
        return tuple(
            read_section(item, entry, _item_key(key, i, entry), environ) for i, entry in enumerate(raw)
        )
    if isinstance(raw, str) and ENV_REFERENCE.search(raw):
        return _from_text(expand_environment(raw, key, environ), hint, key)
    if isinstance(raw, list | tuple):
        return [_read_value(item, str, f"{key}[{i}]", environ) for i, item in enumerate(raw)]
    if isinstance(raw, Mapping) and not _is_section(hint):
        return {k: _read_value(v, str, f"{key}[{k!r}]", environ) for k, v in raw.items()}
    return raw


def _from_text(text: str, hint: Any, key: str) -> Any:
    """The value of an environment-expanded text for a field of type ``hint``."""
    optional, base = _optional(hint)
    if optional and text == "":
        return None
    try:
        if base is bool:
            lowered = text.strip().lower()
            if lowered not in _TRUE | _FALSE:
                raise ValueError(text)
            return lowered in _TRUE
        if base is int:
            return int(text)
        if base is float:
            return float(text)
    except ValueError:
        raise SettingsError(key, f"the environment gives {text!r}, not {_EXPECTED_TEXT[base]}") from None
    return text


def _checked(value: Any, hint: Any, key: str) -> Any:
    optional, base = _optional(hint)
    if value is None or (optional and value == ""):
        if optional:
            return None
        raise SettingsError(key, "required (it has no default)")
    origin = typing.get_origin(base)
    if _is_section(base):
        if not isinstance(value, base):
            raise SettingsError(key, f"expected {base.__name__}, got {_describe(value)}")
        return value
    if base is bool:
        if not isinstance(value, bool):
            raise SettingsError(key, f"expected true or false, got {_describe(value)}")
        return value
    if base is int or base is float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (base is int and isinstance(value, float))
        ):
            raise SettingsError(key, f"expected a number ({base.__name__}), got {_describe(value)}")
        return base(value)
    if base is str:
        if not isinstance(value, str):
            raise SettingsError(key, f"expected text, got {_describe(value)}")
        return value
    if base is dt.datetime:
        return _datetime(value, key)
    if origin is tuple:
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise SettingsError(key, f"expected a list, got {_describe(value)}")
        item = _section_item(base)
        if item is not None:
            for i, entry in enumerate(value):
                if not isinstance(entry, item):
                    raise SettingsError(f"{key}[{i}]", f"expected {item.__name__}, got {_describe(entry)}")
            return tuple(value)
        return tuple(_checked(item, str, f"{key}[{i}]") for i, item in enumerate(value))
    if origin is Mapping or origin is dict:
        if not isinstance(value, Mapping):
            raise SettingsError(key, f"expected a mapping, got {_describe(value)}")
        return types.MappingProxyType({str(k): _setting_text(v, f"{key}[{k!r}]") for k, v in value.items()})
    raise TypeError(f"{key}: settings fields of type {hint!r} are not supported")


def _setting_text(value: Any, key: str) -> str:
    """A configuration value as text (``true``/``false`` for booleans, as Spark and Iceberg spell them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise SettingsError(key, f"expected text or a number, got {_describe(value)}")


def _datetime(value: Any, key: str) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):  # YAML's 2026-01-01
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value)
        except ValueError:
            pass
    raise SettingsError(key, f"expected an ISO 8601 date and time, got {_describe(value)}")


def _optional(hint: Any) -> tuple[bool, Any]:
    """Whether ``hint`` allows None, and the hint without None."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(rest) < len(typing.get_args(hint)), rest[0]
    return False, hint


def _is_section(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _section_item(hint: Any) -> type | None:
    """The section type of a ``tuple[Section, ...]`` field (a list of sections), else None."""
    args = typing.get_args(hint) if typing.get_origin(hint) is tuple else ()
    return args[0] if args and _is_section(args[0]) else None


def _item_key(key: str, index: int, entry: Any) -> str:
    """The dotted key of one section of a list: by its name when it has one (``sources['eu']``), else its index."""
    name = entry.get("name") if isinstance(entry, Mapping) else None
    return f"{key}[{name!r}]" if isinstance(name, str) and name else f"{key}[{index}]"


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


class Section:
    """A settings section: checks its fields against their types when it is built, then :meth:`check`."""

    key: ClassVar[str] = ""

    def __post_init__(self) -> None:
        check_fields(self, self.key)
        self.check()

    def check(self) -> None:
        """Refuse values out of range (beyond what the field types say)."""

    def _require(self, name: str, condition: bool, problem: str) -> None:
        if not condition:
            raise SettingsError(f"{self.key}.{name}" if self.key else name, problem)
