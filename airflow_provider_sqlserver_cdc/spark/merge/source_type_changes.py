"""Source type changes the target cannot follow: a column narrowed or retyped on SQL Server, checked before any write.

The target's columns carry their SQL Server type in their comment (``SQL Server varchar(50)``,
``spark_types.source_type_comment``). A window whose column has a narrower type of the same kind
(shorter string or binary, smaller integer, decimal precision or scale down, fewer fraction
digits) or a type of another kind than the one the target records comes from an ``ALTER COLUMN``
the target cannot follow: its column would misstate the source. The table's merge then stops with
an error naming the table, the column, the DDL and its LSN (from the windows' ``ddl_events``) and
what to do, before anything is written (``job._prepare``). Widening (``schema_plan``) goes on, and
the widened type becomes the column's recorded type (``plan.comment_columns``, set by the target's
``evolve_table``), so a later narrowing below the new width is caught too: a string type Iceberg
keeps as ``string`` whatever its length (``varchar(20)`` -> ``varchar(50)``) is recorded as well.
The windows are judged in the order their rows apply (``column_groups``), each against the type the
ones before it left.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.column_masking import masking_change
from airflow_provider_sqlserver_cdc.spark.merge.column_groups import apply_position
from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError
from airflow_provider_sqlserver_cdc.spark.merge.spark_types import source_type_comment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_sqlserver_cdc.spark.merge.schema_plan import TargetPlan

PREFIX = "SQL Server "
_TYPE = re.compile(r"^([a-z0-9_]+)(?:\((max|\d+)(?:,(\d+))?\))?$")
_INTEGER_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4}
_KINDS = (
    frozenset({"char", "varchar", "text"}),
    frozenset({"nchar", "nvarchar", "ntext", "sysname"}),
    frozenset({"binary", "varbinary", "image"}),
    frozenset(_INTEGER_RANK),
    frozenset({"decimal", "numeric"}),
    frozenset({"real", "float"}),
    frozenset({"datetime2", "datetime", "smalldatetime"}),
)

#: What a type declared without a length holds, compared with the sized types of its kind: ``text`` is as
#: wide as ``varchar(max)`` (so ``text`` -> ``varchar(50)`` is a narrowing), ``sysname`` is ``nvarchar(128)``.
_IMPLIED_SIZE = {"text": float("inf"), "ntext": float("inf"), "image": float("inf"), "sysname": 128.0}


def parse_source_type(text: str | None) -> tuple[str, float, int] | None:
    """Return (type, size, scale) of a ``SQL Server <type>`` comment; size ``inf`` for (max), None if not one.

    A type declared without a length has the size it implies (``_IMPLIED_SIZE``), else 0.

    :param text: a target column's comment.
    """
    if not text or not text.startswith(PREFIX):
        return None
    match = _TYPE.match(text[len(PREFIX) :].split(";")[0].strip().lower())  # "; masked: ..." (column_masking)
    if match is None:
        return None
    name, size, scale = match.groups()
    if size is None:
        return name, _IMPLIED_SIZE.get(name, 0.0), int(scale or 0)
    return name, float("inf") if size == "max" else float(size), int(scale or 0)


def narrowing(recorded: str | None, window: str | None) -> str | None:
    """Return why the window's SQL Server type cannot follow the recorded one, or None when it can.

    :param recorded: the target column's comment (its SQL Server type when it was created or widened).
    :param window: the window column's ``source_type_comment``.
    """
    old, new = parse_source_type(recorded), parse_source_type(window)
    if old is None or new is None or old == new:
        return None
    (old_name, old_size, old_scale), (new_name, new_size, new_scale) = old, new
    kind = next((k for k in _KINDS if old_name in k), frozenset({old_name}))
    if new_name not in kind:
        return f"its type changed from {old_name} to {new_name}, another kind of type"
    if old_name in _INTEGER_RANK:
        if _INTEGER_RANK[new_name] < _INTEGER_RANK[old_name]:
            return f"it was narrowed from {old_name} to {new_name}"
        return None
    if old_name in ("decimal", "numeric"):
        if new_size < old_size or new_scale < old_scale or new_size - new_scale < old_size - old_scale:
            return f"its precision or scale went down ({recorded[len(PREFIX) :]} -> {window[len(PREFIX) :]})"  # type: ignore[index]
        return None
    if new_size < old_size or new_scale < old_scale:
        return f"it was narrowed ({recorded[len(PREFIX) :]} -> {window[len(PREFIX) :]})"  # type: ignore[index]
    return None


def recorded_source_types(spark: SparkSession, table: str) -> dict[str, str | None]:
    """Return the lower-cased column name -> comment of an existing Spark table.

    :param spark: the session.
    :param table: the dotted table name.
    """
    return {f.name.lower(): f.metadata.get("comment") for f in spark.table(table).schema.fields}


def _ddl_naming(plan: TargetPlan, column: str) -> str:
    """Return the DDL events of the plan's windows that name ``column``, with their LSNs, for the message."""
    found = []
    for window in plan.windows:
        for event in window.manifest.ddl_events or ():
            if column.lower() in event["command"].lower():
                found.append(
                    f"{event['command']!r} at LSN {event['lsn']} ({event.get('time') or 'unknown time'})"
                )
    return "; ".join(dict.fromkeys(found)) or "an ALTER COLUMN before these windows (not in their ddl_events)"


