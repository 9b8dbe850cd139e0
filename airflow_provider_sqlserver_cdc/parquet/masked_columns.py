"""Apply a table's column masking (``column_masking``) to Arrow schemas and record batches before Parquet."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_sqlserver_cdc.parquet.type_mapping import column_descriptions

if TYPE_CHECKING:
    from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
    from airflow_provider_sqlserver_cdc.column_masking import ColumnMasking, TableMasking


def instance_masking(masking: ColumnMasking | None, instance: CaptureInstance) -> TableMasking | None:
    """
    Return the masking of a capture instance's source table, checked against its columns (None: no rule).

    :param masking: the pipeline's masking rules, or None.
    :param instance: the capture instance with its columns and key columns loaded.
    :raises ColumnMaskingError: naming the table and column of a rule that cannot apply.
    """
    if masking is None:
        return None
    return masking.for_table(
        instance.source_schema,
        instance.source_table,
        column_descriptions(instance),
        instance.key_columns,
        source_types={c.name: c.describe() for c in instance.columns},
    )


def masked_schema(schema: pa.Schema, masking: TableMasking) -> pa.Schema:
    """
    Return the schema the staging holds: dropped columns left out, hashed and masked non-strings as strings.

    A masked field keeps its ``sql_type`` metadata and gains ``masked`` (the rule, never the salt).

    :param schema: the schema of the batches as read.
    :param masking: the table's masking.
    """
    fields = []
    for f in schema:
        rule = masking.rule(f.name)
        if rule is None:
            fields.append(f)
            continue
        if rule.method == "drop":
            continue
        metadata = {**(f.metadata or {}), b"masked": rule.spec.encode()}
        if rule.method in ("hash", "mask"):
            fields.append(pa.field(f.name, pa.string(), nullable=True, metadata=metadata))
        else:
            fields.append(f.with_metadata(metadata))
    return pa.schema(fields, metadata=schema.metadata)


def mask_batch(batch: pa.RecordBatch, masking: TableMasking, schema: pa.Schema) -> pa.RecordBatch:
    """
    Return ``batch`` with its masked columns replaced and its dropped ones left out.

    :param batch: a batch as read (every column in clear).
    :param masking: the table's masking.
    :param schema: :func:`masked_schema` of the batch's schema.
    """
    arrays = []
    for f in schema:
        values = batch.column(f.name)
        rule = masking.rule(f.name)
        if rule is None:
            arrays.append(values)
        elif rule.method == "truncate":
            arrays.append(pc.utf8_slice_codeunits(values, 0, rule.length))
        else:
            arrays.append(pa.array(masking.mask_values(rule, values.to_pylist()), pa.string()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def masked_descriptions(masking: TableMasking | None, instance: CaptureInstance) -> list[dict[str, Any]]:
    """Return the manifest's ``columns`` of an instance as the staging holds them (masking applied, if any).

    :param masking: the table's masking, or None.
    :param instance: the capture instance with its columns loaded.
    """
    columns = column_descriptions(instance)
    return masking.manifest_columns(columns) if masking is not None else columns
