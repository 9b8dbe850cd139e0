"""CDC state of one database and the capture scan that fills the change tables from the transaction log.

One :class:`CdcDatabase` per CDC-enabled database holds its capture instances, ``cdc.lsn_time_mapping``,
``cdc.ddl_history``, the capture and cleanup job settings (``msdb.dbo.cdc_jobs``) and the log scan
sessions (``sys.dm_cdc_log_scan_sessions``). :meth:`CdcDatabase.scan` is one scan cycle of the
capture job (``sp_cdc_scan``); :mod:`.capture_job` runs it on a background thread the way SQL
Server Agent runs the capture job.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlserver_cdc_simulator.cdc.capture_instance import (
    CaptureInstance,
    ChangeRowBuilder,
    RowChange,
)
from sqlserver_cdc_simulator.cdc.lsn import ZERO_LSN
from sqlserver_cdc_simulator.cdc.time_mapping import (
    QUIET_PERIOD_TRAN_ID,
    LsnTimeMapping,
    LsnTimeMappingRow,
)
from sqlserver_cdc_simulator.column_conversion import convert_column_value
from sqlserver_cdc_simulator.errors import SqlError
from sqlserver_cdc_simulator.values import (
    datetime_from_ticks,
    round_datetime_ticks,
)

MAX_SCAN_SESSIONS = 32
#: position of the first captured value in a :class:`~.change_table.ChangeTable` row
CHANGE_ROW_VALUES_AT = 4


def datetime_value(ticks: int) -> dt.datetime:
    """A server-local tick count as the ``datetime`` SQL Server stores (1/300 s grid)."""
    return datetime_from_ticks(round_datetime_ticks(ticks))


@dataclass
class CaptureJobSettings:
    """The capture job's row of ``msdb.dbo.cdc_jobs`` (SQL Server 2022 defaults)."""

    job_id: uuid.UUID = field(default_factory=uuid.uuid4)
    maxtrans: int = 500
    maxscans: int = 10
    continuous: bool = True
    pollinginterval: int = 5


@dataclass
class CleanupJobSettings:
    """The cleanup job's row of ``msdb.dbo.cdc_jobs`` (SQL Server 2022 defaults)."""

    job_id: uuid.UUID = field(default_factory=uuid.uuid4)
    retention: int = 4320
    threshold: int = 5000


@dataclass(frozen=True)
class DdlHistoryRow:
    """One row of ``cdc.ddl_history``."""

    source_object_id: int
    object_id: int
    required_column_update: bool
    ddl_command: str
    ddl_lsn: bytes
    ddl_time: dt.datetime


@dataclass
class ScanSession:
    """One row of ``sys.dm_cdc_log_scan_sessions``."""

    session_id: int
    start_time: dt.datetime
    end_time: dt.datetime | None = None
    scan_phase: str = "Done"
    error_count: int = 0
    start_lsn: bytes | None = None
    current_lsn: bytes | None = None
    end_lsn: bytes | None = None
    tran_count: int = 0
    last_commit_lsn: bytes | None = None
    last_commit_time: dt.datetime | None = None
    log_record_count: int = 0
    schema_change_count: int = 0
    command_count: int = 0
    first_begin_cdc_lsn: bytes | None = None
    last_commit_cdc_lsn: bytes | None = None
    last_commit_cdc_time: dt.datetime | None = None
    latency: int = 0
    empty_scan_count: int = 0
    failed_sessions_count: int = 0

    @property
    def duration(self) -> int:
        """Seconds the session took; 0 for sessions without CDC transactions (as SQL Server reports)."""
        if self.end_time is None or self.last_commit_cdc_lsn is None:
            return 0
        return int((self.end_time - self.start_time).total_seconds())


@dataclass(frozen=True)
class CaptureErrorRow:
    """One row of ``sys.dm_cdc_errors`` (change-data-capture-sys-dm-cdc-errors.md): a failed scan session's error.

    :param failure: the error, its phase, its transaction and the LSN being processed (the view's other columns).
    """

    session_id: int
    entry_time: dt.datetime
    failure: CaptureFailed


#: ``scan_phase`` 6 of sys.dm_cdc_log_scan_sessions: the capture process applies DDL to its metadata
SCHEMA_VERSIONING = 6


