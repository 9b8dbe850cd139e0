"""The plan of one target table: the windows going into it and the schema changes they need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.merge.errors import SchemaEvolutionError
from airflow_provider_sqlserver_cdc.spark.merge.spark_types import (
    is_nanosecond_column,
    source_type_comment,
    spark_type,
    widening,
)
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_provider_sqlserver_cdc.spark.merge.window_reader import CheckedWindow, Window


@dataclass
class TargetPlan:
    """The windows going into one target table and the schema changes they need."""

    table: str
    windows: list[Window] = field(default_factory=list)
    skipped: list[Window] = field(default_factory=list)
    merged: list[Window] = field(default_factory=list)  # the windows committed by this run
    exists: bool = False
    applied: dict[str, list[LsnRange]] = field(default_factory=dict)  # capture instance -> LSN ranges
    add_columns: list[tuple[str, str, str]] = field(default_factory=list)  # name, type, comment
    widen_columns: list[tuple[str, str]] = field(default_factory=list)
    comment_columns: list[tuple[str, str]] = field(default_factory=list)  # name, widened SQL Server type
    key_columns: tuple[str, ...] = ()
    column_types: dict[str, str] = field(default_factory=dict)  # lower name -> window type
    # window URI -> the window's rows and key bounds, as the job's check read them (``check_rows``)
    checked: dict[str, CheckedWindow] = field(default_factory=dict)
    snapshot_id: int | None = None  # the snapshot holding this run's last commit (Iceberg)
    seconds: float = 0.0  # the table's time in the run: check and commit
    mode: str = "current"  # the table mode (``table_modes``): current, history or changelog


def plan_schema(
    plan: TargetPlan, table_schema: dict[str, str] | None, identifier_fields: Sequence[str] | None = None
) -> None:
    """Work out the columns to add and widen; raise before anything is changed.

    :param plan: the target's plan, with its windows; its schema fields are filled in.
    :param table_schema: lower-cased column name -> Spark SQL type of the existing table, or None.
    :param identifier_fields: the key columns the existing table declares, if it declares any.
    """
    windows = plan.windows
    keys = tuple(windows[0].manifest.key_columns)
    for window in windows:
        if [k.lower() for k in window.manifest.key_columns] != [k.lower() for k in keys]:
            raise SchemaEvolutionError(
                f"target table {plan.table}: window {window.label} has key columns {list(window.manifest.key_columns)}, "
                f"other windows have {list(keys)}; give each key its own target with --target"
            )
        for column in window.manifest.columns:
            name = column["name"].lower()
            column_type = spark_type(column, plan.table)
            if column["name"].lower() in {k.lower() for k in keys} and is_nanosecond_column(column):
                raise SchemaEvolutionError(
                    f"target table {plan.table}: key column {column['name']} is datetime2(7); Iceberg in Spark "
                    "3.5 keeps microseconds, which could merge distinct keys. Use a key with datetime2(6) or less"
                )
            previous = plan.column_types.get(name)
            if previous is None:
                plan.column_types[name] = column_type
            else:
                try:
                    plan.column_types[name] = widening(previous, column_type) or previous
                except ValueError:
                    try:
                        widening(column_type, previous)
                    except ValueError:
                        raise SchemaEvolutionError(
                            f"target table {plan.table}: column {column['name']} is {previous} in one window "
                            f"and {column_type} in window {window.label}; merge these windows in separate runs "
                            "after fixing the type"
                        ) from None
                    plan.column_types[name] = column_type
    plan.key_columns = keys
    if table_schema is None:
        return
    identifier = sorted(k.lower() for k in identifier_fields or ())
    if identifier and identifier != sorted(k.lower() for k in keys):
        raise SchemaEvolutionError(
            f"target table {plan.table}: its identifier fields are {identifier} but the windows' key columns are "
            f"{list(keys)}; a changed key needs a new target table (--target) or a new snapshot into a new table"
        )
    comments = {
        c["name"].lower(): (c["name"], source_type_comment(c)) for w in windows for c in w.manifest.columns
    }
    for name, window_type in plan.column_types.items():
        if name not in table_schema:
            plan.add_columns.append((comments[name][0], window_type, comments[name][1]))
            continue
        try:
            wider = widening(table_schema[name], window_type)
        except ValueError:
            raise SchemaEvolutionError(
                f"target table {plan.table}: column {comments[name][0]} is {table_schema[name]} in the table but "
                f"{window_type} in the window; Iceberg only widens INT->BIGINT, FLOAT->DOUBLE and DECIMAL "
                "precision. Rebuild the table from a new snapshot (or merge into a new --target)"
            ) from None
        if wider:
            plan.widen_columns.append((comments[name][0], wider))
