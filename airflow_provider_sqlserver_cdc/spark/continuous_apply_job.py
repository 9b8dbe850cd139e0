"""The file spark-submit runs for the continuous apply application (``spark.continuous``); docs/continuous-apply.md.

Ship it with ``py_files`` = ``merge_job_py_files()`` (the same zip as the merge job), or install the
provider on the cluster. Usage::

    spark-submit --py-files sqlserver-cdc-merge-....zip continuous_apply_job.py --staging-path URI
        --namespace CATALOG.NAMESPACE [--poll-seconds 5] [--stale-after-seconds 60] [merge job options]
"""

from __future__ import annotations

import sys

from airflow_provider_sqlserver_cdc.spark.continuous.job import main

if __name__ == "__main__":
    sys.exit(main())
