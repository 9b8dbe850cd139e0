"""What the continuous apply application publishes on the staging storage, and what a waiting task concludes from it.

Two small JSON files under ``{staging}/_continuous_apply/``, one format for the job (writer) and the
Airflow task (reader); standard library only:

- ``lock.json``: the application holding the staging path (id, host, pid, start) and its
  heartbeat, rewritten every poll. A second application refuses to start while it is fresh.
- ``state.json``: per target table what it holds (``applied_lsn_ranges`` per capture instance, the
  last micro-batch's result in the result file's entry form, ``status`` ``failed`` with the error
  when the table is stopped), capture instance -> table, the windows held back because their
  predecessor is missing, the windows whose manifest cannot be read, and the last micro-batch.

``run_progress`` answers a waiting task: are a run's windows applied, failed, or still to come, and
if still to come, is the application down or behind.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.lsn_ranges import covers, parse_ranges

FORMAT_VERSION = 1
#: The directory under the staging path that holds the application's lock, state and logs.
APPLY_DIRECTORY = "_continuous_apply"
APPLIED = "applied"
FAILED = "failed"
WAITING = "waiting"
#: Per target table, how many applied windows ``state.json`` remembers (``applied_windows``): the waiting
#: task reads a run's record within its timeout (10 minutely windows by default); older ones fall back to
#: the table's last snapshot. About 200 bytes each, in a file rewritten every poll (20 tables: ~120 kB).
APPLIED_WINDOWS_REMEMBERED = 30


def lock_uri(staging: str) -> str:
    """Return the lock file's URI for a staging path."""
    return f"{staging.rstrip('/')}/{APPLY_DIRECTORY}/lock.json"


def state_uri(staging: str) -> str:
    """Return the state file's URI for a staging path."""
    return f"{staging.rstrip('/')}/{APPLY_DIRECTORY}/state.json"


def utc_now() -> dt.datetime:
    """Return the time now, UTC."""
    return dt.datetime.now(dt.UTC)


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@dataclass(frozen=True)
class ApplyLock:
    """The application that holds a staging path.

    :param application_id: its Spark application id.
    :param host: the driver's host.
    :param pid: the driver's process id.
    :param started_at: when it took the lock (ISO 8601, UTC).
    :param heartbeat_at: when it last said it is alive.
    :param stale_after_seconds: how old a heartbeat may be before the holder counts as down.
    """

    application_id: str
    host: str
    pid: int
    started_at: str
    heartbeat_at: str
    stale_after_seconds: float

    def age(self, now: dt.datetime | None = None) -> float:
        """Return the heartbeat's age in seconds."""
        return ((now or utc_now()) - _time(self.heartbeat_at)).total_seconds()

    def is_stale(self, now: dt.datetime | None = None) -> bool:
        """Whether the holder missed its heartbeats long enough to count as down."""
        return self.age(now) > self.stale_after_seconds

    def describe(self) -> str:
        """Return who holds the lock, for messages."""
        return f"application {self.application_id} (driver pid {self.pid} on {self.host}, started {self.started_at})"

    def to_json(self) -> str:
        """Return the file's content."""
        return json.dumps({"format_version": FORMAT_VERSION, **asdict(self)})

    @classmethod
    def from_json(cls, text: str) -> ApplyLock:
        """Read the file's content."""
        data = json.loads(text)
        return cls(
            application_id=str(data["application_id"]),
            host=str(data["host"]),
            pid=int(data["pid"]),
            started_at=str(data["started_at"]),
            heartbeat_at=str(data["heartbeat_at"]),
            stale_after_seconds=float(data["stale_after_seconds"]),
        )


@dataclass
class ApplyState:
    """What the application has applied, per target table (the content of ``state.json``).

    :param application_id: the application that wrote it.
    :param updated_at: when (ISO 8601, UTC).
    :param tables: target table -> entry: ``applied_lsn_ranges`` (capture instance -> ranges), ``status``
        (``committed`` or ``failed``), for a failed table ``error`` and ``failed_windows``, the
        last micro-batch's figures (``applied``, ``rows``, ``snapshot_id``, ``version``, ``seconds``),
        and ``applied_windows``: window label -> the snapshot that applied it (``snapshot_id``), its
        manifest's ``manifest_created_at``, ``applied_at`` and the micro-batch's ``seconds`` (the last
        :data:`APPLIED_WINDOWS_REMEMBERED`; :func:`remember_applied_windows`).
    :param capture_instances: capture instance -> its target table.
    :param held: windows waiting for their predecessor: ``label``, ``capture_instance``, ``waits_for``.
    :param unreadable: capture instance -> the error of a window manifest that cannot be read.
    :param last_batch: the last micro-batch that applied something: ``number``, ``windows``, ``rows``,
        ``tables``, ``seconds``, ``finished_at``.
    """

    application_id: str = ""
    updated_at: str = ""
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    capture_instances: dict[str, str] = field(default_factory=dict)
    held: list[dict[str, str]] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    last_batch: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """Return the file's content."""
        return json.dumps({"format_version": FORMAT_VERSION, **asdict(self)})

    @classmethod
    def from_json(cls, text: str) -> ApplyState:
        """Read the file's content (fields of a newer writer that this reader does not know are ignored)."""
        data = json.loads(text)
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"continuous apply state has format_version {data.get('format_version')!r}")
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)

    def ranges_of(self, capture_instance: str) -> str:
        """Return the applied LSN ranges of a capture instance's table ('' when none are known)."""
        table = self.capture_instances.get(capture_instance)
        entry = self.tables.get(table or "", {})
        return str((entry.get("applied_lsn_ranges") or {}).get(capture_instance, ""))


