"""Test-side writer of CDC windows in the format of docs/architecture.md (Parquet + _manifest.json).

The one place tests create windows by hand (a contract test in ``tests/spark/merge/test_job.py`` uses the
extraction's own writer).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.window.manifest import MANIFEST_NAME, zero_operation_counts
from airflow_provider_sqlserver_cdc.window.net_effect import OPERATION_NAMES

EPOCH = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)


def lsn(value: int) -> bytes:
    """Return the 10-byte LSN for an integer."""
    return Lsn.from_int(value).value


def lsn_hex(value: int) -> str:
    """Return the 0x + 20 hex digit form of an LSN integer."""
    return Lsn.from_int(value).hex


@dataclass(frozen=True)
class Column:
    """A captured column: name, SQL type details and Arrow type, as the manifest describes it."""

    name: str
    sql_type: str
    arrow_type: pa.DataType
    nullable: bool = True
    max_length: int = 0
    precision: int = 0
    scale: int = 0

    def manifest_entry(self, ordinal: int) -> dict[str, Any]:
        return {
            "name": self.name,
            "ordinal": ordinal,
            "sql_type": self.sql_type,
            "max_length": self.max_length,
            "precision": self.precision,
            "scale": self.scale,
            "nullable": self.nullable,
            "arrow_type": str(self.arrow_type),
        }


INT_KEY = Column("id", "int", pa.int32(), nullable=False, max_length=4, precision=10)
NAME = Column("name", "nvarchar", pa.string(), max_length=100)
AMOUNT = Column("amount", "decimal", pa.decimal128(10, 2), max_length=9, precision=10, scale=2)
ORDERS_COLUMNS = (INT_KEY, NAME, AMOUNT)


@dataclass(frozen=True)
class Row:
    """One change-table row: position, operation and captured values."""

    start_lsn: int
    seqval: int
    operation: int
    values: dict[str, Any]
    commit_time: dt.datetime | None = None
    update_mask: bytes | None = None  # None: every captured column's bit set


@dataclass
class WindowSpec:
    """Everything a window directory is made from."""

    capture_instance: str
    from_lsn: int
    to_lsn: int
    rows: Sequence[Row]
    columns: Sequence[Column] = ORDERS_COLUMNS
    key_columns: Sequence[str] = ("id",)
    kind: str = "changes"
    source: dict[str, str] = field(default_factory=lambda: {"server": "sim:1433", "database": "shop"})
    rows_per_file: int = 1_000_000
    applied_through: int | None = None


def write_window(base: Path | str, spec: WindowSpec) -> str:
    """Write a window (Parquet files, then ``_manifest.json``) and return the manifest's path."""
    directory = Path(base) / spec.capture_instance / f"{lsn_hex(spec.from_lsn)}_{lsn_hex(spec.to_lsn)}"
    directory.mkdir(parents=True, exist_ok=True)
    schema = pa.schema(
        [
            pa.field("__$start_lsn", pa.binary()),
            pa.field("__$seqval", pa.binary()),
            pa.field("__$operation", pa.int32()),
            pa.field("__$update_mask", pa.binary()),
            pa.field("__$commit_time", pa.timestamp("us", tz="UTC")),
            *[pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in spec.columns],
        ]
    )
    files = []
    rows = list(spec.rows)
    for number, start in enumerate(range(0, len(rows), spec.rows_per_file)):
        chunk = rows[start : start + spec.rows_per_file]
        table = _table(chunk, spec.columns, schema)
        name = f"part-{number:05d}.parquet"
        pq.write_table(table, directory / name, compression="zstd")
        files.append({"path": name, "rows": len(chunk), "bytes": (directory / name).stat().st_size})
    counts = zero_operation_counts()
    for row in rows:
        counts[OPERATION_NAMES[row.operation]] += 1
    schema_name, _, table_name = spec.capture_instance.partition("_")
    manifest = {
        "format_version": 1,
        "kind": spec.kind,
        "capture_instance": spec.capture_instance,
        "source": {"schema": schema_name, "table": table_name, **spec.source},
        "from_lsn": lsn_hex(spec.from_lsn),
        "to_lsn": lsn_hex(spec.to_lsn),
        "from_time": EPOCH.isoformat(),
        "to_time": (EPOCH + dt.timedelta(hours=1)).isoformat(),
        "mode": "snapshot" if spec.kind == "snapshot" else "interval",
        "row_filter_option": "all update old",
        "key_columns": list(spec.key_columns),
        "columns": [c.manifest_entry(i + 1) for i, c in enumerate(spec.columns)],
        "files": files,
        "row_count": len(rows),
        "operation_counts": counts,
        "created_at": dt.datetime.now(dt.UTC).isoformat(),
        "dag_id": "test",
        "run_id": "test",
    }
    if spec.applied_through is not None:
        manifest["applied_through"] = lsn_hex(spec.applied_through)
    temporary = directory / f"{MANIFEST_NAME}.tmp"
    temporary.write_text(json.dumps(manifest, indent=2))
    temporary.replace(directory / MANIFEST_NAME)
    return str(directory / MANIFEST_NAME)


