"""The merge job's result file: per target table, what one run (or one continuous micro-batch) did.

The job writes it (atomically, ``spark.merge.published_files``) on the staging storage; the operators
read it there (``staging_files``), so it reaches Airflow in any deploy mode. One format, written and
read here; standard library only (the job imports it on the cluster, Airflow code without PySpark).

``{"format_version": 1, "finished_at": ISO-8601, "seconds": float, "application_id": str | null,
"tables": {target table: entry}}``, an entry being ``status`` (``committed`` / ``failed``),
``applied`` / ``skipped`` / ``failed_windows`` (window labels), ``applied_lsn_ranges`` and
``max_applied_lsn`` (capture instance -> value), ``rows`` (operation -> rows of the applied windows),
``snapshot_id`` (the commit holding them, None when nothing was committed), ``version`` (a committed
table's current snapshot after the run, also when the run only replayed: what the asset events carry),
``seconds`` and ``error``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_sqlserver_cdc.spark.merge.result_line import COMMITTED, FAILED

FORMAT_VERSION = 1
#: The directory under the staging path that holds the merge tasks' result files.
RESULT_DIRECTORY = "_merge_results"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class ResultFileError(ValueError):
    """A result file that cannot be read as one: the message says which file and what is wrong."""


@dataclass(frozen=True)
class TableResult:
    """What a run did to one target table.

    :param table: the dotted target table name.
    :param status: ``committed`` or ``failed``.
    :param applied: labels of the windows this run committed.
    :param skipped: labels of the windows the table already held.
    :param applied_lsn_ranges: capture instance -> the LSN ranges the table holds afterwards.
    :param max_applied_lsn: capture instance -> its highest applied LSN.
    :param rows: operation (``insert``, ``update_after``, ``update_before``, ``delete``) -> rows of the
        applied windows.
    :param snapshot_id: the table's snapshot holding the run's commit (Iceberg), None if none.
    :param version: a committed table's current snapshot after the run (a replay's too), None if unknown.
    :param seconds: the table's time in the run (check and commit).
    :param failed_windows: for a failed table, the windows not committed.
    :param error: for a failed table, why.
    """

    table: str
    status: str
    applied: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    applied_lsn_ranges: Mapping[str, str] = field(default_factory=dict)
    max_applied_lsn: Mapping[str, str] = field(default_factory=dict)
    rows: Mapping[str, int] = field(default_factory=dict)
    snapshot_id: int | None = None
    version: str | None = None
    seconds: float | None = None
    failed_windows: tuple[str, ...] = ()
    error: str | None = None

    @property
    def committed(self) -> bool:
        """Whether the table's windows are committed."""
        return self.status == COMMITTED

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as the file holds it (without the table name, its key)."""
        entry: dict[str, Any] = {
            "status": self.status,
            "applied": list(self.applied),
            "skipped": list(self.skipped),
            "applied_lsn_ranges": dict(self.applied_lsn_ranges),
            "max_applied_lsn": dict(self.max_applied_lsn),
            "rows": dict(self.rows),
            "snapshot_id": self.snapshot_id,
            "version": self.version,
            "seconds": self.seconds,
        }
        if self.status == FAILED:
            entry["failed_windows"] = list(self.failed_windows)
            entry["error"] = self.error
        return entry

    @classmethod
    def from_dict(cls, table: str, entry: Mapping[str, Any]) -> TableResult:
        """Read an entry of the file (or of the job's result line).

        :param table: the entry's key.
        :param entry: the entry.
        """
        return cls(
            table=table,
            status=str(entry.get("status")),
            applied=tuple(entry.get("applied") or ()),
            skipped=tuple(entry.get("skipped") or ()),
            applied_lsn_ranges=dict(entry.get("applied_lsn_ranges") or {}),
            max_applied_lsn=dict(entry.get("max_applied_lsn") or {}),
            rows={str(k): int(v) for k, v in (entry.get("rows") or {}).items()},
            snapshot_id=None if entry.get("snapshot_id") is None else int(entry["snapshot_id"]),
            version=None if entry.get("version") is None else str(entry["version"]),
            seconds=None if entry.get("seconds") is None else float(entry["seconds"]),
            failed_windows=tuple(entry.get("failed_windows") or ()),
            error=entry.get("error"),
        )


@dataclass(frozen=True)
class MergeResult:
    """What a merge run did, table by table (the content of a result file).

    :param tables: target table -> its result, in run order.
    :param finished_at: when the job wrote it (UTC, ISO 8601).
    :param seconds: the run's time from the first manifest read to the file.
    :param application_id: the Spark application that wrote it.
    """

    tables: Mapping[str, TableResult]
    finished_at: str = ""
    seconds: float | None = None
    application_id: str | None = None

    def committed(self) -> list[TableResult]:
        """Return the committed tables' results, in run order."""
        return [t for t in self.tables.values() if t.committed]

    def failed(self) -> list[TableResult]:
        """Return the failed tables' results, in run order."""
        return [t for t in self.tables.values() if t.status == FAILED]

    def applied_lsn_ranges(self) -> dict[str, str]:
        """Return capture instance -> applied LSN ranges of the committed tables (the watermark's mirror)."""
        ranges: dict[str, str] = {}
        for table in self.committed():
            ranges.update(table.applied_lsn_ranges)
        return ranges

    def summary(self) -> dict[str, dict[str, Any]]:
        """Return target table -> entry, the job's result-line form."""
        return {name: table.to_dict() for name, table in self.tables.items()}

    def to_json(self) -> str:
        """Return the file's content."""
        return json.dumps(
            {
                "format_version": FORMAT_VERSION,
                "finished_at": self.finished_at,
                "seconds": self.seconds,
                "application_id": self.application_id,
                "tables": self.summary(),
            }
        )

    @classmethod
    def from_summary(
        cls,
        summary: Mapping[str, Mapping[str, Any]],
        *,
        seconds: float | None = None,
        application_id: str | None = None,
        finished_at: str | None = None,
    ) -> MergeResult:
        """Build a result from the job's per-table summary (target table -> entry).

        :param summary: the summary ``spark.merge.job.run`` returns.
        :param seconds: the run's time.
        :param application_id: the Spark application.
        :param finished_at: when it finished; default now.
        """
        return cls(
            tables={table: TableResult.from_dict(table, entry) for table, entry in summary.items()},
            finished_at=finished_at or dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            seconds=seconds,
            application_id=application_id,
        )

    @classmethod
    def from_json(cls, text: str | bytes, where: str) -> MergeResult:
        """Read a result file's content.

        :param text: the content.
        :param where: the file's URI, for messages.
        :raises ResultFileError: not JSON, an unknown format version, or no ``tables`` object.
        """
        try:
            data = json.loads(text)
        except ValueError as err:
            raise ResultFileError(f"merge result file {where} is not JSON: {err}") from None
        if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
            version = data.get("format_version") if isinstance(data, dict) else None
            raise ResultFileError(
                f"merge result file {where} has format_version {version!r}; this provider reads "
                f"{FORMAT_VERSION} (is the job on the cluster another version of the provider?)"
            )
        tables = data.get("tables")
        if not isinstance(tables, dict) or not all(isinstance(e, dict) for e in tables.values()):
            raise ResultFileError(f"merge result file {where} has no 'tables' object of table entries")
        return cls.from_summary(
            tables,
            seconds=data.get("seconds"),
            application_id=data.get("application_id"),
            finished_at=str(data.get("finished_at") or ""),
        )


def window_base(manifest: str) -> str:
    """Return the staging path of a window's manifest URI: ``{base}/{capture_instance}/{window}/_manifest.json``.

    :param manifest: a manifest URI (or path).
    """
    parts = manifest.rstrip("/").rsplit("/", 3)
    if len(parts) == 4 and not parts[0] and manifest.startswith("/"):
        return "/"  # windows right under the root directory
    if len(parts) < 4 or not parts[0]:
        raise ResultFileError(
            f"cannot tell the staging path of window manifest {manifest}: expected "
            "{base}/{capture_instance}/{window}/_manifest.json; pass result_path"
        )
    return parts[0]


def result_file_uri(base: str, *name_parts: str) -> str:
    """Return a new result file's URI under ``{base}/_merge_results/``: the parts, made safe, and a unique suffix.

    :param base: the staging path (local path or URI).
    :param name_parts: what names the run, e.g. the DAG, task and run ids.
    """
    stem = "__".join(_UNSAFE.sub("_", part).strip("_") for part in name_parts if part)[:180]
    return f"{base.rstrip('/')}/{RESULT_DIRECTORY}/{stem + '__' if stem else ''}{uuid.uuid4().hex[:12]}.json"
