"""The ``masking:`` section of the pipeline settings (docs/column-masking.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_sqlserver_cdc.column_masking import ColumnMaskingError, parse_rules
from airflow_provider_sqlserver_cdc.pipeline.settings_fields import Section, SettingsError


@dataclass(frozen=True)
class MaskingSettings(Section):
    """
    Column masking: personal-data columns hashed, masked, truncated or dropped before Parquet is written.

    :param columns: ``{"schema.table.column": rule}`` with rule ``hash`` (salted SHA-256, hex; keys may be
        hashed and still merge), ``mask`` / ``mask(text)``, ``truncate(n)`` (strings) or ``drop``.
        Default: none, every column in clear.
    :param salt_conn_id: the Airflow connection (a secrets backend serves it too) whose password is the
        salt of ``hash``; required when a rule hashes. Read by the extract and snapshot tasks only.
    """

    key: ClassVar[str] = "masking"
    columns: Mapping[str, str] = field(default_factory=dict)
    salt_conn_id: str | None = None

    def check(self) -> None:
        """Refuse malformed rules, and ``hash`` without a salt connection."""
        try:
            tables = parse_rules(self.columns)
        except ColumnMaskingError as err:
            raise SettingsError(f"{self.key}.columns", str(err)) from None
        hashes = any(r.method == "hash" for rules in tables.values() for r in rules)
        self._require(
            "salt_conn_id",
            bool(self.salt_conn_id) or not hashes,
            "is required when a column is hashed: the id of an Airflow connection whose password is the salt",
        )

    def operator_arguments(self) -> dict[str, Any]:
        """The extract and snapshot operators' masking arguments (none when nothing is masked)."""
        if not self.columns:
            return {}
        return {"column_masking": dict(self.columns), "masking_salt_conn_id": self.salt_conn_id}
