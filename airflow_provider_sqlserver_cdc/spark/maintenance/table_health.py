"""A table's health figures, read from Iceberg's metadata tables and metadata (no data file is read but for tombstones)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_sqlserver_cdc.spark.merge.change_columns import DELETED
from airflow_provider_sqlserver_cdc.spark.merge.statements import quote_table
from airflow_provider_sqlserver_cdc.spark.merge.targets.iceberg_state import state_entries

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_sqlserver_cdc.spark.maintenance.arguments import Thresholds

#: Iceberg's default: a data file under 3/4 of the target size is one ``rewrite_data_files`` rewrites.
SMALL_FILE_RATIO = 0.75
#: A light compaction leaves data files of at least 1/16 of the target size alone (8 MB of 128 MB).
LARGE_FILE_RATIO = 1 / 16
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024


@dataclass(frozen=True)
class TableHealth:
    """What maintenance looks at and reports.

    :param data_files: live data files.
    :param data_bytes: their bytes.
    :param small_files: data files under 3/4 of the table's target file size.
    :param delete_files: live position- and equality-delete files.
    :param snapshots: snapshots in the metadata.
    :param manifests: manifests of the current snapshot.
    :param metadata_bytes: size of the current metadata.json.
    :param state_chars: characters of the applied state kept in the table properties.
    :param records: rows of the current snapshot (tombstones included; deletes not yet applied included).
    :param position_deletes: rows of the live position-delete files (rows deleted but still in data files).
    """

    data_files: int
    data_bytes: int
    small_files: int
    delete_files: int
    snapshots: int
    manifests: int
    metadata_bytes: int
    state_chars: int
    records: int
    position_deletes: int = 0

    @property
    def deleted_ratio(self) -> float:
        """The share of the data files' rows that position deletes remove (0 without rows)."""
        return self.position_deletes / self.records if self.records else 0.0

    def needs_maintenance(self, thresholds: Thresholds) -> list[str]:
        """Return the figures at or above their threshold (empty: the table is fine).

        :param thresholds: the job's thresholds.
        """
        checks = [
            ("delete files", self.delete_files, thresholds.delete_files),
            ("small data files", self.small_files, thresholds.small_files),
            ("snapshots", self.snapshots, thresholds.snapshots),
            ("metadata.json bytes", self.metadata_bytes, thresholds.metadata_bytes),
        ]
        return [f"{name} {value} >= {limit}" for name, value, limit in checks if value >= limit]

    def as_dict(self) -> dict[str, int]:
        """The figures by name, for the log and the result line."""
        return asdict(self)


def target_file_size(table: Any) -> int:
    """Return the table's ``write.target-file-size-bytes`` (Iceberg's default when unset).

    :param table: the Iceberg ``Table`` (Java, through py4j).
    """
    value = table.properties().get("write.target-file-size-bytes")
    return int(value) if value is not None else DEFAULT_TARGET_FILE_SIZE


def large_file_bytes(table: Any, data_bytes: int) -> int:
    """Return the size from which a light compaction leaves a data file alone.

    1/16 of the target size (8 MB of 128 MB), or a quarter of the table's live data when that is less:
    a small table's one compacted file is large for it, though far under the target size.

    :param table: the Iceberg ``Table``.
    :param data_bytes: the bytes of the table's live data files.
    """
    return max(1, min(int(target_file_size(table) * LARGE_FILE_RATIO), data_bytes // 4))


def metadata_file_bytes(table: Any) -> int:
    """Return the size of the table's current metadata.json, through the table's FileIO.

    :param table: the Iceberg ``Table``.
    """
    location = table.operations().current().metadataFileLocation()
    return int(table.io().newInputFile(location).getLength())


def read_health(spark: SparkSession, table: str, iceberg: Any) -> TableHealth:
    """Return the table's figures.

    :param table: the dotted table name.
    :param iceberg: its Iceberg ``Table``.
    """
    iceberg.refresh()
    name = quote_table(table)
    small = int(target_file_size(iceberg) * SMALL_FILE_RATIO)
    files = spark.sql(
        f"SELECT content, count(*) AS files, coalesce(sum(file_size_in_bytes), 0) AS bytes, "
        f"coalesce(sum(CASE WHEN file_size_in_bytes < {small} THEN 1 ELSE 0 END), 0) AS small, "
        f"coalesce(sum(record_count), 0) AS records FROM {name}.files GROUP BY content"
    ).collect()
    by_content = {row["content"]: row for row in files}
    data = by_content.get(0)
    current = iceberg.currentSnapshot()
    summary = current.summary() if current is not None else {}
    records, position_deletes = summary.get("total-records"), summary.get("total-position-deletes")
    return TableHealth(
        data_files=int(data["files"]) if data else 0,
        data_bytes=int(data["bytes"]) if data else 0,
        small_files=int(data["small"]) if data else 0,
        delete_files=sum(int(row["files"]) for content, row in by_content.items() if content != 0),
        snapshots=sum(1 for _ in iceberg.snapshots()),
        manifests=int(spark.sql(f"SELECT count(*) AS n FROM {name}.manifests").first()["n"]),
        metadata_bytes=metadata_file_bytes(iceberg),
        state_chars=sum(len(v) for v in state_entries(iceberg.properties()).values()),
        records=int(records) if records is not None else 0,
        position_deletes=int(position_deletes) if position_deletes is not None else 0,
    )


def tombstone_count(spark: SparkSession, table: str) -> int:
    """Return the soft-deleted rows of the table (a scan of one boolean column).

    :param table: the dotted table name.
    """
    return int(spark.sql(f"SELECT count(*) AS n FROM {quote_table(table)} WHERE {DELETED}").first()["n"])
