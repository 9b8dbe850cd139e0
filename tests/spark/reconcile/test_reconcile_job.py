"""The reconcile job's refusal of targets it cannot compare with the source's values in clear (no Spark needed)."""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.column_masking import masking_note
from airflow_provider_sqlserver_cdc.spark.reconcile.job import refusal

COLUMNS = ["id", "email", "score"]


def test_a_target_in_clear_with_every_column_is_compared():
    fields = {"id": "SQL Server int", "email": "SQL Server nvarchar(100)", "score": None}
    assert refusal("lake.cdc.t", fields, COLUMNS) is None


def test_a_masked_column_is_refused_naming_it_and_the_remedy():
    hashed = "SQL Server char(64)" + masking_note({"masked": "hash", "source_type": "nvarchar(100)"})
    message = refusal("lake.cdc.t", {"id": "SQL Server int", "email": hashed, "score": None}, COLUMNS)
    assert message is not None
    assert message.startswith("lake.cdc.t holds email masked:")
    assert "repair would write them to the target in clear" in message and "docs/reconcile.md" in message


def test_a_column_the_target_lacks_is_refused():
    message = refusal("lake.cdc.t", {"id": "SQL Server int", "score": None}, COLUMNS)
    assert message is not None and "lacks email (dropped by column masking, or not merged yet)" in message
