"""Apache Airflow provider for Microsoft SQL Server Change Data Capture."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
