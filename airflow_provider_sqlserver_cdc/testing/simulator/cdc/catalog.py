"""CDC tables and views readable with SELECT: the ``cdc`` schema's tables, ``msdb.dbo.cdc_jobs`` and the DMV.

Each function takes ``(session, database)`` and returns a :class:`Rowset` with SQL Server's columns
in SQL Server's order.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_sqlserver_cdc.testing.simulator import types as T
from airflow_provider_sqlserver_cdc.testing.simulator.cdc import errors
from airflow_provider_sqlserver_cdc.testing.simulator.cdc.database_state import CdcDatabase
from airflow_provider_sqlserver_cdc.testing.simulator.cdc.functions import (
    LSN_TYPE,
    datetime_ticks,
)
from airflow_provider_sqlserver_cdc.testing.simulator.cdc.lsn import lsn_to_dmv_text
from airflow_provider_sqlserver_cdc.testing.simulator.cdc.session_access import (
    cdc_state,
    database_object,
    databases_of,
    server_of,
)
from airflow_provider_sqlserver_cdc.testing.simulator.extensions import ResultColumn, Rowset

SYSNAME = T.SYSNAME


def _col(name: str, sql_type: T.SqlType, nullable: bool = True) -> ResultColumn:
    return ResultColumn(name, sql_type, nullable)


def _require(database: Any, table: str) -> CdcDatabase:
    state = cdc_state(database)
    if state is None:
        raise errors.invalid_object_name(f"cdc.{table}")
    return state


def change_tables(session: Any, database: Any) -> Rowset:
    """``cdc.change_tables``."""
    database = database_object(session, database)
    state = _require(database, "change_tables")
    columns = [
        _col("object_id", T.INT, False),
        _col("version", T.INT),
        _col("source_object_id", T.INT),
        _col("capture_instance", SYSNAME, False),
        _col("start_lsn", LSN_TYPE),
        _col("end_lsn", LSN_TYPE),
        _col("supports_net_changes", T.BIT),
        _col("has_drop_pending", T.BIT),
        _col("role_name", SYSNAME),
        _col("index_name", SYSNAME),
        _col("filegroup_name", SYSNAME),
        _col("create_date", T.DATETIME),
        _col("partition_switch", T.BIT, False),
    ]
    rows = [
        (
            ci.object_id,
            0,
            ci.source_object_id,
            ci.name,
            ci.start_lsn,
            None,
            int(ci.supports_net_changes),
            int(ci.has_drop_pending),
            ci.role_name,
            ci.index_name,
            ci.filegroup_name,
            datetime_ticks(ci.create_date),
            int(ci.partition_switch),
        )
        for ci in sorted(state.instances.values(), key=lambda ci: ci.object_id)
    ]
    return Rowset(columns, rows)


def captured_columns(session: Any, database: Any) -> Rowset:
    """``cdc.captured_columns`` (``object_id`` is the change table's id, one set of rows per instance)."""
    database = database_object(session, database)
    state = _require(database, "captured_columns")
    columns = [
        _col("object_id", T.INT, False),
        _col("column_name", SYSNAME, False),
        _col("column_id", T.INT),
        _col("column_type", SYSNAME, False),
        _col("column_ordinal", T.INT, False),
        _col("is_computed", T.BIT),
    ]
    rows = [
        (ci.object_id, c.name, c.column_id, c.column_type, c.ordinal, int(c.is_computed))
        for ci in sorted(state.instances.values(), key=lambda ci: ci.object_id)
        for c in ci.captured_columns
    ]
    return Rowset(columns, rows)


def index_columns(session: Any, database: Any) -> Rowset:
    """``cdc.index_columns``."""
    database = database_object(session, database)
    state = _require(database, "index_columns")
    columns = [
        _col("object_id", T.INT, False),
        _col("column_name", SYSNAME, False),
        _col("index_ordinal", T.TINYINT, False),
        _col("column_id", T.INT, False),
    ]
    rows = [
        (ci.object_id, ic.name, ic.index_ordinal, ic.column_id)
        for ci in sorted(state.instances.values(), key=lambda ci: ci.object_id)
        for ic in ci.index_columns
    ]
    return Rowset(columns, rows)


def ddl_history(session: Any, database: Any) -> Rowset:
    """``cdc.ddl_history``."""
    database = database_object(session, database)
    state = _require(database, "ddl_history")
    columns = [
        _col("source_object_id", T.INT),
        _col("object_id", T.INT, False),
        _col("required_column_update", T.BIT),
        _col("ddl_command", T.NVARCHAR_MAX),
        _col("ddl_lsn", LSN_TYPE, False),
        _col("ddl_time", T.DATETIME),
    ]
    rows = [
        (
            row.source_object_id,
            row.object_id,
            int(row.required_column_update),
            row.ddl_command,
            row.ddl_lsn,
            datetime_ticks(row.ddl_time),
        )
        for row in list(state.ddl_history)
    ]
    return Rowset(columns, rows)


def lsn_time_mapping(session: Any, database: Any) -> Rowset:
    """``cdc.lsn_time_mapping``."""
    database = database_object(session, database)
    state = _require(database, "lsn_time_mapping")
    columns = [
        _col("start_lsn", LSN_TYPE, False),
        _col("tran_begin_time", T.DATETIME),
        _col("tran_end_time", T.DATETIME),
        _col("tran_id", T.varbinary(10)),
        _col("tran_begin_lsn", LSN_TYPE),
    ]
    rows = [
        (
            row.start_lsn,
            datetime_ticks(row.tran_begin_time),
            datetime_ticks(row.tran_end_time),
            row.tran_id,
            row.tran_begin_lsn,
        )
        for row in state.mapping.rows()
    ]
    return Rowset(columns, rows)


def cdc_jobs(session: Any, database: Any) -> Rowset:
    """``msdb.dbo.cdc_jobs``: the capture and cleanup job settings of every CDC-enabled database."""
    columns = [
        _col("database_id", T.INT, False),
        _col("job_type", T.nvarchar(20), False),
        _col("job_id", T.UNIQUEIDENTIFIER),
        _col("maxtrans", T.INT),
        _col("maxscans", T.INT),
        _col("continuous", T.BIT),
        _col("pollinginterval", T.BIGINT),
        _col("retention", T.BIGINT),
        _col("threshold", T.BIGINT),
    ]
    rows = []
    for db in sorted(databases_of(server_of(session)), key=lambda d: d.database_id):
        state = cdc_state(db)
        if state is None:
            continue
        if state.capture_job is not None:
            job = state.capture_job
            rows.append(
                (
                    db.database_id,
                    "capture",
                    job.job_id,
                    job.maxtrans,
                    job.maxscans,
                    int(job.continuous),
                    job.pollinginterval,
                    0,
                    0,
                )
            )
        if state.cleanup_job is not None:
            job = state.cleanup_job
            rows.append((db.database_id, "cleanup", job.job_id, 0, 0, 0, 0, job.retention, job.threshold))
    if not rows and not any(cdc_state(db) is not None for db in databases_of(server_of(session))):
        # SQL Server creates the table with the first CDC job and drops it with the last one.
        raise errors.invalid_object_name("msdb.dbo.cdc_jobs")
    return Rowset(columns, rows)


def dm_cdc_log_scan_sessions(session: Any, database: Any) -> Rowset:
    """``sys.dm_cdc_log_scan_sessions`` of the current database (empty when CDC is not enabled)."""
    database = database_object(session, database)
    columns = [
        _col("session_id", T.INT, False),
        _col("start_time", T.DATETIME),
        _col("end_time", T.DATETIME),
        _col("duration", T.BIGINT),
        _col("scan_phase", T.nvarchar(200)),
        _col("error_count", T.INT),
        _col("start_lsn", T.nvarchar(23)),
        _col("current_lsn", T.nvarchar(23)),
        _col("end_lsn", T.nvarchar(23)),
        _col("tran_count", T.BIGINT),
        _col("last_commit_lsn", T.nvarchar(23)),
        _col("last_commit_time", T.DATETIME),
        _col("log_record_count", T.BIGINT),
        _col("schema_change_count", T.INT),
        _col("command_count", T.BIGINT),
        _col("first_begin_cdc_lsn", T.nvarchar(23)),
        _col("last_commit_cdc_lsn", T.nvarchar(23)),
        _col("last_commit_cdc_time", T.DATETIME),
        _col("latency", T.INT),
        _col("empty_scan_count", T.INT),
        _col("failed_sessions_count", T.INT),
    ]
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


STATIC_VIEWS = {
    "cdc.change_tables": change_tables,
    "cdc.captured_columns": captured_columns,
    "cdc.index_columns": index_columns,
    "cdc.ddl_history": ddl_history,
    "cdc.lsn_time_mapping": lsn_time_mapping,
    "msdb.dbo.cdc_jobs": cdc_jobs,
    "sys.dm_cdc_log_scan_sessions": dm_cdc_log_scan_sessions,
}
