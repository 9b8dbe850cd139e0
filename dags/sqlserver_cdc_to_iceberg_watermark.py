"""
Replicate SQL Server tables into Apache Iceberg through CDC, from the stored watermark to now.

The ``watermark`` window mode: each run takes, per capture instance, every change after the
last merged LSN (the watermark Variable) up to the max LSN when the run starts, whatever the
run's data interval. Use it for runs triggered on demand or by events, or to catch up after an
outage in one run. Settings and the table list are those of ``sqlserver_cdc_to_iceberg``
(``sqlserver_cdc_config.yaml``; the Variable ``sqlserver_cdc_to_iceberg_watermark__tables``
overrides the list). A capture instance without a watermark is snapshotted first.

Why these settings are safe:

- **max_active_runs = 1 is required here**, not only cheaper: a run's window starts at the
  watermark the previous run committed, so two concurrent runs would extract overlapping
  windows. (The merge would still apply each change once, by LSN position, but the work would
  be done twice.)
- **Retries** (3) are idempotent: a retried extract re-reads the same watermark (it moves only
  after the merge) and rewrites its window; the merge skips windows already applied; the
  watermark only moves forward.
- **Backfills do not apply**: the window does not depend on the data interval. Use the
  interval DAG (``sqlserver_cdc_to_iceberg``) for backfills (docs/backfill.md).
- **Sensor:** waits until the max LSN is above the watermark (the capture job also advances
  it in quiet periods), rescheduling, one hour at most.
"""

from __future__ import annotations

from airflow.sdk import DAG
from sqlserver_cdc_pipeline import ReplicationSettings, add_replication_tasks

DAG_ID = "sqlserver_cdc_to_iceberg_watermark"
settings = ReplicationSettings.load()

with DAG(
    DAG_ID,
    description="SQL Server CDC from the stored watermark to the current max LSN, merged into Iceberg",
    schedule=settings.raw.get("watermark_schedule", "*/15 * * * *"),
    start_date=settings.start_date,
    catchup=False,
    max_active_runs=1,
    default_args=settings.default_args(),
    doc_md=__doc__,
    tags=["sqlserver", "cdc", "iceberg", "example"],
) as dag:
    add_replication_tasks(settings, dag_id=DAG_ID, window_mode="watermark")
