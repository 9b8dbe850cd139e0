"""CDC system stored procedures (``sys.sp_cdc_*``) and the DDL rules CDC imposes on tracked tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlserver_cdc_simulator import types as T
from sqlserver_cdc_simulator.cdc import errors
from sqlserver_cdc_simulator.cdc.capture_instance import (
    RESERVED_COLUMN_NAMES,
    CapturedColumn,
    CaptureInstance,
    IndexColumn,
    parse_column_list,
)
from sqlserver_cdc_simulator.cdc.capture_job import CaptureJob
from sqlserver_cdc_simulator.cdc.catalog import instance_settings
from sqlserver_cdc_simulator.cdc.change_table_object import (
    attach_change_table,
    detach_change_table,
)
from sqlserver_cdc_simulator.cdc.database_state import (
    CaptureJobSettings,
    CdcDatabase,
    CleanupJobSettings,
)
from sqlserver_cdc_simulator.cdc.functions import (
    can_read_change_data,
    datetime_ticks,
)
from sqlserver_cdc_simulator.cdc.lsn import coerce_lsn, lsn_to_hex
from sqlserver_cdc_simulator.cdc.session_access import (
    capture_job_of,
    cdc_state,
    clock_of,
    commit_lock_of,
    current_database,
    drop_cdc_schema,
    ensure_cdc_schema,
    ensure_role,
    has_foreign_cdc_schema,
    is_db_owner,
    is_sysadmin,
    server_of,
    set_capture_job,
    set_cdc_state,
    set_tracked,
)
from sqlserver_cdc_simulator.errors import SqlError
from sqlserver_cdc_simulator.extensions import (
    DdlEvent,
    ProcedureArgs,
    ProcedureResult,
    Rowset,
    result_columns,
)

MAX_RETENTION = 52_594_800


def _missing_parameter(procedure: str, parameter: str) -> SqlError:
    return SqlError(
        201,
        16,
        4,
        f"Procedure or function '{procedure}' expects parameter '{parameter}', which was not supplied.",
    )


def _text(args: ProcedureArgs, name: str, position: int) -> str | None:
    value = args.get(name, position)
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _int(args: ProcedureArgs, name: str, position: int) -> int | None:
    value = args.get(name, position)
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "big")
    return int(value)


def _require_db_owner(session: Any, database: Any) -> None:
    if not is_db_owner(session, database):
        raise errors.dbo_required()


def _require_state(database: Any) -> CdcDatabase:
    state = cdc_state(database)
    if state is None:
        raise errors.database_not_enabled(database.name)
    return state


def _table_request(session: Any, args: ProcedureArgs) -> tuple[Any, CdcDatabase, str | None, str | None]:
    """The checks and first arguments of ``sp_cdc_enable_table`` / ``sp_cdc_disable_table``.

    :return: (database, its CDC state, @source_schema, @source_name); the caller must be db_owner.
    """
    database = current_database(session)
    _require_db_owner(session, database)
    return database, _require_state(database), _text(args, "source_schema", 0), _text(args, "source_name", 1)


def _job_request(session: Any, args: ProcedureArgs) -> tuple[Any, CdcDatabase, str]:
    """Check a start/stop job call; return its database, CDC state and ``capture``/``cleanup`` job type."""
    database = current_database(session)
    _require_db_owner(session, database)
    state = _require_state(database)
    job_type = (_text(args, "job_type", 0) or "capture").strip().lower()
    if job_type not in ("capture", "cleanup"):
        raise errors.job_type_unsupported(job_type)
    return database, state, job_type


def _job_settings(state: CdcDatabase, job_type: str) -> Any:
    """The settings of the database's ``capture`` or ``cleanup`` job; error 22997 if it has none.

    :param job_type: ``capture`` or ``cleanup``.
    """
    job = state.capture_job if job_type == "capture" else state.cleanup_job
    if job is None:
        raise errors.job_missing(job_type)
    return job


# the columns that name a capture instance, first in the result of each CDC help procedure
_INSTANCE_COLUMNS = result_columns("source_schema sysname, source_table sysname, capture_instance sysname")


def _readable_instance(session: Any, database: Any, state: CdcDatabase, name: str | None) -> CaptureInstance:
    """Return capture instance ``name``, or raise the missing-or-denied error if it is absent or unreadable."""
    instance = state.instance(name)
    if instance is None or not can_read_change_data(session, database, instance):
        raise errors.object_missing_or_denied()
    return instance


def _cleanup_request(session: Any) -> tuple[Any, CdcDatabase]:
    """Check a cleanup call (db_owner, CDC enabled); return its database and CDC state."""
    database = current_database(session)
    _require_db_owner(session, database)
    state = cdc_state(database)
    if state is None:
        raise errors.cleanup_database_not_enabled(database.name)
    return database, state


class CdcProcedures:
    """
    The CDC procedures of one server.

    :param on_job_created: called with every capture job created (so a server reset can stop them).
    """

    def __init__(self, on_job_created: Callable[[CaptureJob], None] | None = None) -> None:
        self._on_job_created = on_job_created or (lambda job: None)

    def procedures(self) -> dict[str, Callable[[Any, ProcedureArgs], ProcedureResult | None]]:
        """Procedure name -> implementation."""
        return {
            "sys.sp_cdc_enable_db": self.enable_db,
            "sys.sp_cdc_disable_db": self.disable_db,
            "sys.sp_cdc_enable_table": self.enable_table,
            "sys.sp_cdc_disable_table": self.disable_table,
            "sys.sp_cdc_help_change_data_capture": self.help_change_data_capture,
            "sys.sp_cdc_get_captured_columns": self.get_captured_columns,
            "sys.sp_cdc_get_ddl_history": self.get_ddl_history,
            "sys.sp_cdc_change_job": self.change_job,
            "sys.sp_cdc_start_job": self.start_job,
            "sys.sp_cdc_stop_job": self.stop_job,
            "sys.sp_cdc_help_jobs": self.help_jobs,
            "sys.sp_cdc_scan": self.scan,
            "sys.sp_cdc_cleanup_change_table": self.cleanup_change_table,
            "sys.sp_mscdc_cleanup_job": self.cleanup_job,
        }

    # ------------------------------------------------------------------ database

    def enable_db(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_enable_db``: requires sysadmin; creates the ``cdc`` schema and its objects."""
        database = current_database(session)
        if not is_sysadmin(session):
            raise errors.not_authorized("sysadmin")
        if database.name.lower() in ("master", "tempdb", "model", "msdb"):
            raise SqlError(
                22989,
                16,
                1,
                f"Could not enable Change Data Capture for database '{database.name}'. Change data capture is not "
                "supported on system databases, or on a distribution database.",
            )
        if cdc_state(database) is not None:
            message = errors.database_already_enabled(database.name)
            return ProcedureResult(messages=[message.message])
        if has_foreign_cdc_schema(database):
            raise errors.cdc_schema_exists(database.name)
        ensure_cdc_schema(database)
        engine = server_of(session)
        set_cdc_state(database, CdcDatabase(database, clock_of(session), commit_lock_of(engine), engine))
        return ProcedureResult()

    def disable_db(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_disable_db``: drops every capture instance, the jobs and the ``cdc`` schema."""
        database = current_database(session)
        if not is_sysadmin(session):
            raise errors.not_authorized("sysadmin")
        state = cdc_state(database)
        if state is None:
            # SQL Server 2022 raises 22901 with severity 10 here: a message, and the call succeeds.
            return ProcedureResult(messages=[errors.database_not_enabled(database.name).message])
        self._stop_job(database)
        for instance in list(state.instances.values()):
            self._drop_instance(database, state, instance)
        set_capture_job(database, None)
        set_cdc_state(database, None)
        drop_cdc_schema(database)
        return ProcedureResult()

    # ------------------------------------------------------------------ tables

    def enable_table(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_enable_table``."""
        database, state, source_schema, source_name = _table_request(session, args)
        # SQL Server 2022's parameter order: @source_schema, @source_name, @capture_instance,
        # @supports_net_changes, @role_name, @index_name, @captured_column_list, @filegroup_name, ...
        if not args.has("role_name") and len(args.positional) < 5:
            raise _missing_parameter("sp_cdc_enable_table", "@role_name")
        capture_name = _text(args, "capture_instance", 2)
        supports_net = args.get("supports_net_changes", 3)
        role_name = _text(args, "role_name", 4)
        index_name = _text(args, "index_name", 5)
        column_list = _text(args, "captured_column_list", 6)
        filegroup = _text(args, "filegroup_name", 7)
        for parameter, value in (("@source_schema", source_schema), ("@source_name", source_name)):
            if value is None or not value.strip():
                raise errors.parameter_null_or_empty(parameter)
        if role_name is not None:
            role_name = role_name.rstrip()
            if not role_name:
                raise errors.role_name_empty()
        if source_schema.lower() == "cdc":  # type: ignore[union-attr]
            raise errors.cdc_schema_table()
        table = database.table(source_schema, source_name)
        if table is None:
            raise errors.source_table_missing(schema=source_schema, table=source_name)
        schema_name, table_name = table.schema.name, table.name
        capture_name = (capture_name if capture_name is not None else f"{schema_name}_{table_name}").rstrip()
        if len(capture_name) > 100:
            raise errors.capture_instance_too_long(capture_name)
        if not capture_name:
            raise errors.parameter_null_or_empty("@capture_instance")
        with state.lock:
            if state.instance(capture_name) is not None:
                raise errors.capture_instance_exists(capture_name)
            if len(state.instances_of(table.object_id)) >= 2:
                raise errors.two_capture_instances(schema=schema_name, table=table_name)

            # The row-identifying index: @index_name, else the primary key.
            index = None
            if index_name is not None:
                index = next((ix for ix in table.indexes if ix.name.lower() == index_name.lower()), None)
                if index is None:
                    raise errors.index_not_found(index=index_name, schema=schema_name, table=table_name)
                if not index.unique:
                    raise errors.index_not_unique(index=index_name, schema=schema_name, table=table_name)
            else:
                index = table.primary_key
            supports_net_changes = index is not None if supports_net is None else bool(int(supports_net))
            if supports_net_changes and index is None:
                raise errors.net_changes_need_unique_index()

            columns = [c for c in table.columns]
            if column_list is not None:
                try:
                    names = parse_column_list(column_list)
                except ValueError:
                    raise SqlError(
                        22965,
                        16,
                        1,
                        "A quoted column in the column list is not properly terminated. Verify that columns are "
                        "correctly delimited and retry the operation. For more information, see 'Delimited "
                        "Identifiers' in Books Online.",
                    ) from None
                by_name = {c.name.lower(): c for c in table.columns}
                chosen = []
                for name in names:
                    if name.lower() in RESERVED_COLUMN_NAMES:
                        raise errors.captured_columns_unmapped(schema=schema_name, table=table_name)
                    column = by_name.get(name.lower())
                    if column is None:
                        raise errors.column_not_found(column=name, schema=schema_name, table=table_name)
                    chosen.append(column)
                chosen_names = {c.name.lower() for c in chosen}
                columns = [c for c in table.columns if c.name.lower() in chosen_names]
            elif any(c.name.lower() in RESERVED_COLUMN_NAMES for c in table.columns):
                raise errors.reserved_column_names(f"{schema_name}.{table_name}")
            if index is not None:
                captured_names = {c.name.lower() for c in columns}
                if any(name.lower() not in captured_names for name in index.columns):
                    raise errors.index_columns_not_captured()

            if role_name is not None:
                ensure_role(database, role_name)
            captured = [
                CapturedColumn(
                    name=c.name,
                    column_id=c.column_id,
                    sql_type=T.binary(8) if c.type.name == "timestamp" else c.type,
                    ordinal=i,
                    is_computed=bool(getattr(c, "computed", False)),
                    source_type_name="timestamp" if c.type.name == "timestamp" else None,
                )
                for i, c in enumerate(columns, start=1)
            ]
            by_name = {c.name.lower(): c for c in table.columns}
            index_columns = (
                [
                    IndexColumn(by_name[n.lower()].name, i, by_name[n.lower()].column_id)
                    for i, n in enumerate(index.columns, 1)
                ]
                if index is not None
                else []
            )
            enable_lsn = database.log.allocate_lsn()
            instance = CaptureInstance(
                name=capture_name,
                source_schema=schema_name,
                source_table=table_name,
                source_object_id=table.object_id,
                object_id=database.new_object_id(),
                captured_columns=captured,
                index_name=index.name if index is not None else None,
                index_columns=index_columns,
                supports_net_changes=supports_net_changes,
                role_name=role_name,
                create_date=state.now(),
                enable_lsn=enable_lsn,
                start_lsn=enable_lsn,
                filegroup_name=filegroup,
            )
            state.add_instance(instance)
            set_tracked(table, True)
            attach_change_table(database, instance, clock_of(session).local_ticks())
            messages = []
            if state.capture_job is None:
                state.capture_job = CaptureJobSettings()
                state.cleanup_job = CleanupJobSettings()
                job = CaptureJob(state)
                set_capture_job(database, job)
                self._on_job_created(job)
                job.start()
                messages.append(f"Job 'cdc.{database.name}_capture' started successfully.")
        return ProcedureResult(messages=messages)

    def disable_table(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_disable_table`` (``@capture_instance = 'all'`` drops every instance of the table)."""
        database, state, source_schema, source_name = _table_request(session, args)
        capture_name = _text(args, "capture_instance", 2)
        for parameter, value in (("@source_schema", source_schema), ("@source_name", source_name)):
            if value is None or not value.strip():
                raise errors.parameter_null_or_empty(parameter)
        table = database.table(source_schema, source_name)
        if table is None:
            raise errors.source_table_missing(schema=source_schema, table=source_name)
        with state.lock:
            instances = state.instances_of(table.object_id)
            if not instances:
                raise errors.table_not_enabled(schema=table.schema.name, table=table.name)
            if capture_name is None or not capture_name.strip():
                raise errors.parameter_null_or_empty("@capture_instance")
            if capture_name.strip().lower() != "all":
                chosen = state.instance(capture_name)
                if chosen is None or chosen.source_object_id != table.object_id:
                    raise errors.instance_not_enabled_for_table(
                        name=capture_name, schema=table.schema.name, table=table.name
                    )
                instances = [chosen]
            for instance in instances:
                self._drop_instance(database, state, instance)
        return ProcedureResult()

    def _drop_instance(self, database: Any, state: CdcDatabase, instance: CaptureInstance) -> None:
        state.drop_instance(instance)
        detach_change_table(database, instance)
        if not state.instances_of(instance.source_object_id):
            table = database.table_by_id(instance.source_object_id)
            if table is not None:
                set_tracked(table, False)

    # ------------------------------------------------------------------ metadata

    def help_change_data_capture(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_help_change_data_capture``: one row per readable capture instance."""
        database = current_database(session)
        state = _require_state(database)
        source_schema = _text(args, "source_schema", 0)
        source_name = _text(args, "source_name", 1)
        schema_given = bool(source_schema and source_schema.strip())
        name_given = bool(source_name and source_name.strip())
        if schema_given != name_given:
            raise errors.help_arguments_mismatch()
        instances = sorted(
            state.instances.values(), key=lambda ci: (ci.source_schema, ci.source_table, ci.object_id)
        )
        if schema_given:
            table = database.table(source_schema, source_name)
            if table is None:
                raise errors.source_table_missing(schema=source_schema, table=source_name)
            instances = [ci for ci in instances if ci.source_object_id == table.object_id]
        columns = _INSTANCE_COLUMNS + result_columns(
            """
            object_id int, source_object_id int, start_lsn binary(10), end_lsn binary(10),
            supports_net_changes bit, has_drop_pending bit, role_name sysname, index_name sysname,
            filegroup_name sysname, create_date datetime, index_column_list nvarchar(max),
            captured_column_list nvarchar(max)
            """
        )
        rows = []
        for ci in instances:
            if not can_read_change_data(session, database, ci):
                continue
            index_list = ", ".join(
                f"[{ic.name}]" for ic in sorted(ci.index_columns, key=lambda ic: ic.index_ordinal)
            )
            captured_list = ", ".join(f"[{c.name}]" for c in ci.captured_columns)
            rows.append(
                (
                    ci.source_schema,
                    ci.source_table,
                    ci.name,
                    ci.object_id,
                    ci.source_object_id,
                    *instance_settings(ci),
                    index_list or None,
                    captured_list,
                )
            )
        return ProcedureResult(result_sets=[Rowset(columns, rows)])

    def get_captured_columns(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_get_captured_columns``."""
        database = current_database(session)
        state = _require_state(database)
        name = _text(args, "capture_instance", 0)
        if name is None or not name.strip():
            raise errors.parameter_null_or_empty("@capture_instance")
        instance = _readable_instance(session, database, state, name)
        columns = _INSTANCE_COLUMNS + result_columns(
            """
            column_name sysname, column_id int, column_ordinal int, data_type sysname,
            character_maximum_length int, numeric_precision tinyint, numeric_precision_radix smallint,
            numeric_scale int, datetime_precision smallint
            """
        )
        rows = [
            (
                instance.source_schema,
                instance.source_table,
                instance.name,
                c.name,
                c.column_id,
                c.ordinal,
                c.column_type,
                *_information_schema_numbers(c.sql_type),
            )
            for c in instance.captured_columns
        ]
        return ProcedureResult(result_sets=[Rowset(columns, rows)])

    def get_ddl_history(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_get_ddl_history``."""
        database = current_database(session)
        state = _require_state(database)
        name = _text(args, "capture_instance", 0)
        instance = _readable_instance(session, database, state, name)
        columns = _INSTANCE_COLUMNS + result_columns(
            """
            required_column_update bit, ddl_command nvarchar(max), ddl_lsn binary(10), ddl_time datetime
            """
        )
        rows = [
            (
                instance.source_schema,
                instance.source_table,
                instance.name,
                int(row.required_column_update),
                row.ddl_command,
                row.ddl_lsn,
                datetime_ticks(row.ddl_time),
            )
            for row in state.ddl_history
            if row.object_id == instance.object_id
        ]
        return ProcedureResult(result_sets=[Rowset(columns, rows)])

    # ------------------------------------------------------------------ jobs

    def change_job(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_change_job``; new settings apply when the job is next started."""
        database = current_database(session)
        _require_db_owner(session, database)
        state = _require_state(database)
        job_type = (_text(args, "job_type", 0) or "capture").strip().lower()
        maxtrans = _int(args, "maxtrans", 1)
        maxscans = _int(args, "maxscans", 2)
        continuous = _int(args, "continuous", 3)
        pollinginterval = _int(args, "pollinginterval", 4)
        retention = _int(args, "retention", 5)
        threshold = _int(args, "threshold", 6)
        if job_type not in ("capture", "cleanup"):
            raise errors.job_type_unsupported(job_type)
        with state.lock:
            if job_type == "capture":
                job = _job_settings(state, "capture")
                if retention is not None:
                    raise errors.retention_for_capture_job()
                if maxtrans is not None and maxtrans <= 0:
                    raise errors.maxtrans_not_positive()
                if maxscans is not None and maxscans <= 0:
                    raise errors.maxscans_not_positive()
                if continuous is not None and continuous not in (0, 1):
                    raise errors.continuous_not_bit()
                if pollinginterval is not None and not 0 <= pollinginterval <= 86399:
                    raise errors.polling_interval_out_of_range()
                if maxtrans is not None:
                    job.maxtrans = maxtrans
                if maxscans is not None:
                    job.maxscans = maxscans
                if continuous is not None:
                    job.continuous = bool(continuous)
                    if not continuous:
                        job.pollinginterval = 0
                if pollinginterval is not None and job.continuous:
                    job.pollinginterval = pollinginterval
                    if continuous is None and pollinginterval > 0:
                        job.continuous = True
            else:
                cleanup = _job_settings(state, "cleanup")
                if any(v is not None for v in (maxtrans, maxscans, continuous, pollinginterval)):
                    raise errors.capture_options_for_cleanup_job()
                if retention is not None and not 0 < retention <= MAX_RETENTION:
                    raise errors.retention_out_of_range()
                if threshold is not None and threshold <= 0:
                    raise errors.threshold_not_positive()
                if retention is not None:
                    cleanup.retention = retention
                if threshold is not None:
                    cleanup.threshold = threshold
        return ProcedureResult()

    def start_job(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_start_job``: start the capture job (Agent back up); ``cleanup`` runs one cleanup."""
        database, state, job_type = _job_request(session, args)
        _job_settings(state, job_type)
        if job_type == "cleanup":
            state.retention_cleanup()
            return ProcedureResult()
        job = capture_job_of(database)
        if job is None:
            job = CaptureJob(state)
            set_capture_job(database, job)
            self._on_job_created(job)
        job.start()
        return ProcedureResult()

    def stop_job(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_stop_job``: stop the capture job (SQL Server Agent being down)."""
        database, state, job_type = _job_request(session, args)
        if job_type == "capture":
            _job_settings(state, "capture")
            self._stop_job(database)
        return ProcedureResult()

    def _stop_job(self, database: Any) -> None:
        job = capture_job_of(database)
        if job is not None:
            job.stop(disable=True)

    def help_jobs(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_help_jobs``."""
        database = current_database(session)
        state = _require_state(database)
        columns = result_columns(
            """
            job_id uniqueidentifier, job_type nvarchar(20), job_name sysname, maxtrans int, maxscans int,
            continuous bit, pollinginterval bigint, retention bigint, threshold bigint
            """
        )
        rows = [
            (job_id, job_type, f"cdc.{database.name}_{job_type}", *settings)
            for job_id, job_type, *settings in state.job_rows()
        ]
        return ProcedureResult(result_sets=[Rowset(columns, rows)])

    def scan(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_scan``: run capture scans synchronously in this session (``@continuous = 0``)."""
        database = current_database(session)
        _require_db_owner(session, database)
        state = _require_state(database)
        maxtrans = _int(args, "maxtrans", 0) or 500
        maxscans = _int(args, "maxscans", 1) or 10
        continuous = _int(args, "continuous", 2) or 0
        pollinginterval = _int(args, "pollinginterval", 3) or 0
        if maxtrans <= 0:
            raise errors.maxtrans_not_positive()
        if maxscans <= 0:
            raise errors.maxscans_not_positive()
        if continuous:
            raise SqlError(
                40517,
                16,
                1,
                "The SQL Server simulator does not support sys.sp_cdc_scan with @continuous = 1; "
                "use sys.sp_cdc_start_job to run the capture job continuously.",
            )
        if pollinginterval:
            raise SqlError(
                22999,
                16,
                1,
                "The value specified for the parameter @pollinginterval must be null or 0 when the stored procedure "
                "'sys.sp_cdc_scan' is not being run in continuous mode.",
            )
        for _ in range(maxscans):
            session_row = state.scan(max_transactions=maxtrans)
            if session_row.tran_count < maxtrans:
                break
        return ProcedureResult()

    def cleanup_change_table(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_cdc_cleanup_change_table`` (checks in SQL Server 2022's order)."""
        database, state = _cleanup_request(session)
        if not args.has("low_water_mark") and len(args.positional) < 2:
            raise _missing_parameter("sp_cdc_cleanup_change_table", "@low_water_mark")
        name = _text(args, "capture_instance", 0)
        raw = args.get("low_water_mark", 1)
        threshold = _int(args, "threshold", 2)
        if threshold is not None and threshold <= 0:
            raise errors.threshold_not_positive()
        low_water_mark = None if raw is None else coerce_lsn(bytes(raw))
        with state.lock:
            if low_water_mark is not None and not state.mapping.contains(low_water_mark):
                raise errors.low_water_mark_not_in_mapping((lsn_to_hex(low_water_mark) or "").upper())
            instance = state.instance(name)
            if instance is None:
                message = f"The named capture instance {name} does not exist for database {database.name}."
                raise SqlError(22920, 16, 1, message)
            state.cleanup(instance, low_water_mark, threshold)
        return ProcedureResult()

    def cleanup_job(self, session: Any, args: ProcedureArgs) -> ProcedureResult:
        """``sys.sp_MScdc_cleanup_job``: the cleanup job's step (retention-based cleanup of every instance)."""
        _database, state = _cleanup_request(session)
        _job_settings(state, "cleanup")
        state.retention_cleanup()
        return ProcedureResult()


def _information_schema_numbers(
    sql_type: T.SqlType,
) -> tuple[int | None, int | None, int | None, int | None, int | None]:
    """(character_maximum_length, numeric_precision, numeric_precision_radix, numeric_scale, datetime_precision)."""
    name = sql_type.name
    if name in ("char", "varchar", "binary", "varbinary", "nchar", "nvarchar"):
        return (-1 if sql_type.length == T.MAX else sql_type.length, None, None, None, None)
    if name in ("tinyint", "smallint", "int", "bigint"):
        return (None, sql_type.catalog_precision, 10, 0, None)
    if name in ("decimal", "numeric", "money", "smallmoney"):
        return (None, sql_type.catalog_precision, 10, sql_type.catalog_scale, None)
    if name in ("real", "float"):
        return (None, sql_type.catalog_precision, 2, None, None)
    if name in ("datetime", "smalldatetime"):
        return (None, None, None, None, 3 if name == "datetime" else 0)
    if name in ("datetime2", "time", "datetimeoffset"):
        return (None, None, None, None, sql_type.scale)
    if name == "date":
        return (None, None, None, None, 0)
    return (None, None, None, None, None)


def ddl_hook(session: Any, event: DdlEvent) -> None:
    """Veto TRUNCATE TABLE on tracked tables (4711); drop the capture instances of a dropped table."""
    database = current_database(session)
    if getattr(event, "database", None) and event.database.lower() != database.name.lower():
        server_databases = getattr(getattr(session, "server", None), "databases", {})
        database = server_databases.get(event.database.lower(), database)
    state = cdc_state(database)
    if state is None:
        return
    instances = state.instances_of(event.object_id)
    if not instances:
        return
    if event.phase == "before" and event.kind == "truncate_table":
        raise errors.truncate_blocked(event.table)
    if event.phase == "after" and event.kind == "drop_table":
        with state.lock:
            for instance in instances:
                state.drop_instance(instance)
                detach_change_table(database, instance)
