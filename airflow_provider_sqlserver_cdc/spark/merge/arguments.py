"""The merge job's command line: what it was asked to do (``MergeSettings``) and the checks on it."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import MERGE_STRATEGIES
from airflow_provider_sqlserver_cdc.spark.merge.table_modes import TABLE_MODES, parse_table_modes
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import is_job_table_property
from airflow_provider_sqlserver_cdc.window.manifest import manifest_uri

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.spark.merge.window_reader import Window

DELETE_MODES = ("soft", "hard")
WRITE_MODES = ("copy-on-write", "merge-on-read")
#: Kinds of target: Iceberg tables of the session's catalogs, or tables of a JDBC (PostgreSQL) database.
TARGET_KINDS = ("iceberg", "jdbc")


@dataclass(frozen=True)
class MergeSettings:
    """What the job was asked to do."""

    manifests: tuple[str, ...]
    namespace: str | None = None
    table_name_template: str = "{schema}_{table}"
    targets: dict[str, str] = field(default_factory=dict)
    delete_mode: str = "soft"
    write_mode: str = "merge-on-read"
    table_properties: dict[str, str] = field(default_factory=dict)
    # Key buckets of the tables the job creates (docs/merge-performance.md): 0 none (measured faster for
    # small windows), None from their size.
    partition_buckets: int | None = 0
    # Target tables merged at once, each on its own thread and Spark session (``concurrent_tables``).
    concurrent_tables: int = 1
    # MERGE or rewrite the table per change window (``merge_strategy``): auto, merge or rewrite.
    merge_strategy: str = "auto"
    # The relational target (docs/targets-postgres.md): credentials come from the environment or a file.
    target_kind: str = "iceberg"
    jdbc_url: str | None = None
    jdbc_connections: int = 4
    jdbc_credentials_file: str | None = None
    # Where the job writes its result file (``result_file``); None: no file.
    result_uri: str | None = None
    # Capture instance -> table mode (``table_modes``): current (default), history or changelog.
    table_modes: dict[str, str] = field(default_factory=dict)

    def target_for(self, window: Window) -> str:
        """Return the dotted target table name for a window."""
        manifest = window.manifest
        if manifest.capture_instance in self.targets:
            return self.targets[manifest.capture_instance]
        if not self.namespace:
            raise MergeJobError(
                f"no target table for capture instance {manifest.capture_instance}: pass --namespace "
                f"CATALOG.NAMESPACE or --target {manifest.capture_instance}=CATALOG.NAMESPACE.TABLE"
            )
        values = {
            "capture_instance": manifest.capture_instance,
            "schema": manifest.source.get("schema", ""),
            "table": manifest.source.get("table", ""),
            "database": manifest.source.get("database", ""),
        }
        try:
            name = self.table_name_template.format(**values)
        except (KeyError, IndexError) as err:
            raise MergeJobError(
                f"--table-name-template {self.table_name_template!r} uses unknown field {err}"
            ) from None
        if not name.strip("_") or "." in name:
            raise MergeJobError(
                f"--table-name-template {self.table_name_template!r} gives {name!r} for "
                f"{manifest.capture_instance}; the manifest's source may lack schema/table: pass --target for it"
            )
        return f"{self.namespace}.{name}"


def parse_table_properties(items: Iterable[str]) -> dict[str, str]:
    """Parse ``KEY=VALUE`` Iceberg table properties for the tables the job creates.

    The job's own properties (``targets.iceberg.job_table_properties``, ``--write-mode`` for the write
    modes, and the ``sqlserver-cdc.`` ones) cannot be given, nor quotes or backslashes, which the
    ``TBLPROPERTIES`` clause would have to escape.

    :param items: ``KEY=VALUE`` texts.
    """
    properties: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise MergeJobError(
                f"table property {item!r}: expected KEY=VALUE, e.g. write.target-file-size-bytes=134217728"
            )
        if is_job_table_property(key):
            raise MergeJobError(
                f"table property {key!r} is set by the merge job itself (use --write-mode for the write modes)"
            )
        if any(c in item for c in "'\\"):
            raise MergeJobError(f"table property {item!r}: quotes and backslashes are not supported")
        properties[key] = value.strip()
    return properties


def parse_args(argv: Sequence[str]) -> MergeSettings:
    """Parse the command line of the job.

    :param argv: the arguments after the application file.
    """
    parser = target_parser("merge_job.py", "Merge CDC windows into Iceberg tables.")
    parser.add_argument(
        "--manifest", action="append", default=[], help="manifest URI or window directory (repeatable)"
    )
    parser.add_argument("--result-uri", help="where to write the run's result file (JSON, atomically)")
    args = parser.parse_args(list(argv))
    manifests: list[str] = []
    for reference in filter(str.strip, args.manifest):
        if reference.strip()[:1] in ("[", "{", '"'):
            parser.error(
                f"--manifest {reference[:80]!r}: pass manifest URIs or window directories (one --manifest "
                "each), not the extract task's XCom JSON; CdcSparkMergeOperator resolves the XCom"
            )
        if manifest_uri(reference) not in manifests:
            manifests.append(manifest_uri(reference))
    return settings_from_args(parser, args, manifests, result_uri=args.result_uri)


def target_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Return a parser of the arguments saying where and how windows are merged (all but the windows).

    :param prog: the application file's name.
    :param description: what the application does.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--namespace", help="CATALOG.NAMESPACE of the target tables")
    parser.add_argument("--table-name-template", default="{schema}_{table}")
    parser.add_argument("--target", action="append", default=[], help="CAPTURE_INSTANCE=CATALOG.NS.TABLE")
    parser.add_argument("--delete-mode", choices=DELETE_MODES, default="soft")
    parser.add_argument("--write-mode", choices=WRITE_MODES, default="merge-on-read")
    parser.add_argument(
        "--table-property",
        action="append",
        default=[],
        help="KEY=VALUE Iceberg table property for the tables the job creates",
    )
    parser.add_argument(
        "--partition-buckets",
        type=lambda value: None if value == "auto" else int(value),
        default=0,
        help="bucket(N, first key column) partitioning of the tables the job creates, for the "
        "storage-partitioned MERGE; 'auto': N from their size; 0 (default): unpartitioned",
    )
    parser.add_argument(
        "--concurrent-tables",
        type=int,
        default=1,
        help="target tables merged at once in the application (with spark.scheduler.mode=FAIR, fairly)",
    )
    parser.add_argument(
        "--merge-strategy",
        choices=MERGE_STRATEGIES,
        default="auto",
        help="Iceberg: MERGE each change window, rewrite the table with it applied, or choose per window "
        "from the table's file statistics (auto, default; docs/merge-performance.md)",
    )
    parser.add_argument(
        "--table-mode",
        action="append",
        default=[],
        help=f"CAPTURE_INSTANCE=MODE, MODE one of {', '.join(TABLE_MODES)} (docs/history-targets.md); "
        "default current, changelog for a capture instance without key columns",
    )
    parser.add_argument("--target-kind", choices=TARGET_KINDS, default="iceberg")
    parser.add_argument("--jdbc-url", help="JDBC URL of the target database, without credentials")
    parser.add_argument("--jdbc-connections", type=int, default=4, help="connections loading a batch at once")
    parser.add_argument("--jdbc-credentials-file", help="file (mode 600) with user= and password= lines")
    return parser


def settings_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, manifests: Sequence[str], **more: Any
) -> MergeSettings:
    """Check the parsed arguments of ``target_parser`` and return the settings (``parser.error`` on a bad one).

    :param parser: the parser, for its errors.
    :param args: what it parsed.
    :param manifests: the manifest URIs to merge.
    :param more: further ``MergeSettings`` fields.
    """
    if args.target_kind == "jdbc" and not args.jdbc_url:
        parser.error("--target-kind jdbc needs --jdbc-url (e.g. jdbc:postgresql://host:5432/database)")
    if args.partition_buckets is not None and args.partition_buckets < 0:
        parser.error(f"--partition-buckets must be 0 or more, got {args.partition_buckets}")
    if args.concurrent_tables < 1:
        parser.error(f"--concurrent-tables must be at least 1, got {args.concurrent_tables}")
    if args.jdbc_connections < 1:
        parser.error(f"--jdbc-connections must be at least 1, got {args.jdbc_connections}")
    try:
        properties = parse_table_properties(args.table_property)
        table_modes = parse_table_modes(args.table_mode)
    except MergeJobError as err:
        parser.error(str(err))
    targets = {}
    for item in args.target:
        ci, sep, table = item.partition("=")
        if not sep or not ci or not table:
            parser.error(f"--target {item!r}: expected CAPTURE_INSTANCE=CATALOG.NAMESPACE.TABLE")
        targets[ci] = table
    as_given = {
        name: getattr(args, name)
        for name in (
            "namespace",
            "table_name_template",
            "delete_mode",
            "partition_buckets",
            "concurrent_tables",
            "merge_strategy",
        )
        + ("target_kind", "jdbc_url", "jdbc_connections", "jdbc_credentials_file")
    }
    return MergeSettings(
        tuple(manifests),
        targets=targets,
        write_mode=args.write_mode,
        table_properties=properties,
        table_modes=table_modes,
        **as_given,
        **more,
    )
