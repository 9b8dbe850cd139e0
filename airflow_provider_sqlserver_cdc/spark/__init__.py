"""The Spark side of the provider: the merge job and the table maintenance job that spark-submit runs.

``MERGE_JOB_PATH`` is the application file to give ``SparkSubmitOperator(application=...)``;
``merge_job_py_files()`` builds the zip of the job's modules to give as ``py_files`` (not needed
when the provider is installed on the cluster). Importing this package imports neither PySpark
nor Airflow.
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_sqlserver_cdc.spark.job_archive import merge_job_py_files, with_job_modules

#: Absolute path of the PySpark application (``merge_job.py``) inside the installed package.
MERGE_JOB_PATH: str = str(Path(__file__).resolve().parent / "merge_job.py")
#: Absolute path of the table maintenance job (``maintenance_job.py``); the same zip carries its modules.
MAINTENANCE_JOB_PATH: str = str(Path(__file__).resolve().parent / "maintenance_job.py")
#: Absolute path of the continuous apply application (``continuous_apply_job.py``); the same zip carries it.
CONTINUOUS_APPLY_JOB_PATH: str = str(Path(__file__).resolve().parent / "continuous_apply_job.py")
#: Absolute path of the reconcile comparison's target side (``reconcile_job.py``); the same zip carries it.
RECONCILE_JOB_PATH: str = str(Path(__file__).resolve().parent / "reconcile_job.py")

__all__ = [
    "CONTINUOUS_APPLY_JOB_PATH",
    "MAINTENANCE_JOB_PATH",
    "MERGE_JOB_PATH",
    "RECONCILE_JOB_PATH",
    "merge_job_py_files",
    "with_job_modules",
]