def full_mask(column_count: int) -> bytes:
    """The update mask with the bits of ``column_count`` captured columns set (SQL Server's layout)."""
    return ((1 << column_count) - 1).to_bytes(max(1, (column_count + 7) // 8), "big")


def _table(rows: Sequence[Row], columns: Sequence[Column], schema: pa.Schema) -> pa.Table:
    data: dict[str, list[Any]] = {
        "__$start_lsn": [lsn(r.start_lsn) for r in rows],
        "__$seqval": [lsn(r.seqval) for r in rows],
        "__$operation": [r.operation for r in rows],
        "__$update_mask": [full_mask(len(columns)) if r.update_mask is None else r.update_mask for r in rows],
        "__$commit_time": [r.commit_time or EPOCH + dt.timedelta(seconds=r.start_lsn % 3600) for r in rows],
    }
    for column in columns:
        data[column.name] = [r.values.get(column.name) for r in rows]
    return pa.Table.from_pydict(data, schema=schema)


class ChangeLog:
    """Builds change rows with increasing LSNs, as a source table's log would hold them."""

    def __init__(self, start: int = 0x100) -> None:
        self.lsn = start

    def transaction(self, *operations: tuple[int, dict[str, Any]]) -> list[Row]:
        """Return the rows of one transaction: one commit LSN, seqval per row change.

        An update is given as operation 3 then operation 4; they share a seqval.
        """
        self.lsn += 0x10
        rows = []
        seqval = self.lsn * 0x100
        for operation, values in operations:
            if operation != 4:
                seqval += 1
            rows.append(Row(self.lsn, seqval, operation, dict(values)))
        return rows

    def insert(self, **values: Any) -> list[Row]:
        return self.transaction((2, values))

    def update(self, before: dict[str, Any], **after: Any) -> list[Row]:
        return self.transaction((3, before), (4, {**before, **after}))

    def delete(self, **values: Any) -> list[Row]:
        return self.transaction((1, values))


def flatten(groups: Iterable[Iterable[Row]]) -> list[Row]:
    """Concatenate the rows of several transactions."""
    return [row for group in groups for row in group]


def rolling_windows(
    base: Path,
    count: int,
    *,
    keys: int,
    updates: int,
    deletes: int,
    updated_name: str = "u{number}",
    log: ChangeLog | None = None,
) -> list[str]:
    """
    Write ``count`` windows of ``dbo_orders`` (``id``, ``name`` ``n<id>``, ``amount`` ``id``); return their manifests.

    Window ``number`` inserts ``keys`` new keys; from the second window on it also updates the first
    ``updates`` keys of the previous window (``name`` set to ``updated_name`` formatted with ``number``)
    and deletes the ``deletes`` keys after them.
    """
    log = log or ChangeLog()
    manifests = []
    for number in range(count):
        start = log.lsn + 1
        new = range(number * keys, number * keys + keys)
        rows = [log.insert(id=k, name=f"n{k}", amount=decimal.Decimal(k)) for k in new]
        if number:
            old = range((number - 1) * keys, number * keys)
            name = updated_name.format(number=number)
            rows += [
                log.update({"id": k, "name": f"n{k}", "amount": decimal.Decimal(k)}, name=name)
                for k in old[:updates]
            ]
            rows += [
                log.delete(id=k, name=f"n{k}", amount=decimal.Decimal(k))
                for k in old[updates : updates + deletes]
            ]
        manifests.append(write_window(base, WindowSpec("dbo_orders", start, log.lsn, flatten(rows))))
    return manifests
