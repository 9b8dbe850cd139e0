"""What running a batch yields, for the TDS layer to encode.

:class:`ResultSet`, :class:`StatementDone`, :class:`Message`, :class:`EnvChange`,
:class:`ErrorEvent`, :class:`ReturnStatus` and :class:`OutputParam`, in the order a batch
produces them (:meth:`~.session.Session.execute_batch`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import types as T
from .errors import SqlError
from .extensions import ResultColumn


@dataclass
class ResultSet:
    columns: list[ResultColumn]
    rows: Iterable[tuple[Any, ...]]


@dataclass
class StatementDone:
    rowcount: int | None = None  # None: no count to report


@dataclass
class Message:
    number: int
    state: int
    severity: int
    text: str


@dataclass
class EnvChange:
    kind: str  # database / begin_tran / commit_tran / rollback_tran
    new: Any
    old: Any


@dataclass
class ErrorEvent:
    error: SqlError


@dataclass
class ReturnStatus:
    value: int


@dataclass
class OutputParam:
    ordinal: int
    name: str
    type: T.SqlType
    value: Any
