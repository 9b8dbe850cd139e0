"""The checks of the operators' arguments when a DAG is built, with the messages they fail with."""

from __future__ import annotations

from collections.abc import Collection


def check_one_of(
    name: str, value: object, allowed: Collection[object], *, task_id: str | None = None
) -> None:
    """
    Raise ``ValueError`` unless ``value`` is one of ``allowed``.

    :param name: the argument's name, for the message.
    :param value: what was passed.
    :param allowed: the values it may take.
    :param task_id: the task whose argument it is: the message starts with it.
    """
    if value not in allowed:
        prefix = f"{task_id}: " if task_id else ""
        raise ValueError(f"{prefix}{name} must be one of {allowed}, got {value!r}")
