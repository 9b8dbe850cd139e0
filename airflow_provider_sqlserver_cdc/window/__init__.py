"""
The window contract: what one run extracts, the files it writes and the XCom it hands on.

Modules: ``change_window`` (the window that flows sensor -> extract -> merge -> watermark, its
XCom form and the watermark key), ``planning`` (which LSN range a run extracts) and
``extraction`` (writing a window's Parquet files and manifest). This package file imports
nothing, so that importing one light module (e.g. ``change_window``) never pulls in pyarrow,
Airflow or PySpark.
"""
