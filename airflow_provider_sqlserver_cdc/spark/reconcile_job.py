"""The file spark-submit runs for the reconcile comparison's target side (``spark.reconcile``).

Ship it with ``py_files`` = ``merge_job_py_files()`` (the jobs' modules as a zip); see docs/reconcile.md::

    spark-submit --py-files sqlserver-cdc-merge-....zip reconcile_job.py --request URI --result URI
"""

from __future__ import annotations

import sys

from airflow_provider_sqlserver_cdc.spark.reconcile.job import main

if __name__ == "__main__":
    sys.exit(main())
