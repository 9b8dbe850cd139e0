"""The maintenance job's command line: which tables, the thresholds that decide a run, the retention ages."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from airflow_provider_sqlserver_cdc.lsn import Lsn

#: The time-travel window kept by default, with ``DEFAULT_RETAIN_LAST`` snapshots whatever their age: longer
#: windows keep more copies of the compacted files (docs/maintenance.md, "Disk and time travel").
DEFAULT_SNAPSHOT_RETENTION_HOURS = 1.0
DEFAULT_RETAIN_LAST = 10
#: Files no snapshot references are removed once this old (Iceberg's floor is 24 h).
DEFAULT_ORPHAN_AGE_HOURS = 72.0


@dataclass(frozen=True)
class Thresholds:
    """When a table needs maintenance: any one figure at or above its threshold.

    :param delete_files: position-delete files (each merge-on-read merge adds some; every read merges them).
    :param small_files: data files under three quarters of the target file size.
    :param snapshots: snapshots in the table's metadata (each is a copy of the summary in metadata.json).
    :param metadata_bytes: size of the current metadata.json.
    :param full_rewrite_delete_ratio: not a trigger but the kind of compaction a due table gets: the large
        data files are rewritten too only once position deletes reach this share of the rows; below it
        only the small files and the delete files are (docs/maintenance.md, "Disk").
    """

    delete_files: int = 20
    small_files: int = 20
    snapshots: int = 200
    metadata_bytes: int = 1_000_000
    full_rewrite_delete_ratio: float = 0.1


@dataclass(frozen=True)
class MaintenanceSettings:
    """What the maintenance job was asked to do.

    :param tables: dotted target tables; with ``namespace``, every provider table of the namespace too.
    :param namespace: ``catalog.namespace`` whose tables created by the merge job are maintained.
    :param thresholds: when a table is maintained (``force`` maintains it anyway).
    :param force: maintain every table whatever its figures.
    :param snapshot_retention_hours: the time-travel window: snapshots older than this are expired.
    :param retain_last: snapshots kept whatever their age.
    :param orphan_age_hours: files no snapshot references are removed once this old (at least 24 h:
        a file a running commit has written but not committed yet is not referenced either).
    :param cdc_min_lsn: capture instance -> the source's ``sys.fn_cdc_get_min_lsn``, for the tombstone purge.
    :param tombstone_margin_hours: tombstones are purged only when older than the source's retention
        and committed more than this long ago; None: no purge.
    """

    tables: tuple[str, ...] = ()
    namespace: str | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    force: bool = False
    snapshot_retention_hours: float = DEFAULT_SNAPSHOT_RETENTION_HOURS
    retain_last: int = DEFAULT_RETAIN_LAST
    orphan_age_hours: float = DEFAULT_ORPHAN_AGE_HOURS
    cdc_min_lsn: dict[str, Lsn] = field(default_factory=dict)
    tombstone_margin_hours: float | None = None


#: The settings whose option has the field's name and is taken as parsed.
_AS_GIVEN = (
    "namespace",
    "force",
    "snapshot_retention_hours",
    "retain_last",
    "orphan_age_hours",
    "tombstone_margin_hours",
)


def parse_args(argv: Sequence[str]) -> MaintenanceSettings:
    """Parse the command line of the maintenance job.

    :param argv: the arguments after the application file.
    """
    defaults = Thresholds()
    parser = argparse.ArgumentParser(
        prog="maintenance_job.py", description="Maintain the provider's Iceberg tables."
    )
    parser.add_argument("--table", action="append", default=[], help="CATALOG.NAMESPACE.TABLE (repeatable)")
    parser.add_argument("--namespace", help="CATALOG.NAMESPACE: every table the merge job created there")
    parser.add_argument("--min-delete-files", type=int, default=defaults.delete_files)
    parser.add_argument("--min-small-files", type=int, default=defaults.small_files)
    parser.add_argument("--min-snapshots", type=int, default=defaults.snapshots)
    parser.add_argument("--min-metadata-bytes", type=int, default=defaults.metadata_bytes)
    parser.add_argument("--full-rewrite-delete-ratio", type=float, default=defaults.full_rewrite_delete_ratio)
    parser.add_argument("--force", action="store_true", help="maintain whatever the figures")
    parser.add_argument("--snapshot-retention-hours", type=float, default=DEFAULT_SNAPSHOT_RETENTION_HOURS)
    parser.add_argument("--retain-last", type=int, default=DEFAULT_RETAIN_LAST)
    parser.add_argument("--orphan-age-hours", type=float, default=DEFAULT_ORPHAN_AGE_HOURS)
    parser.add_argument(
        "--cdc-min-lsn", action="append", default=[], help="CAPTURE_INSTANCE=0x... (repeatable)"
    )
    parser.add_argument("--tombstone-margin-hours", type=float, default=None)
    args = parser.parse_args(list(argv))
    if not args.table and not args.namespace:
        parser.error("pass --table CATALOG.NAMESPACE.TABLE or --namespace CATALOG.NAMESPACE")
    if args.orphan_age_hours < 24:
        parser.error(
            "--orphan-age-hours must be at least 24: a younger unreferenced file may belong to a commit in progress"
        )
    if args.retain_last < 1 or args.snapshot_retention_hours < 0:
        parser.error("--retain-last must be at least 1 and --snapshot-retention-hours not negative")
    min_lsns = {}
    for item in args.cdc_min_lsn:
        ci, sep, value = item.partition("=")
        try:
            min_lsns[ci] = Lsn.from_hex(value)
        except ValueError:
            sep = ""
        if not sep or not ci:
            parser.error(f"--cdc-min-lsn {item!r}: expected CAPTURE_INSTANCE=0x + 20 hex digits")
    if not 0 < args.full_rewrite_delete_ratio <= 1:
        parser.error("--full-rewrite-delete-ratio must be above 0 and at most 1")
    if args.tombstone_margin_hours is not None and args.tombstone_margin_hours < 0:
        parser.error("--tombstone-margin-hours must not be negative")
    as_given = {name: getattr(args, name) for name in _AS_GIVEN}
    return MaintenanceSettings(
        tables=tuple(args.table),
        thresholds=Thresholds(
            args.min_delete_files,
            args.min_small_files,
            args.min_snapshots,
            args.min_metadata_bytes,
            args.full_rewrite_delete_ratio,
        ),
        cdc_min_lsn=min_lsns,
        **as_given,
    )
