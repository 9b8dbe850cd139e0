"""
Replicate SQL Server tables into Apache Iceberg through CDC, one data interval per run.

Tables, connection, staging path, Spark and target settings come from
``sqlserver_cdc_config.yaml`` next to this file; the Airflow Variable
``sqlserver_cdc_to_iceberg__tables`` (a JSON list of capture instances) replaces the table list
at run time. Per capture instance the run either snapshots it (no watermark yet: first run, or
after the watermark Variable was deleted to re-snapshot) or waits for the capture job
(LsnSensor) and extracts the changes committed in the run's data interval
(CdcExtractOperator); one Spark job then merges every window into the Iceberg tables and the
watermarks move forward.

Why these settings are safe:

- **Windows are pure functions of the data interval.** A re-run, a retry or a backfill of an
  interval extracts the identical LSN range into the same directory (its files replaced), and
  the merge applies a change only when its LSN position is newer than the row's, skipping a
  window already recorded in the table's Iceberg snapshot summary. So ``retries`` (3, with a
  delay) on every task cannot lose or duplicate data, and neither can
  ``airflow backfill create`` over past intervals, in any order (docs/backfill.md).
- **max_active_runs = 1.** Correctness does not depend on it (see above), but two runs merging
  into the same Iceberg tables at once would conflict and retry their commits; one run at a
  time keeps Spark busy once per interval. Backfills take ``--max-active-runs`` themselves.
- **Sensor:** ``reschedule`` mode (no worker slot held), poking every minute, timing out after
  an hour without retries: a capture job that is that far behind (SQL Server Agent stopped) is
  an operational problem the timeout message describes (job state, lag), not a glitch.
- **Timeouts:** extract 30 min, merge 60 min (``execution_timeout``), far above a normal
  interval's work, so only a hung task is stopped; its retry is idempotent.
- **catchup = False** by default; past intervals are loaded with ``airflow backfill create``.
- **Watermarks** only move forward, and only after the merge succeeded
  (``commit_watermarks``); a backfill never moves them back.

Hourly by default; set ``SQLSERVER_CDC_SCHEDULE`` (or ``schedule`` in the YAML) to any cron,
e.g. ``* * * * *`` for minutely runs, which the test suite runs. The schedule is a
``CronDataIntervalTimetable`` whatever ``[scheduler] create_cron_data_intervals`` says: a run
of the interval ending at 10:00 covers [09:00, 10:00), which is what the windows are cut from.
"""

from __future__ import annotations

from airflow.sdk import DAG, CronDataIntervalTimetable
from sqlserver_cdc_pipeline import ReplicationSettings, add_replication_tasks

DAG_ID = "sqlserver_cdc_to_iceberg"
settings = ReplicationSettings.load()

with DAG(
    DAG_ID,
    description="SQL Server CDC -> Parquet windows -> Spark MERGE into Iceberg, one data interval per run",
    # Explicitly a data-interval timetable: with Airflow 3's default
    # ([scheduler] create_cron_data_intervals = False) a cron string gives runs an empty data
    # interval, and interval-mode windows would be empty.
    schedule=CronDataIntervalTimetable(settings["schedule"], timezone="UTC"),
    start_date=settings.start_date,
    catchup=False,
    max_active_runs=int(settings.raw.get("max_active_runs", 1)),
    default_args=settings.default_args(),
    doc_md=__doc__,
    tags=["sqlserver", "cdc", "iceberg", "example"],
) as dag:
    add_replication_tasks(settings, dag_id=DAG_ID, window_mode="interval")
