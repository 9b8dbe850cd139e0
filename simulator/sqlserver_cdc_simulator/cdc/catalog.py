"""CDC tables and views readable with SELECT: the ``cdc`` schema's tables, ``msdb.dbo.cdc_jobs`` and the DMV.

Each function takes ``(session, database)`` and returns a :class:`Rowset` with SQL Server's columns
in SQL Server's order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlserver_cdc_simulator.cdc import errors
from sqlserver_cdc_simulator.cdc.capture_instance import CaptureInstance
from sqlserver_cdc_simulator.cdc.database_state import CdcDatabase
from sqlserver_cdc_simulator.cdc.functions import (
    datetime_ticks,
)
from sqlserver_cdc_simulator.cdc.lsn import lsn_to_dmv_text
from sqlserver_cdc_simulator.cdc.session_access import (
    cdc_state,
    database_object,
    databases_of,
    server_of,
)
from sqlserver_cdc_simulator.extensions import Rowset, ViewFn, result_columns


def _require(session: Any, database: Any, table: str) -> CdcDatabase:
    """The CDC state of the view's database; error 208 on ``cdc.<table>`` if CDC is not enabled there."""
    state = cdc_state(database_object(session, database))
    if state is None:
        raise errors.invalid_object_name(f"cdc.{table}")
    return state


def _instances(state: CdcDatabase) -> list[CaptureInstance]:
    """The capture instances of a database in ``object_id`` order (the catalog views' order)."""
    return sorted(state.instances.values(), key=lambda ci: ci.object_id)


def instance_settings(ci: CaptureInstance) -> tuple[Any, ...]:
    """What ``cdc.change_tables`` and ``sp_cdc_help_change_data_capture`` both show of an instance.

    (start_lsn, end_lsn, supports_net_changes, has_drop_pending, role_name, index_name,
    filegroup_name, create_date); end_lsn is always NULL, as in SQL Server.
    """
    return (
        ci.start_lsn,
        None,
        int(ci.supports_net_changes),
        int(ci.has_drop_pending),
        ci.role_name,
        ci.index_name,
        ci.filegroup_name,
        datetime_ticks(ci.create_date),
    )


def _cdc_schema_view(
    table: str, columns: str, rows: Callable[[CdcDatabase], Iterable[tuple[Any, ...]]]
) -> ViewFn:
    """
    A ``cdc.<table>`` view: error 208 where CDC is not enabled, else its rows from the database's CDC state.

    :param table: the table's name in the ``cdc`` schema.
    :param columns: its columns as SQL Server's documentation lists them (see :func:`result_columns`).
    :param rows: its rows, from the database's CDC state.
    """

    def view(session: Any, database: Any) -> Rowset:
        state = _require(session, database, table)
        return Rowset(result_columns(columns), list(rows(state)))

    view.__name__ = table
    view.__doc__ = f"``cdc.{table}``."
    return view


def _change_table_rows(state: CdcDatabase) -> Iterable[tuple[Any, ...]]:
    for ci in _instances(state):
        yield (
            ci.object_id,
            0,
            ci.source_object_id,
            ci.name,
            *instance_settings(ci),
            int(ci.partition_switch),
        )


def _captured_column_rows(state: CdcDatabase) -> Iterable[tuple[Any, ...]]:
    """``object_id`` is the change table's id, one set of rows per instance."""
    for ci in _instances(state):
        for c in ci.captured_columns:
            yield (ci.object_id, c.name, c.column_id, c.column_type, c.ordinal, int(c.is_computed))


def _index_column_rows(state: CdcDatabase) -> Iterable[tuple[Any, ...]]:
    for ci in _instances(state):
        for ic in ci.index_columns:
            yield (ci.object_id, ic.name, ic.index_ordinal, ic.column_id)


def _ddl_history_rows(state: CdcDatabase) -> Iterable[tuple[Any, ...]]:
    for row in list(state.ddl_history):
        yield (
            row.source_object_id,
            row.object_id,
            int(row.required_column_update),
            row.ddl_command,
            row.ddl_lsn,
            datetime_ticks(row.ddl_time),
        )


def _lsn_time_mapping_rows(state: CdcDatabase) -> Iterable[tuple[Any, ...]]:
    for row in state.mapping.rows():
        yield (
            row.start_lsn,
            datetime_ticks(row.tran_begin_time),
            datetime_ticks(row.tran_end_time),
            row.tran_id,
            row.tran_begin_lsn,
        )


change_tables = _cdc_schema_view(
    "change_tables",
    """
    object_id int NOT NULL, version int, source_object_id int, capture_instance sysname NOT NULL,
    start_lsn binary(10), end_lsn binary(10), supports_net_changes bit, has_drop_pending bit,
    role_name sysname, index_name sysname, filegroup_name sysname, create_date datetime,
    partition_switch bit NOT NULL
    """,
    _change_table_rows,
)
captured_columns = _cdc_schema_view(
    "captured_columns",
    """
    object_id int NOT NULL, column_name sysname NOT NULL, column_id int, column_type sysname NOT NULL,
    column_ordinal int NOT NULL, is_computed bit
    """,
    _captured_column_rows,
)
index_columns = _cdc_schema_view(
    "index_columns",
    """
    object_id int NOT NULL, column_name sysname NOT NULL, index_ordinal tinyint NOT NULL,
    column_id int NOT NULL
    """,
    _index_column_rows,
)
ddl_history = _cdc_schema_view(
    "ddl_history",
    """
    source_object_id int, object_id int NOT NULL, required_column_update bit,
    ddl_command nvarchar(max), ddl_lsn binary(10) NOT NULL, ddl_time datetime
    """,
    _ddl_history_rows,
)
lsn_time_mapping = _cdc_schema_view(
    "lsn_time_mapping",
    """
    start_lsn binary(10) NOT NULL, tran_begin_time datetime, tran_end_time datetime,
    tran_id varbinary(10), tran_begin_lsn binary(10)
    """,
    _lsn_time_mapping_rows,
)


