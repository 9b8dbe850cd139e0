"""The file spark-submit runs: the merge job (``spark.merge``) with its command line.

Ship it with ``py_files`` = ``merge_job_py_files()`` (the job's modules as a zip), or install the
provider on the cluster; see docs/merge-job.md. Usage::

    spark-submit --py-files sqlserver-cdc-merge-....zip merge_job.py --manifest URI [--manifest URI ...]
        --namespace CATALOG.NAMESPACE [--table-name-template '{schema}_{table}']
        [--target CAPTURE_INSTANCE=CATALOG.NS.TABLE] [--delete-mode soft|hard]
        [--write-mode merge-on-read|copy-on-write] [--table-property KEY=VALUE ...]
"""

from __future__ import annotations

import sys

from airflow_provider_sqlserver_cdc.spark.merge.job import main

if __name__ == "__main__":
    sys.exit(main())
