"""The Spark side of the provider: the merge job that spark-submit runs.

``MERGE_JOB_PATH`` is the application file to give ``SparkSubmitOperator(application=...)``.
The job is one self-contained file (standard library + PySpark), so it needs no ``py_files``.
Importing this package imports neither PySpark nor Airflow.
"""

from __future__ import annotations

from pathlib import Path

#: Absolute path of the PySpark application (``merge_job.py``) inside the installed package.
MERGE_JOB_PATH: str = str(Path(__file__).resolve().parent / "merge_job.py")

__all__ = ["MERGE_JOB_PATH"]
