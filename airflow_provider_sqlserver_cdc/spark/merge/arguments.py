"""The merge job's command line: what it was asked to do (``MergeJobSettings``), its defaults and the checks.

Each default of the job is stated here once: the dataclass, the argument parser, the operator
(through ``task_defaults``) and the pipeline settings read it from here.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.merge_strategy import (
    DEFAULT_MERGE_STRATEGY,
    DEFAULT_WRITE_MODE,
    MERGE_STRATEGIES,
    WRITE_MODES,
)
from airflow_provider_sqlserver_cdc.spark.merge.scale_options import (
    AUTO_BUCKETS,
    DEFAULT_CONCURRENT_TABLES,
    DEFAULT_PARTITION_BUCKETS,
)
from airflow_provider_sqlserver_cdc.spark.merge.table_modes import TABLE_MODES, parse_table_modes
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg import is_job_table_property
from airflow_provider_sqlserver_cdc.window.manifest import manifest_uri

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.spark.merge.window_reader import Window

DELETE_MODES = ("soft", "hard")
#: Kinds of target: Iceberg tables of the session's catalogs, or tables of a PostgreSQL database (over JDBC).
ICEBERG_TARGET = "iceberg"
POSTGRES_TARGET = "postgres"
TARGET_KINDS = (ICEBERG_TARGET, POSTGRES_TARGET)

#: The job's defaults (why each is safe: pipeline/settings.py).
DEFAULT_TABLE_NAME_TEMPLATE = "{schema}_{table}"
DEFAULT_DELETE_MODE = "soft"
DEFAULT_TARGET_KIND = ICEBERG_TARGET
#: Connections that load a batch into a PostgreSQL target at once (rows hashed by key).
DEFAULT_JDBC_CONNECTIONS = 4


@dataclass(frozen=True)
class MergeJobSettings:
    """What the job was asked to do (the pipeline's ``merge:`` section is ``pipeline.settings.MergeSettings``)."""

    manifests: tuple[str, ...]
    namespace: str | None = None
    table_name_template: str = DEFAULT_TABLE_NAME_TEMPLATE
    targets: dict[str, str] = field(default_factory=dict)
    delete_mode: str = DEFAULT_DELETE_MODE
    write_mode: str = DEFAULT_WRITE_MODE
    table_properties: dict[str, str] = field(default_factory=dict)
    # Key buckets of the tables the job creates (docs/merge-performance.md): 0 none (measured faster for
    # small windows), None from their size.
    partition_buckets: int | None = DEFAULT_PARTITION_BUCKETS
    # Target tables merged at once, each on its own thread and Spark session (``concurrent_tables``).
    concurrent_tables: int = DEFAULT_CONCURRENT_TABLES
    # MERGE or rewrite the table per change window (``merge_strategy``): auto, merge or rewrite.
    merge_strategy: str = DEFAULT_MERGE_STRATEGY
    # The PostgreSQL target (docs/targets-postgres.md): credentials come from the environment or a file.
    target_kind: str = DEFAULT_TARGET_KIND
    jdbc_url: str | None = None
    jdbc_connections: int = DEFAULT_JDBC_CONNECTIONS
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


def parse_args(argv: Sequence[str]) -> MergeJobSettings:
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
    parser.add_argument("--table-name-template", default=DEFAULT_TABLE_NAME_TEMPLATE)
    parser.add_argument("--target", action="append", default=[], help="CAPTURE_INSTANCE=CATALOG.NS.TABLE")
    parser.add_argument("--delete-mode", choices=DELETE_MODES, default=DEFAULT_DELETE_MODE)
    parser.add_argument("--write-mode", choices=WRITE_MODES, default=DEFAULT_WRITE_MODE)
    parser.add_argument(
        "--table-property",
        action="append",
        default=[],
        help="KEY=VALUE Iceberg table property for the tables the job creates",
    )
    parser.add_argument(
        "--partition-buckets",
        type=lambda value: None if value == AUTO_BUCKETS else int(value),
        default=DEFAULT_PARTITION_BUCKETS,
        help="bucket(N, first key column) partitioning of the tables the job creates, for the "
        "storage-partitioned MERGE; 'auto': N from their size; 0 (default): unpartitioned",
    )
    parser.add_argument(
        "--concurrent-tables",
        type=int,
        default=DEFAULT_CONCURRENT_TABLES,
        help="target tables merged at once in the application (with spark.scheduler.mode=FAIR, fairly)",
    )
    parser.add_argument(
        "--merge-strategy",
        choices=MERGE_STRATEGIES,
        default=DEFAULT_MERGE_STRATEGY,
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
    parser.add_argument("--target-kind", choices=TARGET_KINDS, default=DEFAULT_TARGET_KIND)
    parser.add_argument("--jdbc-url", help="JDBC URL of the target database, without credentials")
    parser.add_argument(
        "--jdbc-connections",
        type=int,
        default=DEFAULT_JDBC_CONNECTIONS,
        help="connections loading a batch at once",
    )
    parser.add_argument("--jdbc-credentials-file", help="file (mode 600) with user= and password= lines")
    return parser


def settings_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, manifests: Sequence[str], **more: Any
) -> MergeJobSettings:
    """Check the parsed arguments of ``target_parser`` and return the settings (``parser.error`` on a bad one).

    :param parser: the parser, for its errors.
    :param args: what it parsed.
    :param manifests: the manifest URIs to merge.
    :param more: further ``MergeJobSettings`` fields.
    """
    if args.target_kind == POSTGRES_TARGET and not args.jdbc_url:
        parser.error(
            f"--target-kind {POSTGRES_TARGET} needs --jdbc-url (e.g. jdbc:postgresql://host:5432/database)"
        )
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
    return MergeJobSettings(
        tuple(manifests),
        targets=targets,
        write_mode=args.write_mode,
        table_properties=properties,
        table_modes=table_modes,
        **as_given,
        **more,
    )
