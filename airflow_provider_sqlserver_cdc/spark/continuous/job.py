"""The continuous apply job: one long-running Spark application that merges windows as they land.

Every ``poll_seconds`` it lists the staging path (``discovery``), reads the manifests of the windows
their tables do not hold yet, holds back a window whose predecessor is missing (``readiness``), and
merges the rest with the merge job's own ``run`` (per table: the LSN guard, the applied ranges in
the same commit, one commit per table per micro-batch, tables ``concurrent_tables`` at a time). Its
progress is what the tables hold: a restart (or a kill -9) resumes from their applied ranges, and a
window applied twice changes nothing. It publishes its state for the waiting Airflow task
(``published_state``) and holds the staging path's lock (``lock``). A table whose window cannot be
applied is stopped, with the error published; the other tables go on.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.continuous.discovery import (
    capture_instances,
    new_windows,
    newest_window,
)
from airflow_provider_sqlserver_cdc.spark.continuous.lock import ApplyLockError, acquire, heartbeat, release
from airflow_provider_sqlserver_cdc.spark.continuous.published_state import (
    ApplyLock,
    ApplyState,
    remember_applied_windows,
    state_uri,
    utc_now,
)
from airflow_provider_sqlserver_cdc.spark.continuous.readiness import sort_out
from airflow_provider_sqlserver_cdc.spark.merge import job as merge_job
from airflow_provider_sqlserver_cdc.spark.merge.arguments import (
    MergeJobSettings,
    settings_from_args,
    target_parser,
)
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError, TableMergeError
from airflow_provider_sqlserver_cdc.spark.merge.published_files import read_text, write_text
from airflow_provider_sqlserver_cdc.spark.merge.result_line import FAILED
from airflow_provider_sqlserver_cdc.spark.merge.targets.selection import target_from_settings
from airflow_provider_sqlserver_cdc.spark.merge.window_reader import Window, load_window
from airflow_provider_sqlserver_cdc.window.lsn_ranges import LsnRange, format_ranges, parse_ranges
from airflow_provider_sqlserver_cdc.window.manifest import ManifestError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG = logging.getLogger("sqlserver_cdc.continuous_apply")
#: Seconds between polls of the staging path (the trigger interval).
DEFAULT_POLL_SECONDS = 5.0
#: Seconds without a heartbeat after which the application counts as down.
DEFAULT_STALE_AFTER_SECONDS = 60.0
EMPTY_WINDOWS_REMEMBERED = 10_000


@dataclasses.dataclass(frozen=True)
class ContinuousSettings:
    """What the continuous apply application was asked to do.

    :param staging: the staging path whose windows it applies.
    :param merge: how windows are merged (target, namespace, modes...), as for the merge job.
    :param poll_seconds: seconds between polls.
    :param stale_after_seconds: heartbeat age after which the application counts as down.
    """

    staging: str
    merge: MergeJobSettings
    poll_seconds: float = DEFAULT_POLL_SECONDS
    stale_after_seconds: float = DEFAULT_STALE_AFTER_SECONDS


class ContinuousApply:
    """The application's loop state: the tables' applied ranges, the stopped tables, the published state.

    :param spark: the application's session.
    :param settings: what it was asked to do.
    """

    def __init__(self, spark: SparkSession, settings: ContinuousSettings) -> None:
        self.spark = spark
        self.settings = settings
        self.target = target_from_settings(spark, settings.merge)
        self.state = self._load_state()
        self.applied: dict[str, list[LsnRange]] = {}  # capture instance -> ranges its table holds
        self.batches = 0
        # Empty windows already taken: the merge records no range for them, so they would be found again.
        self.empty_taken: set[str] = set()

    def _load_state(self) -> ApplyState:
        text = read_text(self.spark, state_uri(self.settings.staging))
        state = ApplyState.from_json(text) if text else ApplyState()
        for entry in state.tables.values():  # a restart retries the stopped tables
            if entry.get("status") == FAILED:
                entry.update(status="committed", error=None, failed_windows=[])
        state.held, state.unreadable = [], {}
        state.application_id = self.spark.sparkContext.applicationId
        return state

    def _learn_tables(self) -> None:
        """Read the applied ranges of the tables of capture instances seen for the first time."""
        for capture_instance in capture_instances(self.spark, self.settings.staging):
            if capture_instance in self.applied:
                continue
            uri = newest_window(self.spark, self.settings.staging, capture_instance)
            if uri is None:
                continue
            try:
                table = self.settings.merge.target_for(load_window(self.spark, uri))
            except (ManifestError, MergeJobError) as err:
                self.state.unreadable[capture_instance] = merge_job.failure_reason(err)
                continue
            self._remember(table, self.target.applied_ranges(table) if self.target.exists(table) else {})
            self.applied.setdefault(capture_instance, [])
            self.state.capture_instances[capture_instance] = table

    def _remember(self, table: str, ranges: dict[str, list[LsnRange]]) -> None:
        self.applied.update({ci: list(r) for ci, r in ranges.items()})
        entry = self.state.tables.setdefault(table, {"status": "committed"})
        entry["applied_lsn_ranges"] = {ci: format_ranges(r) for ci, r in ranges.items() if r}
        for capture_instance in ranges:
            self.state.capture_instances[capture_instance] = table

    def poll(self) -> int:
        """Apply what landed since the last poll; publish the state; return the windows applied."""
        started = time.monotonic()
        self._learn_tables()
        found = new_windows(self.spark, self.settings.staging, self.applied)
        by_table: dict[str, list[Window]] = {}
        unreadable: dict[str, str] = {}
        for item in found:
            try:
                window = load_window(self.spark, item.uri)
                table = self.settings.merge.target_for(window)
            except (ManifestError, MergeJobError) as err:
                unreadable[item.capture_instance] = merge_job.failure_reason(err)
                continue
            self.state.capture_instances[window.manifest.capture_instance] = table
            if window.manifest.kind == "changes" and window.manifest.row_count == 0:
                if window.uri in self.empty_taken:
                    continue
                if len(self.empty_taken) > EMPTY_WINDOWS_REMEMBERED:
                    self.empty_taken.clear()  # bounded: at worst an empty window is looked at once more
                self.empty_taken.add(window.uri)
            by_table.setdefault(table, []).append(window)
        ready: list[Window] = []
        held: list[dict[str, str]] = []
        for table, windows in by_table.items():
            if self.state.tables.get(table, {}).get("status") == FAILED:
                continue  # stopped until the application restarts
            sorted_out = sort_out(windows, self.applied)
            ready += sorted_out.ready
            held += [
                {"label": w.label, "capture_instance": w.manifest.capture_instance, "waits_for": through}
                for w, through in sorted_out.held
            ]
        self.state.held, self.state.unreadable = held, unreadable
        applied = self._merge(ready) if ready else 0
        self.state.updated_at = utc_now().isoformat()
        if ready:
            self.batches += 1
            rows = sum(w.manifest.row_count for w in ready)
            tables = len({self.settings.merge.target_for(w) for w in ready})
            seconds = round(time.monotonic() - started, 3)
            self.state.last_batch = {
                "number": self.batches,
                "windows": len(ready),
                "rows": rows,
                "tables": tables,
                "seconds": seconds,
                "finished_at": self.state.updated_at,
            }
            LOG.info(
                "micro-batch %d: %d window(s), %d row(s), %d table(s) in %.1f s; %d held back for their predecessor",
                self.batches,
                len(ready),
                rows,
                tables,
                seconds,
                len(held),
            )
        write_text(self.spark, state_uri(self.settings.staging), self.state.to_json())
        return applied

    def _merge(self, ready: list[Window]) -> int:
        """Merge the ready windows with the merge job's run; record each table's result; return the windows applied."""
        settings = dataclasses.replace(self.settings.merge, manifests=tuple(w.uri for w in ready))
        try:
            summary = merge_job.run(self.spark, settings)
        except TableMergeError as err:
            summary = err.result
        except (MergeJobError, ManifestError) as err:  # before any table: nothing committed
            LOG.error("micro-batch not applied: %s", err)
            for window in ready:
                self.state.unreadable[window.manifest.capture_instance] = merge_job.failure_reason(err)
            return 0
        applied = 0
        created = {w.label: w.manifest.created_at for w in ready}
        applied_at = utc_now().isoformat()
        for table, entry in summary.items():
            ranges = {ci: parse_ranges(text) for ci, text in (entry.get("applied_lsn_ranges") or {}).items()}
            self._remember(table, ranges)
            self.state.tables[table].update(entry)
            # Which snapshot applied each window: the waiting task's asset events (published_state.run_result)
            remember_applied_windows(self.state.tables[table], created, applied_at=applied_at)
            if entry.get("status") == FAILED:
                LOG.error(
                    "target table %s is stopped until the application restarts: %s", table, entry.get("error")
                )
            applied += len(entry.get("applied") or [])
        return applied


class Heartbeat:
    """Rewrite the lock's heartbeat on a thread of its own, so that a long micro-batch does not look like a dead application.

    :param spark: the application's session.
    :param staging: the staging path.
    :param lock: the lock this application holds.
    :param every: seconds between heartbeats.
    """

    def __init__(self, spark: SparkSession, staging: str, lock: ApplyLock, every: float) -> None:
        self.spark, self.staging, self.lock, self.every = spark, staging, lock, every
        self.lost: ApplyLockError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="continuous-apply-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.lock = heartbeat(self.spark, self.staging, self.lock)
            except ApplyLockError as err:
                self.lost = err
                return
            except Exception as err:  # a storage hiccup: the next beat tries again
                LOG.warning("could not renew the heartbeat: %s", merge_job.failure_reason(err))

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every + 30)


def run_continuously(
    spark: SparkSession, settings: ContinuousSettings, stop: Callable[[], bool] = lambda: False
) -> ContinuousApply:
    """Hold the staging path's lock and poll it until ``stop()`` says so; release the lock.

    :param spark: the application's session (``merge_job.configure_session`` is applied).
    :param settings: what to apply and how often.
    :param stop: asked after each poll.
    :raises ApplyLockError: another application holds the staging path, or took it over.
    """
    merge_job.configure_session(spark)
    target = target_from_settings(spark, settings.merge)
    target.check_session()
    lock = acquire(spark, settings.staging, spark.sparkContext.applicationId, settings.stale_after_seconds)
    apply = ContinuousApply(spark, settings)
    LOG.info(
        "continuous apply of %s every %.0f s (state %s)",
        settings.staging,
        settings.poll_seconds,
        state_uri(settings.staging),
    )
    every = min(settings.poll_seconds, settings.stale_after_seconds / 4)
    try:
        with Heartbeat(spark, settings.staging, lock, every) as beating:
            while True:
                started = time.monotonic()
                apply.poll()
                if beating.lost is not None:
                    raise beating.lost
                if stop():
                    return apply
                time.sleep(max(0.0, settings.poll_seconds - (time.monotonic() - started)))
                if stop():
                    return apply
    finally:
        release(spark, settings.staging, lock)


def parse_args(argv: Sequence[str]) -> ContinuousSettings:
    """Parse the command line: the merge job's target arguments, the staging path and the intervals."""
    parser = target_parser(
        "continuous_apply_job.py", "Merge CDC windows into their tables continuously, as they land."
    )
    parser.add_argument("--staging-path", required=True, help="the staging path the extract tasks write to")
    parser.add_argument("--poll-seconds", type=float, default=DEFAULT_POLL_SECONDS)
    parser.add_argument("--stale-after-seconds", type=float, default=DEFAULT_STALE_AFTER_SECONDS)
    args = parser.parse_args(list(argv))
    if args.poll_seconds <= 0 or args.stale_after_seconds <= args.poll_seconds:
        parser.error("--poll-seconds must be positive and --stale-after-seconds longer than it")
    return ContinuousSettings(
        args.staging_path.rstrip("/"),
        settings_from_args(parser, args, ()),
        args.poll_seconds,
        args.stale_after_seconds,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the application until SIGTERM/SIGINT; exit 2 when another application holds the staging path."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = parse_args(sys.argv[1:] if argv is None else argv)
    import airflow_provider_sqlserver_cdc as package

    LOG.info("continuous apply job %s, modules from %s", package.__version__, Path(package.__file__).parent)
    from pyspark.sql import SparkSession

    stopping: list[Any] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda number, frame: stopping.append(number))
    spark = SparkSession.builder.appName("sqlserver-cdc-continuous-apply").getOrCreate()
    try:
        run_continuously(spark, settings, stop=lambda: bool(stopping))
    except ApplyLockError as err:
        LOG.error("%s", err)
        print(f"ERROR: {err}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    LOG.info("stopped on signal %s", stopping[0] if stopping else None)
    return 0