def cdc_jobs(session: Any, database: Any) -> Rowset:
    """``msdb.dbo.cdc_jobs``: the capture and cleanup job settings of every CDC-enabled database."""
    columns = result_columns(
        """
        database_id int NOT NULL, job_type nvarchar(20) NOT NULL, job_id uniqueidentifier, maxtrans int,
        maxscans int, continuous bit, pollinginterval bigint, retention bigint, threshold bigint
        """
    )
    rows = []
    for db in sorted(databases_of(server_of(session)), key=lambda d: d.database_id):
        state = cdc_state(db)
        if state is None:
            continue
        rows.extend(
            (db.database_id, job_type, job_id, *settings) for job_id, job_type, *settings in state.job_rows()
        )
    if not rows and not any(cdc_state(db) is not None for db in databases_of(server_of(session))):
        # SQL Server creates the table with the first CDC job and drops it with the last one.
        raise errors.invalid_object_name("msdb.dbo.cdc_jobs")
    return Rowset(columns, rows)


def dm_cdc_log_scan_sessions(session: Any, database: Any) -> Rowset:
    """``sys.dm_cdc_log_scan_sessions`` of the current database (empty when CDC is not enabled)."""
    database = database_object(session, database)
    columns = result_columns(
        """
        session_id int NOT NULL, start_time datetime, end_time datetime, duration bigint,
        scan_phase nvarchar(200), error_count int, start_lsn nvarchar(23), current_lsn nvarchar(23),
        end_lsn nvarchar(23), tran_count bigint, last_commit_lsn nvarchar(23), last_commit_time datetime,
        log_record_count bigint, schema_change_count int, command_count bigint,
        first_begin_cdc_lsn nvarchar(23), last_commit_cdc_lsn nvarchar(23), last_commit_cdc_time datetime,
        latency int, empty_scan_count int, failed_sessions_count int
        """
    )
    state = cdc_state(database)
    rows = []
    if state is not None:
        sessions = state.session_rows()
        total_duration = sum(s.duration for s in sessions[1:])
        for s in sessions:
            rows.append(
                (
                    s.session_id,
                    datetime_ticks(s.start_time),
                    datetime_ticks(s.end_time),
                    total_duration if s.session_id == 0 else s.duration,
                    s.scan_phase,
                    s.error_count,
                    lsn_to_dmv_text(s.start_lsn),
                    lsn_to_dmv_text(s.current_lsn),
                    lsn_to_dmv_text(s.end_lsn),
                    s.tran_count,
                    lsn_to_dmv_text(s.last_commit_lsn),
                    datetime_ticks(s.last_commit_time),
                    s.log_record_count,
                    s.schema_change_count,
                    s.command_count,
                    lsn_to_dmv_text(s.first_begin_cdc_lsn),
                    lsn_to_dmv_text(s.last_commit_cdc_lsn),
                    datetime_ticks(s.last_commit_cdc_time),
                    s.latency,
                    s.empty_scan_count,
                    s.failed_sessions_count,
                )
            )
    return Rowset(columns, rows)


def dm_cdc_errors(session: Any, database: Any) -> Rowset:
    """``sys.dm_cdc_errors``: the errors of the kept log scan sessions (empty when CDC is not enabled)."""
    columns = result_columns(
        """
        session_id int NOT NULL, phase_number int NOT NULL, entry_time datetime, error_number int,
        error_severity int, error_state int, error_message nvarchar(1024), start_lsn nvarchar(23),
        begin_lsn nvarchar(23), sequence_value nvarchar(23)
        """
    )
    state = cdc_state(database_object(session, database))
    rows = [
        (
            e.session_id,
            e.failure.phase,
            datetime_ticks(e.entry_time),
            e.failure.number,
            e.failure.severity,
            e.failure.state,
            e.failure.message[:1024],
            lsn_to_dmv_text(e.failure.xact.commit_lsn),
            lsn_to_dmv_text(e.failure.xact.begin_lsn),
            lsn_to_dmv_text(e.failure.lsn),
        )
        for e in (list(state.errors) if state is not None else [])
    ]
    return Rowset(columns, rows)


STATIC_VIEWS = {
    "cdc.change_tables": change_tables,
    "cdc.captured_columns": captured_columns,
    "cdc.index_columns": index_columns,
    "cdc.ddl_history": ddl_history,
    "cdc.lsn_time_mapping": lsn_time_mapping,
    "msdb.dbo.cdc_jobs": cdc_jobs,
    "sys.dm_cdc_log_scan_sessions": dm_cdc_log_scan_sessions,
    "sys.dm_cdc_errors": dm_cdc_errors,
}
