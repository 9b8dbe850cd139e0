"""
Several sources in one pipeline: the ``sources:`` settings, each source's own pipeline settings, and their checks.

Each entry of ``sources`` is one SQL Server database (on one connection) with its tables. The
factory builds one task group per source (pipeline/source_groups.py) from the settings
:func:`source_pipeline_settings` derives: the top-level settings with the source's connection,
database, tables, staging directory and target namespace. Per source, so that two databases that
both hold ``dbo.orders`` never meet:

- watermark Variables: ``sqlserver_cdc__<conn_id>__<database>__<capture instance>`` (state.py) are
  already keyed by connection and database; two sources may not list the same capture instance of
  the same connection and database;
- staging: ``<staging_path>/<source name>/<capture instance>/...`` unless the source names its own
  staging path; sources that share one may not list the same capture instance;
- targets: the namespace ``<merge.namespace>_<source name>`` unless the source names its own;
  sources that share a namespace may not declare the same target table.

A problem is refused when the settings are read, naming the source (``sources['eu'].tables``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_sqlserver_cdc.pipeline.identifiers import check_source_names
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import SettingsError, check_fields

#: ``pipeline.settings.ReplicationSettings`` (that module imports this one, so it is not imported here)
ReplicationSettings = Any

#: a source name: a task group id, a staging directory and the suffix of its default namespace
SOURCE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
#: Airflow's longest task id is 250 characters: leave room for the group's task ids after the name
MAX_SOURCE_NAME = 64


def source_key(name: Any) -> str:
    """The dotted key of the source ``name`` in error messages: ``sources['eu']``."""
    return f"sources[{name!r}]"


@dataclass(frozen=True)
class SourceGroupSettings:
    """
    One source of a pipeline with several: a database on a SQL Server connection, and its tables.

    Connection, database and time zone default to the top-level ``source`` section's.

    :param name: the source's name: its task group id, its staging directory, the suffix of its
        default target namespace, and part of its tables Variable ``<dag_id>__<name>__tables``.
    :param tables: the capture instances of this source to replicate.
    :param conn_id: Airflow connection of type ``mssql``; None: ``source.conn_id``.
    :param database: the source database; None: ``source.database`` (or the connection's schema).
    :param server_time_zone: IANA zone of the server; None: ``source.server_time_zone``.
    :param namespace: ``catalog.namespace`` (a PostgreSQL target: the schema) of this source's targets;
        None: ``<merge.namespace>_<name>``.
    :param targets: capture instance -> target table, as ``merge.tables`` for this source.
    :param change_tracking_tables: tables of this source read through Change Tracking.
    :param staging_path: where this source's windows go; None: ``<staging_path>/<name>``. Set it to
        the pipeline's ``staging_path`` to keep what a single-source pipeline kept there.
    """

    name: str
    tables: tuple[str, ...] = ()
    conn_id: str | None = None
    database: str | None = None
    server_time_zone: str | None = None
    namespace: str | None = None
    targets: Mapping[str, str] = field(default_factory=dict)
    change_tracking_tables: tuple[str, ...] = ()
    staging_path: str | None = None

    @property
    def key(self) -> str:
        """This source's dotted key in error messages."""
        return source_key(self.name)

    def __post_init__(self) -> None:
        check_fields(self, self.key)
        if not SOURCE_NAME.fullmatch(self.name) or len(self.name) > MAX_SOURCE_NAME:
            raise SettingsError(
                f"{self.key}.name",
                f"{self.name!r} is not a source name: letters, digits, '_' and '-', at most "
                f"{MAX_SOURCE_NAME} characters (it names a task group and a staging directory)",
            )
        for name, names in (("tables", self.tables), ("change_tracking_tables", self.change_tracking_tables)):
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated or not all(names):
                raise SettingsError(f"{self.key}.{name}", f"lists a name twice or an empty name: {names}")
            check_source_names(f"{self.key}.{name}", names)
        if not self.tables and not self.change_tracking_tables:
            raise SettingsError(
                f"{self.key}.tables",
                "required: the capture instances of this source (or change_tracking_tables)",
            )


def check_sources(settings: ReplicationSettings) -> None:
    """
    Refuse ``sources`` that would share a watermark, a staging directory or a target table; without
    ``sources``, refuse settings without tables.

    :param settings: the pipeline's settings.
    :raises SettingsError: naming the source and its key.
    """
    if not settings.sources:
        if not settings.tables and not settings.change_tracking.tables:
            raise SettingsError("tables", "required (it has no default); or list several sources in sources")
        return
    for key, value, where in (
        ("tables", settings.tables, "tables"),
        ("change_tracking.tables", settings.change_tracking.tables, "change_tracking_tables"),
        ("merge.tables", settings.merge.tables, "targets"),
    ):
        if value:
            raise SettingsError(
                key, f"must be empty when sources are listed: put them under each source's {where}"
            )
    if settings.merge.mode != "batch":
        raise SettingsError(
            "sources",
            f"merge.mode {settings.merge.mode!r} takes one source; with several sources merge.mode must be "
            "batch (or build one pipeline per source)",
        )
    names = [s.name for s in settings.sources]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SettingsError("sources", f"names a source twice: {', '.join(repeated)}")
    watermarks: dict[tuple[str, str | None, str], str] = {}
    staged: dict[tuple[str, str], str] = {}
    targets: dict[str, str] = {}
    for source in settings.sources:
        part = source_pipeline_settings(settings, source)
        for table in (*part.tables, *(t.replace(".", "_", 1) for t in part.change_tracking.tables)):
            ident = (part.source.conn_id, part.source.database, table)
            if ident in watermarks:
                raise SettingsError(
                    f"{source.key}.tables",
                    f"{table} of connection {ident[0]!r}, database {ident[1]!r} is listed by source "
                    f"{watermarks[ident]!r} too: both would keep its watermark Variable; list it once",
                )
            watermarks[ident] = source.name
            where = (part.staging_path.rstrip("/"), table)
            if where in staged:
                raise SettingsError(
                    f"{source.key}.staging_path",
                    f"{'/'.join(where)} is also the staging directory of source {staged[where]!r}: give one of "
                    "them a staging path of its own (or leave it unset: <staging_path>/<name>)",
                )
            staged[where] = source.name
        for table in declared_targets(part):
            if table in targets:
                raise SettingsError(
                    source.key,
                    f"its target table {table} is also the target of source {targets[table]!r}: give one of them a "
                    "namespace of its own (or leave namespace unset: <merge.namespace>_<name>)",
                )
            targets[table] = source.name


def source_pipeline_settings(
    settings: ReplicationSettings, source: SourceGroupSettings
) -> ReplicationSettings:
    """
    Return the settings of one source's pipeline: the top-level settings for this source alone.

    :param settings: the pipeline's settings, with ``sources``.
    :param source: one of ``settings.sources``.
    :raises SettingsError: the source's settings are invalid, naming the source.
    """
    own = settings.source
    try:
        return dataclasses.replace(
            settings,
            sources=(),
            tables=source.tables,
            staging_path=source.staging_path or f"{settings.staging_path.rstrip('/')}/{source.name}",
            source=dataclasses.replace(
                own,
                conn_id=source.conn_id or own.conn_id,
                database=source.database or own.database,
                server_time_zone=source.server_time_zone or own.server_time_zone,
            ),
            merge=dataclasses.replace(
                settings.merge,
                namespace=source.namespace or f"{settings.merge.namespace}_{source.name}",
                tables=source.targets,
            ),
            change_tracking=dataclasses.replace(
                settings.change_tracking, tables=source.change_tracking_tables
            ),
        )
    except SettingsError as err:
        raise SettingsError(_source_setting(source, err.key), err.problem) from None


#: a key of the derived settings -> the source's own setting it comes from
_SOURCE_FIELDS = (
    ("merge.tables", "targets"),
    ("change_tracking.tables", "change_tracking_tables"),
    ("merge.namespace", "namespace"),
    ("staging_path", "staging_path"),
    ("tables", "tables"),
)


def _source_setting(source: SourceGroupSettings, key: str) -> str:
    """The key of ``source``'s setting behind ``key`` of its derived settings (``sources['eu']: <key>`` else)."""
    for derived, own in _SOURCE_FIELDS:
        if key == derived or key.startswith(derived + "["):
            return f"{source.key}.{own}{key[len(derived) :]}"
    return f"{source.key}: {key}" if key else source.key


def declared_targets(settings: ReplicationSettings) -> list[str]:
    """The target tables a single-source pipeline declares (its capture instances' and tracked tables')."""
    from airflow_provider_sqlserver_cdc.assets import declared_target_tables

    tracked = (table.replace(".", "_", 1) for table in settings.change_tracking.tables)  # schema_table
    return declared_target_tables(
        (*settings.tables, *tracked),
        namespace=settings.merge.namespace,
        table_name_template=settings.merge.table_name_template,
        targets=dict(settings.merge.tables),
        database=settings.source.database,
    )