class CaptureFailed(SqlError):
    """A capture scan stopped at a transaction it cannot process; the scan is retried from that transaction.

    :param cause: the error the transaction raised.
    :param phase: the ``scan_phase`` number the scan was in.
    :param xact: the transaction (``begin_lsn``, ``commit_lsn``).
    :param lsn: the LSN of the log record being processed.
    """

    def __init__(self, cause: SqlError, phase: int, xact: Any, lsn: bytes | None) -> None:
        super().__init__(cause.number, cause.severity, cause.state, cause.message)
        self.phase = phase
        self.xact = xact
        self.lsn = lsn


class CdcDatabase:
    """
    CDC state and capture processing of one database.

    :param database: the engine's database object (``log``, ``table_by_id``, ``name``, ``database_id``).
    :param clock: the server clock (``local_ticks()``).
    :param commit_lock: the lock under which the engine assigns commit LSNs and appends to the log.
    :param engine: the engine, to notice when the database is dropped (optional).
    """

    def __init__(self, database: Any, clock: Any, commit_lock: Any = None, engine: Any = None) -> None:
        self.database = database
        self.engine = engine
        self.clock = clock
        self.commit_lock = commit_lock if commit_lock is not None else threading.RLock()
        self.instances: dict[str, CaptureInstance] = {}
        self.mapping = LsnTimeMapping()
        self.ddl_history: list[DdlHistoryRow] = []
        self.capture_job: CaptureJobSettings | None = None
        self.cleanup_job: CleanupJobSettings | None = None
        #: whether the capture job should run (SQL Server Agent job enabled): false after sp_cdc_stop_job.
        self.capture_running = False
        #: commit LSN of the last transaction the capture process has read.
        self.processed_lsn: bytes = ZERO_LSN
        self.sessions: list[ScanSession] = []
        #: ``sys.dm_cdc_errors``: the errors of the kept scan sessions
        self.errors: list[CaptureErrorRow] = []
        self._failed_sessions = 0
        #: undo steps of the transaction being captured (its DDL changed metadata before it failed)
        self._undo: list[Any] = []
        self._next_session_id = 1
        self._empty_scans = 0
        self._aggregate_start: dt.datetime | None = None
        self._builders: dict[str, ChangeRowBuilder] = {}
        #: set after a restart: starts the capture job at the first CDC access (see :mod:`.persistence`).
        self.pending_job_start: Any = None
        #: (lsn, mapping version, datetime ticks) of the last sys.fn_cdc_map_lsn_to_time call.
        self.lsn_time_cache: tuple[bytes, int, int | None] | None = None
        self.start_job_on_first_use = False
        self.lock = threading.RLock()

    # ------------------------------------------------------------------ instances

    def database_exists(self) -> bool:
        """Whether the database is still the engine's (false once dropped, or after a reset)."""
        if self.engine is None:
            return True
        return self.engine.databases.get(self.database.name.lower()) is self.database

    def now(self) -> dt.datetime:
        """Server local time as a ``datetime`` value."""
        return datetime_value(self.clock.local_ticks())

    def instance(self, name: str | None) -> CaptureInstance | None:
        """The capture instance called ``name`` (case-insensitive), if any."""
        if name is None:
            return None
        return self.instances.get(name.rstrip().lower())

    def instances_of(self, source_object_id: int) -> list[CaptureInstance]:
        """Capture instances of one source table, oldest first."""
        return [ci for ci in self.instances.values() if ci.source_object_id == source_object_id]

    def add_instance(self, instance: CaptureInstance) -> None:
        """Register a new capture instance."""
        with self.lock:
            self.instances[instance.name.lower()] = instance

    def drop_instance(self, instance: CaptureInstance) -> None:
        """Remove a capture instance with its change table and DDL history."""
        with self.lock:
            self.instances.pop(instance.name.lower(), None)
            self._builders.pop(instance.name.lower(), None)
            self.ddl_history = [row for row in self.ddl_history if row.object_id != instance.object_id]
            if not self.instances:
                # SQL Server empties cdc.lsn_time_mapping when the last tracked table is disabled.
                self.mapping.clear()

    # ------------------------------------------------------------------ capture

    def scan(self, max_transactions: int | None = None) -> ScanSession:
        """
        Run one log scan cycle: read committed transactions after the last one processed.

        Changes to tracked tables become change-table rows with the transaction's commit LSN,
        and a ``cdc.lsn_time_mapping`` row is written per transaction that produced any. A
        quiet-period row (``tran_id`` 0x00) then records how far the log was processed ("periods
        of low or no change activity"): after a scan that read transactions past its last mapping
        row (changes to untracked tables, DDL, ...), and after a scan that wrote no mapping row when
        the log or the server clock moved since the last one.

        :param max_transactions: stop after this many transactions (the job's ``maxtrans``).
        """
        with self.lock:
            started = self.now()
            if self._aggregate_start is None:
                self._aggregate_start = started
            session = ScanSession(
                session_id=self._next_session_id, start_time=started, start_lsn=self.processed_lsn
            )
            self._next_session_id += 1
            log = self.database.log
            wrote_mapping = False
            for xact in log.scan(after_lsn=self.processed_lsn):
                if max_transactions is not None and session.tran_count >= max_transactions:
                    break
                try:
                    processed = self._process(xact, session)
                except CaptureFailed as failure:
                    self._fail(session, failure)
                    raise
                if processed:
                    wrote_mapping = True
                self.processed_lsn = xact.commit_lsn
                session.tran_count += 1
                session.last_commit_lsn = xact.commit_lsn
                session.last_commit_time = datetime_value(xact.commit_time_ticks)
            last = self.mapping.last_row()
            if not wrote_mapping or (last is not None and self.processed_lsn > last.start_lsn):
                self._write_quiet_period_row(session)
            # As in SQL Server, the log can be truncated up to what the capture process has read.
            truncate = getattr(log, "truncate_before", None)
            if truncate is not None:
                truncate(self.processed_lsn)
            session.end_lsn = self.processed_lsn
            session.current_lsn = self.processed_lsn
            session.end_time = self.now()
            if session.last_commit_cdc_time is not None:
                session.latency = max(
                    0, int((session.end_time - session.last_commit_cdc_time).total_seconds())
                )
            self._empty_scans = 0 if session.last_commit_cdc_lsn is not None else self._empty_scans + 1
            session.empty_scan_count = self._empty_scans
            self.sessions.append(session)
            del self.sessions[:-MAX_SCAN_SESSIONS]
            return session

    def _fail(self, session: ScanSession, failure: CaptureFailed) -> None:
        """
        End ``session`` as failed at ``failure``'s transaction, and record the error in ``sys.dm_cdc_errors``.

        Nothing of the transaction was captured and ``processed_lsn`` stays before it, so every later
        scan stops there again (the capture job keeps failing) until the instance is disabled
        (known-issues-and-errors-change-data-capture.md: consume the change data, then disable and
        re-enable CDC on the table).
        """
        now = self.now()
        self._failed_sessions += 1
        session.error_count += 1
        session.scan_phase = "Schema versioning" if failure.phase == SCHEMA_VERSIONING else str(failure.phase)
        session.end_time = now
        session.end_lsn = session.current_lsn = self.processed_lsn
        session.failed_sessions_count = self._failed_sessions
        self.sessions.append(session)
        del self.sessions[:-MAX_SCAN_SESSIONS]
        self.errors.append(CaptureErrorRow(session.session_id, now, failure))
        kept = {s.session_id for s in self.sessions}
        self.errors = [e for e in self.errors if e.session_id in kept]

    def catch_up(self) -> list[ScanSession]:
        """Scan until every transaction committed so far is processed (the synchronous test helper)."""
        sessions = [self.scan()]
        target = self.database.log.last_lsn
        while self.processed_lsn < target and self._has_unprocessed():
            sessions.append(self.scan())
        return sessions

    def _has_unprocessed(self) -> bool:
        return next(iter(self.database.log.scan(after_lsn=self.processed_lsn)), None) is not None

    def _process(self, xact: Any, session: ScanSession) -> bool:
        """Capture one committed transaction; return whether it produced change rows."""
        rows: dict[str, list[tuple[Any, ...]]] = {}
        command_ids: dict[str, list[int]] = {}
        commit_lsn = xact.commit_lsn
        commit_time = datetime_value(xact.commit_time_ticks)
        self._undo = []
        for op in self._split_key_updates(xact.operations):
            session.log_record_count += 1
            if not hasattr(op, "kind") or op.kind not in ("insert", "update", "delete"):
                try:
                    self._process_ddl(op, commit_lsn, commit_time, session)
                except SqlError as error:
                    for undo in reversed(self._undo):
                        undo()
                    self._undo = []
                    self._builders.clear()
                    raise CaptureFailed(error, SCHEMA_VERSIONING, xact, getattr(op, "lsn", None)) from None
                continue
            for instance in self.instances_of(op.object_id):
                if op.lsn <= instance.enable_lsn:
                    continue
                key = instance.name.lower()
                builder = self._builders.get(key)
                if builder is None:
                    builder = self._builders[key] = ChangeRowBuilder(instance)
                new_rows = builder.rows(
                    RowChange(op.kind, op.lsn, op.columns, op.before, op.after), commit_lsn
                )
                instance_rows = rows.setdefault(key, [])
                ids = command_ids.setdefault(key, [])
                command_id = (ids[-1] + 1) if ids else 1
                instance_rows.extend(new_rows)
                ids.extend([command_id] * len(new_rows))
                session.command_count += 1
        if not rows:
            return False
        for key, instance_rows in rows.items():
            self.instances[key].change_table.append_transaction(instance_rows, command_ids[key])
        self.mapping.append(
            LsnTimeMappingRow(
                start_lsn=commit_lsn,
                tran_begin_time=datetime_value(getattr(xact, "begin_time_ticks", xact.commit_time_ticks)),
                tran_end_time=commit_time,
                tran_id=int(xact.xact_id).to_bytes(10, "big"),
                tran_begin_lsn=xact.begin_lsn,
            )
        )
        if session.first_begin_cdc_lsn is None:
            session.first_begin_cdc_lsn = xact.begin_lsn
        session.last_commit_cdc_lsn = commit_lsn
        session.last_commit_cdc_time = commit_time
        return True

    def _process_ddl(
        self, op: Any, commit_lsn: bytes, commit_time: dt.datetime, session: ScanSession
    ) -> None:
        if op.kind not in ("add_column", "drop_column", "alter_column"):
            return
        instances = self.instances_of(op.object_id)
        if not instances:
            return
        session.schema_change_count += 1
        for instance in instances:
            if op.lsn <= instance.enable_lsn:
                continue
            required_column_update = False
            if op.kind == "alter_column":
                types = getattr(op, "column_types", ())
                for name, new_type in zip(op.columns, types, strict=False):
                    required_column_update |= self._alter_captured_column(instance, name, new_type)
            kept = len(self.ddl_history)
            self._undo.append(lambda kept=kept: self._truncate_ddl_history(kept))
            self.ddl_history.append(
                DdlHistoryRow(
                    source_object_id=instance.source_object_id,
                    object_id=instance.object_id,
                    required_column_update=required_column_update,
                    ddl_command=op.statement,
                    ddl_lsn=commit_lsn,
                    ddl_time=commit_time,
                )
            )

    def _alter_captured_column(self, instance: CaptureInstance, name: str, new_type: Any) -> bool:
        """
        Give a captured column whose data type changed its new type in the change table.

        SQL Server propagates a captured column's type change to the change table (and to
        ``cdc.captured_columns``) so that capture loses no data; existing change rows are converted.
        Return whether the change table had to change (``required_column_update``).
        """
        i = next((i for i, c in enumerate(instance.captured_columns) if c.name.lower() == name.lower()), None)
        if i is None:
            return False
        column = instance.captured_columns[i]
        if column.is_computed or column.sql_type == new_type:
            return False
        old_type = column.sql_type
        change_table = f"{self.database.name}.cdc.{instance.change_table_name}"
        # the rows first: a stored value that does not fit fails the scan before anything changed
        rows_before = instance.change_table.convert_column(
            CHANGE_ROW_VALUES_AT + i,
            lambda value: convert_column_value(
                value, old_type, new_type, table=change_table, column=column.name
            ),
        )
        instance.captured_columns[i] = replace(column, sql_type=new_type)

        def undo() -> None:
            instance.change_table.restore_rows(rows_before)
            instance.captured_columns[i] = column
            self._set_change_table_type(instance, column.name, column.sql_type)

        self._undo.append(undo)
        self._builders.pop(instance.name.lower(), None)
        self._set_change_table_type(instance, column.name, new_type)
        return True

    def _set_change_table_type(self, instance: CaptureInstance, column: str, sql_type: Any) -> None:
        """Give the change table's column ``column`` the type ``sql_type`` (as ``sys.columns`` shows it)."""
        table = self.database.schema("cdc").tables.get(instance.change_table_name.lower())
        if table is None:
            return
        position = table.column_index(column)
        if position is not None and table.columns[position].type != sql_type:
            table.columns[position] = replace(table.columns[position], type=sql_type)
            table.schema_version += 1

    def _truncate_ddl_history(self, length: int) -> None:
        """Forget the ``cdc.ddl_history`` rows after the first ``length`` (their transaction failed)."""
        del self.ddl_history[length:]

    def _split_key_updates(self, operations: Iterable[Any]) -> Iterable[Any]:
        """
        Yield the operations with primary-key-changing updates turned into delete + insert.

        SQL Server logs an UPDATE that changes a primary-key column as a delete of the old row
        and an insert of the new one, and CDC captures operations 1 and 2 instead of 3 and 4.
        Within one statement all deletes come before all inserts, so a statement such as
        ``SET id = id + 1`` never makes two rows share a key. Consecutive key-changing updates
        of one table belong to one statement until a physical row (``rowid``) repeats, which a
        single statement cannot do.
        """
        deletes: list[Any] = []
        inserts: list[Any] = []
        group_table: int | None = None
        group_rows: set[int] = set()

        def flush() -> Iterable[Any]:
            yield from deletes
            yield from inserts
            deletes.clear()
            inserts.clear()
            group_rows.clear()

        for op in operations:
            if not self._changes_primary_key(op):
                yield from flush()
                yield op
                continue
            rowid = getattr(op, "rowid", 0)
            if op.object_id != group_table or not rowid or rowid in group_rows:
                yield from flush()
            group_table = op.object_id
            if rowid:
                group_rows.add(rowid)
            deletes.append(_RowOp(op.lsn, op.object_id, "delete", op.columns, op.before, None))
            inserts.append(_RowOp(op.lsn, op.object_id, "insert", op.columns, None, op.after))
        yield from flush()

    def _changes_primary_key(self, op: Any) -> bool:
        if getattr(op, "kind", None) != "update" or not self.instances_of(op.object_id):
            return False
        table = self.database.table_by_id(op.object_id)
        primary_key = table.primary_key if table is not None else None
        if primary_key is None:
            return False
        positions = {name.lower(): i for i, name in enumerate(op.columns)}
        for column in primary_key.columns:
            i = positions.get(column.lower())
            if i is not None and op.before[i] != op.after[i]:
                return True
        return False

    def _write_quiet_period_row(self, session: ScanSession) -> None:
        if not self.instances:
            return
        last = self.mapping.last_row()
        now = self.now()
        log = self.database.log
        log_moved = last is None or log.last_lsn > last.start_lsn
        clock_moved = last is None or now > last.tran_end_time
        if not (log_moved or clock_moved):
            return
        # The row claims "processed up to this LSN": allocate it while no commit can be in flight,
        # and only if every transaction committed so far has been read.
        # Never wait for the commit lock while holding this state's lock (a checkpoint holds the
        # commit lock and then reads this state): without it now, the next scan writes the row.
        if not self.commit_lock.acquire(blocking=False):
            return
        try:
            if next(iter(log.scan(after_lsn=self.processed_lsn)), None) is not None:
                return
            lsn = log.allocate_lsn()
        finally:
            self.commit_lock.release()
        self.mapping.append(
            LsnTimeMappingRow(
                start_lsn=lsn,
                tran_begin_time=now,
                tran_end_time=now,
                tran_id=QUIET_PERIOD_TRAN_ID,
                tran_begin_lsn=ZERO_LSN,
            )
        )
        if lsn > self.processed_lsn:
            self.processed_lsn = lsn

    # ------------------------------------------------------------------ cleanup

    def cleanup(
        self, instance: CaptureInstance, low_water_mark: bytes | None, threshold: int | None = None
    ) -> int:
        """
        ``sys.sp_cdc_cleanup_change_table``: move the instance's low-water mark up and delete older rows.

        :param low_water_mark: a ``start_lsn`` of ``cdc.lsn_time_mapping`` (already validated), or
            None to keep the current low-water mark and only delete rows below it.
        :returns: the number of change rows deleted.
        """
        with self.lock:
            if low_water_mark is not None:
                adjusted = self.mapping.smallest_lsn_with_time_of(low_water_mark)
                if instance.start_lsn is None or adjusted > instance.start_lsn:
                    instance.start_lsn = adjusted
            deleted = 0
            if instance.start_lsn is not None:
                deleted = instance.change_table.delete_below(instance.start_lsn)
            self._trim_mapping()
            return deleted

    def retention_cleanup(self) -> int:
        """The cleanup job: move every instance's low-water mark to satisfy ``retention``; delete old rows."""
        with self.lock:
            if self.cleanup_job is None:
                return 0
            low_water_mark = self.mapping.retention_low_water_mark(self.cleanup_job.retention)
            deleted = 0
            for instance in list(self.instances.values()):
                if low_water_mark is not None and (
                    instance.start_lsn is None or instance.start_lsn < low_water_mark
                ):
                    instance.start_lsn = low_water_mark
                if instance.start_lsn is not None:
                    deleted += instance.change_table.delete_below(instance.start_lsn)
            self._trim_mapping()
            return deleted

    def _trim_mapping(self) -> None:
        # Mapping rows below every instance's low-water mark are no longer needed.
        floors = [ci.start_lsn for ci in self.instances.values()]
        if floors and all(f is not None for f in floors):
            self.mapping.delete_below(min(floors))  # type: ignore[type-var]

    # ------------------------------------------------------------------ sessions view

    def job_rows(self) -> list[tuple[Any, ...]]:
        """The CDC jobs' settings as ``sp_cdc_help_jobs`` and ``msdb.dbo.cdc_jobs`` list them.

        One row per job: (job_id, job_type, maxtrans, maxscans, continuous, pollinginterval,
        retention, threshold); the capture job first, then the cleanup job.
        """
        rows: list[tuple[Any, ...]] = []
        job = self.capture_job
        if job is not None:
            rows.append(
                (
                    job.job_id,
                    "capture",
                    job.maxtrans,
                    job.maxscans,
                    int(job.continuous),
                    job.pollinginterval,
                    0,
                    0,
                )
            )
        cleanup = self.cleanup_job
        if cleanup is not None:
            rows.append((cleanup.job_id, "cleanup", 0, 0, 0, 0, cleanup.retention, cleanup.threshold))
        return rows

    def session_rows(self) -> list[ScanSession]:
        """``sys.dm_cdc_log_scan_sessions``: the aggregate row (session 0) then the kept sessions."""
        with self.lock:
            sessions = list(self.sessions)
        aggregate = ScanSession(
            session_id=0, start_time=self._aggregate_start or self.now(), scan_phase="Aggregate"
        )
        if sessions:
            last = sessions[-1]
            aggregate.end_time = last.end_time
            aggregate.start_lsn = last.start_lsn
            aggregate.end_lsn = last.end_lsn
            aggregate.current_lsn = ZERO_LSN
            aggregate.error_count = sum(s.error_count for s in sessions)
            aggregate.tran_count = sum(s.tran_count for s in sessions)
            aggregate.log_record_count = sum(s.log_record_count for s in sessions)
            aggregate.schema_change_count = sum(s.schema_change_count for s in sessions)
            aggregate.command_count = sum(s.command_count for s in sessions)
            with_cdc = [s for s in sessions if s.last_commit_cdc_lsn is not None]
            with_commits = [s for s in sessions if s.last_commit_lsn is not None]
            if with_commits:
                aggregate.last_commit_lsn = with_commits[-1].last_commit_lsn
                aggregate.last_commit_time = with_commits[-1].last_commit_time
            if with_cdc:
                aggregate.first_begin_cdc_lsn = with_cdc[0].first_begin_cdc_lsn
                aggregate.last_commit_cdc_lsn = with_cdc[-1].last_commit_cdc_lsn
                aggregate.last_commit_cdc_time = with_cdc[-1].last_commit_cdc_time
                aggregate.latency = next((s.latency for s in reversed(with_cdc) if s.latency), 0)
            aggregate.empty_scan_count = self._empty_scans
            aggregate.failed_sessions_count = self._failed_sessions
        return [aggregate, *sessions]


@dataclass(frozen=True, slots=True)
class _RowOp:
    """A row operation synthesised from a primary-key-changing update."""

    lsn: bytes
    object_id: int
    kind: str
    columns: tuple[str, ...]
    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None