@dataclass(frozen=True)
class RunWindow:
    """A run's window as the waiting task checks it: the LSN range it brings the table up to.

    :param capture_instance: the window's capture instance.
    :param first: the range's first LSN (int); a window that continues an applied-through LSN starts after it.
    :param last: its last LSN.
    :param label: capture instance and LSN bounds, for messages.
    """

    capture_instance: str
    first: int
    last: int
    label: str

    @classmethod
    def from_bounds(
        cls, capture_instance: str, kind: str, from_lsn: str, to_lsn: str, applied_through: str | None = None
    ) -> RunWindow:
        """Return the window's range as the merge records it (``WindowManifest.lsn_range``).

        :param kind: ``changes`` or ``snapshot`` (which covers every LSN up to its own).
        """
        last = int(Lsn.from_hex(to_lsn))
        if kind == "snapshot":
            first = 0
        elif applied_through is not None:
            first = int(Lsn.from_hex(applied_through)) + 1
        else:
            first = int(Lsn.from_hex(from_lsn))
        return cls(capture_instance, min(first, last), last, f"{capture_instance} {from_lsn}_{to_lsn}")

    def to_dict(self) -> dict[str, Any]:
        """Return the window as JSON-friendly values (a trigger's serialized argument)."""
        return {
            "capture_instance": self.capture_instance,
            "first": self.first,
            "last": self.last,
            "label": self.label,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunWindow:
        """Read what ``to_dict`` returned."""
        return cls(str(data["capture_instance"]), int(data["first"]), int(data["last"]), str(data["label"]))


@dataclass(frozen=True)
class RunProgress:
    """Where a run's windows stand.

    :param status: ``applied`` (every window is in its table), ``failed`` (a table holding one of them
        is stopped, or a manifest cannot be read) or ``waiting``.
    :param message: what is missing or what failed, and what to do.
    :param applied_lsn_ranges: capture instance -> its table's applied ranges, for the watermark mirror.
    """

    status: str
    message: str
    applied_lsn_ranges: dict[str, str]


def run_progress(
    state: ApplyState | None,
    lock: ApplyLock | None,
    windows: Sequence[RunWindow],
    *,
    staging: str,
    now: dt.datetime | None = None,
) -> RunProgress:
    """Say whether the target tables hold a run's windows, from what the application published.

    :param state: the published state (None: none yet).
    :param lock: the published lock (None: no application holds the staging path).
    :param windows: the run's windows.
    :param staging: the staging path, for messages.
    :param now: the time now (tests).
    """
    state = state or ApplyState()
    ranges = {w.capture_instance: state.ranges_of(w.capture_instance) for w in windows}
    missing = [w for w in windows if not covers(parse_ranges(ranges[w.capture_instance]), w.first, w.last)]
    if not missing:
        return RunProgress(APPLIED, f"every window of the run is applied ({len(windows)})", ranges)
    problems = []
    for window in missing:
        table = state.capture_instances.get(window.capture_instance)
        entry = state.tables.get(table or "", {})
        if entry.get("status") == FAILED:
            problems.append(
                f"target table {table} is stopped: {entry.get('error')} (windows "
                f"{', '.join(entry.get('failed_windows') or []) or 'unknown'})"
            )
        elif window.capture_instance in state.unreadable:
            problems.append(f"{window.label}: {state.unreadable[window.capture_instance]}")
    if problems:
        return RunProgress(
            FAILED,
            "the continuous apply application cannot apply this run's windows:\n- "
            + "\n- ".join(dict.fromkeys(problems))
            + "\nFix the cause, then restart the apply application: it retries stopped tables when it starts, "
            "and re-running this task waits again",
            ranges,
        )
    return RunProgress(WAITING, _waiting_message(state, lock, missing, ranges, staging, now), ranges)


def _waiting_message(
    state: ApplyState,
    lock: ApplyLock | None,
    missing: Sequence[RunWindow],
    ranges: Mapping[str, str],
    staging: str,
    now: dt.datetime | None,
) -> str:
    """Say which windows are not applied yet and whether the application is down or behind."""
    lines = [
        f"not applied yet: {w.label} (the table holds {ranges[w.capture_instance] or 'nothing'} of "
        f"{w.capture_instance})"
        for w in missing
    ]
    held = [h for h in state.held if h.get("capture_instance") in {w.capture_instance for w in missing}]
    lines += [
        f"held back: {h['label']} continues LSN {h['waits_for']}, which its table does not hold yet "
        "(its predecessor window has not landed or not been applied)"
        for h in held
    ]
    if lock is None:
        lines.append(
            f"the continuous apply application is DOWN: no application holds {lock_uri(staging)}. Start it "
            "(the DAG's continuous_apply task, or spark-submit continuous_apply_job.py --staging-path "
            f"{staging} ...; docs/continuous-apply.md)"
        )
    elif lock.is_stale(now):
        lines.append(
            f"the continuous apply application is DOWN: {lock.describe()} last reported {lock.age(now):.0f} s "
            f"ago (it counts as down after {lock.stale_after_seconds:.0f} s). Restart it; it resumes from "
            "what the tables hold"
        )
    else:
        batch = state.last_batch
        done = (
            f"its last micro-batch ({batch.get('number')}) applied {batch.get('windows')} window(s) in "
            f"{batch.get('seconds')} s at {batch.get('finished_at')}"
            if batch
            else "it has applied nothing yet"
        )
        lines.append(
            f"the continuous apply application is BEHIND: {lock.describe()} is alive (heartbeat "
            f"{lock.age(now):.0f} s ago); {done}. Give it more resources or a longer timeout, or look at its "
            "driver log"
        )
    return "\n".join(lines)


def remember_applied_windows(
    entry: dict[str, Any],
    created: Mapping[str, str | None],
    *,
    applied_at: str,
) -> None:
    """Record in a table's state entry which snapshot applied each window its last micro-batch applied.

    The waiting task's asset events carry that snapshot (:func:`run_result`). Bounded: the oldest
    records beyond :data:`APPLIED_WINDOWS_REMEMBERED` are dropped.

    :param entry: the table's entry, already updated with the micro-batch's result (``applied``,
        ``version``, ``seconds``).
    :param created: window label -> its manifest's ``created_at`` (which extraction of the window it was).
    :param applied_at: when the micro-batch committed (ISO 8601, UTC).
    """
    windows = entry.setdefault("applied_windows", {})
    for label in entry.get("applied") or []:
        windows.pop(label, None)  # re-inserted last: the dict's order is the records' age
        windows[label] = {
            "snapshot_id": entry.get("version"),
            "manifest_created_at": created.get(label),
            "applied_at": applied_at,
            "seconds": entry.get("seconds"),
        }
    for label in list(windows)[: max(0, len(windows) - APPLIED_WINDOWS_REMEMBERED)]:
        del windows[label]


def run_result(
    state: ApplyState, windows: Sequence[tuple[str, str, str | None]]
) -> dict[str, dict[str, Any]]:
    """Say, per target table, what the application did with a run's windows, in the merge job's result form.

    Each table's entry has ``status`` ``committed``, ``applied`` (the run's windows that the application
    applied from this run's extraction: a re-extracted window that the table already held is not),
    ``version`` (the snapshot that applied the last of them: the first holding every window of the
    run; the table's last one when a record is forgotten) and ``seconds`` (the micro-batches' time
    for the windows applied now, else None).

    :param state: the published state (read after the run's windows are applied).
    :param windows: the run's windows: (capture instance, label, manifest ``created_at``).
    """
    result: dict[str, dict[str, Any]] = {}
    newest: dict[str, str] = {}
    forgotten: set[str] = set()
    for capture_instance, label, created in windows:
        table = state.capture_instances.get(capture_instance)
        if table is None:
            continue
        entry = state.tables.get(table, {})
        out = result.setdefault(
            table, {"status": "committed", "applied": [], "version": None, "seconds": None}
        )
        record = (entry.get("applied_windows") or {}).get(label)
        if record is None:
            forgotten.add(table)
            out["version"] = entry.get("version")
            continue
        if created is not None and record.get("manifest_created_at") == created:
            out["applied"].append(label)
            out["seconds"] = max(out["seconds"] or 0.0, float(record.get("seconds") or 0.0))
        if table not in forgotten and str(record.get("applied_at") or "") >= newest.get(table, ""):
            newest[table] = str(record.get("applied_at") or "")
            out["version"] = record.get("snapshot_id")
    return result
