"""DataclassTrigger: a trigger declared as a dataclass, whose fields are its arguments and what it serializes."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from airflow.triggers.base import BaseTrigger


class DataclassTrigger(BaseTrigger):
    """
    The base of the provider's triggers: declare one with ``@dataclass(kw_only=True, eq=False, repr=False)``.

    Its fields are the keyword arguments the triggerer re-creates it with, so :meth:`serialize`
    round-trips by construction. A subclass normalises its fields in ``__post_init__`` after
    calling this one's.
    """

    def __post_init__(self) -> None:
        BaseTrigger.__init__(self)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and the fields, from which the triggerer re-creates the trigger."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {field.name: getattr(self, field.name) for field in fields(self)},
        )
