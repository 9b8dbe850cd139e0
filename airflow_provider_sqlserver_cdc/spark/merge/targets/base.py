"""The target interface: what the merge job asks of a kind of target table (Iceberg, a relational database).

A target creates and evolves its tables, tells which LSN ranges a table already holds, and applies
a batch of windows: their net effect, where a change only replaces a row holding an older change
(the LSN guard), together with the new applied LSN ranges in one atomic commit. Everything else
(reading and checking windows, schema planning, the order of batches) is the job's, the same for
every target.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, add_range
from airflow_provider_sqlserver_cdc.window.manifest import REPAIR

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan
    from airflow_provider_sqlserver_cdc.spark.merge.window_reader import Window

#: Capture instance -> the joined inclusive LSN ranges a target table holds.
AppliedRanges = dict[str, list[LsnRange]]


def ranges_after(applied: Mapping[str, list[LsnRange]], windows: Iterable[Window]) -> AppliedRanges:
    """Return the applied ranges once ``windows`` are applied too.

    :param applied: the ranges the table holds now.
    :param windows: the windows of the batch.
    """
    after = {ci: list(ranges) for ci, ranges in applied.items()}
    for window in windows:
        if window.manifest.kind == REPAIR:  # a repair re-copies rows; it applies no range of the change log
            continue
        ci = window.manifest.capture_instance
        after[ci] = add_range(after.get(ci, []), *window.manifest.lsn_range)
    return after


@dataclass(frozen=True)
class ChangeBatch:
    """Windows of one target table applied in one commit.

    :param plan: the target's plan (key columns, column types).
    :param windows: the windows of the batch: one snapshot, or change windows.
    :param changes: their rows as ``window_reader.read_window`` returns them (all windows unioned).
    :param columns: the captured columns (target names) the batch writes.
    :param hard: remove deleted keys instead of flagging them.
    :param applied: the applied LSN ranges of the table once the batch is applied, to record with it.
    :param applied_before: the ranges the table held when the job read it (what ``applied`` builds on).
    """

    plan: TargetPlan
    windows: tuple[Window, ...]
    changes: DataFrame
    columns: tuple[str, ...]
    hard: bool
    applied: AppliedRanges
    applied_before: AppliedRanges = field(default_factory=dict)

    @property
    def snapshot(self) -> Window | None:
        """The snapshot window, when the batch is a snapshot: target rows it lacks are retired."""
        first = self.windows[0]
        return first if first.manifest.kind == "snapshot" else None

    @property
    def change_rows(self) -> int:
        """The rows of the batch's windows, update before-images included."""
        return sum(w.manifest.row_count for w in self.windows)

    @property
    def key_bounds(self) -> tuple[int, int] | None:
        """The lowest and highest value of the first key column in ``changes``, as the job read them
        while checking the windows (``window_reader.check_rows``); None when a window's are not known."""
        checked = [self.plan.checked.get(w.uri) for w in self.windows if w.manifest.row_count > 0]
        bounds = [c.key_bounds if c is not None else None for c in checked]
        known = [b for b in bounds if b is not None]
        if not known or len(known) < len(bounds):
            return None
        return min(low for low, _ in known), max(high for _, high in known)

    @property
    def change_bytes(self) -> int:
        """The size of the batch's Parquet files (a file of unknown size counted at 200 bytes a row)."""
        return sum(f.bytes if f.bytes >= 0 else 200 * f.rows for w in self.windows for f in w.files)

    @property
    def labels(self) -> str:
        """The windows' labels, for messages."""
        return ", ".join(w.label for w in self.windows)


class MergeTarget(ABC):
    """A kind of target table the merge job writes to."""

    #: True when the target keeps each hard-deleted key with the position of its delete, so that an older
    #: change applied later cannot bring the row back: the job then takes hard-delete windows in any order.
    remembers_hard_deletes: bool = False

    def check_session(self) -> None:  # noqa: B027 - optional hook: most targets need nothing
        """Raise ``MergeJobError`` if the Spark session lacks what the target needs."""

    def version(self, table: str) -> str | None:
        """Return the table's current version (Iceberg: its current snapshot id), or None when it has none.

        The job reports it per committed table; Airflow's asset events carry it (``assets.py``).

        :param table: the dotted target table name.
        """
        return None

    @abstractmethod
    def exists(self, table: str) -> bool:
        """Say whether the target table exists.

        :param table: the dotted target table name.
        """

    @abstractmethod
    def applied_ranges(self, table: str) -> AppliedRanges:
        """Return the LSN ranges the existing table holds, per capture instance.

        :param table: the dotted target table name.
        """

    @abstractmethod
    def table_schema(self, table: str) -> dict[str, str]:
        """Return lower-cased column name -> Spark SQL type of the existing table.

        :param table: the dotted target table name.
        """

    @abstractmethod
    def identifier_fields(self, table: str) -> list[str]:
        """Return the key columns the existing table declares (empty if it declares none).

        :param table: the dotted target table name.
        """

    @abstractmethod
    def create_table(self, plan: TargetPlan) -> None:
        """Create the table with the planned columns, the change columns and the key.

        :param plan: the planned target (``schema_plan.plan_schema`` has run).
        """

    @abstractmethod
    def evolve_table(self, plan: TargetPlan) -> None:
        """Add and widen the planned columns of an existing table.

        :param plan: the planned target (``schema_plan.plan_schema`` has run).
        """

    @abstractmethod
    def apply(self, batch: ChangeBatch) -> None:
        """Apply the batch's net effect, newer changes only, and record ``batch.applied`` in the same commit.

        :param batch: the windows, their rows and the applied ranges after them.
        """
