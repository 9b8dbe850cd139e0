"""The file spark-submit runs: the table maintenance job (``spark.maintenance``) with its command line.

Ship it with ``py_files`` = ``merge_job_py_files()`` (the zip holds both jobs' modules). Usage::

    spark-submit --py-files sqlserver-cdc-merge-....zip maintenance_job.py --namespace CATALOG.NAMESPACE
        [--table CATALOG.NS.TABLE ...] [--min-delete-files N] [--min-small-files N] [--min-snapshots N]
        [--min-metadata-bytes N] [--force] [--snapshot-retention-hours H] [--retain-last N]
        [--orphan-age-hours H] [--cdc-min-lsn CAPTURE_INSTANCE=0x... ...] [--tombstone-margin-hours H]
"""

from __future__ import annotations

import sys

from airflow_provider_sqlserver_cdc.spark.maintenance.job import main

if __name__ == "__main__":
    sys.exit(main())
