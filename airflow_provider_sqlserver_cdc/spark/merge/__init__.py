"""The merge job: CDC windows (Parquet + ``_manifest.json``) merged into target tables with Spark.

``job.run`` reads and checks the windows (``window_reader``), plans each target's schema
(``spark_types``, ``schema_plan``) and hands each batch of windows to a target (``targets``),
which applies its net effect (``net_effect_frame``, ``statements``, ``key_filter``) together with
the applied LSN ranges. ``spark/merge_job.py`` is the file spark-submit runs. PySpark is imported
inside functions only: Airflow code imports these modules without it.
"""

from __future__ import annotations
