"""Manifest ``columns`` entries as the window writer describes them, for tests that write a manifest by hand."""

from __future__ import annotations

from typing import Any

from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn, CaptureInstance
from airflow_provider_sqlserver_cdc.lsn import Lsn
from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_descriptions


def int_key_column(name: str) -> dict[str, Any]:
    """The entry of a ``NOT NULL int`` key column at ordinal 1 (``parquet.type_mapping.column_descriptions``)."""
    column = CapturedColumn(name, 1, "int", 4, 10, 0, nullable=False)
    instance = CaptureInstance("dbo_t", "dbo", "t", Lsn(bytes(10)), columns=(column,), key_columns=(name,))
    return column_descriptions(instance)[0]