def check_source_types(plan: TargetPlan, recorded: dict[str, Any]) -> list[tuple[str, str]]:
    """Raise SchemaEvolutionError for a window column whose SQL Server type the target cannot follow.

    Returns the columns whose recorded type the windows widen, with the comment to record: (name, comment).

    :param plan: the table's plan, with its pending windows.
    :param recorded: lower-cased column name -> the target column's comment.
    """
    current = dict(recorded)
    widened: dict[str, tuple[str, str]] = {}
    for window in sorted(plan.windows, key=apply_position):
        for column in window.manifest.columns:
            name = column["name"].lower()
            comment, window_type = current.get(name), source_type_comment(column)
            masked = masking_change(comment, column)
            if masked is not None:
                raise SchemaEvolutionError(
                    f"target table {plan.table}: column {column['name']} of {window.manifest.capture_instance}: "
                    f"{masked} ({comment}). Nothing was written to {plan.table}. Column masking applies to a new "
                    "target: drop or rename the table and re-snapshot it (trigger the DAG with conf "
                    f'{{"resnapshot": ["{window.manifest.capture_instance}"]}}) (docs/column-masking.md)'
                )
            problem = narrowing(comment, window_type)
            if problem is None:
                if name in recorded and comment is not None and window_type != comment:
                    current[name] = window_type
                    widened[name] = (column["name"], window_type)
                continue
            raise SchemaEvolutionError(
                f"target table {plan.table}: column {column['name']} of {window.manifest.capture_instance} cannot "
                f"be followed: {problem}. DDL: {_ddl_naming(plan, column['name'])}. Nothing was written to "
                f"{plan.table}. Either widen the column on the source again (ALTER TABLE ... ALTER COLUMN back "
                "to the type the target has) and re-run, or rebuild the target: drop or rename the table and "
                "re-snapshot it (trigger the DAG with conf "
                f'{{"resnapshot": ["{window.manifest.capture_instance}"]}}) (docs/schema-changes.md)'
            )
    return [widened[name] for name in widened if current[name] != recorded.get(name)]


def check_target_can_follow(spark: SparkSession, target: Any, plan: TargetPlan) -> None:
    """Check the plan's windows against an existing Iceberg target's recorded SQL Server types; plan widened ones.

    :param spark: the session.
    :param target: the merge target (only Iceberg tables record the types in comments).
    :param plan: the table's plan, with its pending windows.
    """
    if not plan.exists or not plan.windows or type(target).__name__ != "IcebergTarget":
        return
    plan.comment_columns = check_source_types(plan, recorded_source_types(spark, plan.table))
