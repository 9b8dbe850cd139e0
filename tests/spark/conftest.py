"""Fixtures for the Spark tests: one local[2] SparkSession with Iceberg on a Hadoop catalog."""

from __future__ import annotations

import importlib.resources
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"


def iceberg_runtime_jar() -> str:
    """Return the path of the Iceberg Spark runtime jar shipped by the dev extra's wheel."""
    return str(importlib.resources.files("snowpark_connect_deps_iceberg") / "jars" / ICEBERG_RUNTIME_JAR)


def iceberg_spark_conf(warehouse: Path | str, catalog: str = "lake") -> dict[str, str]:
    """Return the Spark settings for Iceberg's SQL extensions and a Hadoop catalog on ``warehouse``."""
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        f"spark.sql.catalog.{catalog}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{catalog}.type": "hadoop",
        f"spark.sql.catalog.{catalog}.warehouse": str(warehouse),
    }


@pytest.fixture(scope="session")
def spark_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Hadoop catalog warehouse directory (catalog ``lake``) of the shared session."""
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(spark_warehouse: Path) -> Iterator[object]:
    """One local[2] SparkSession with Iceberg for the whole test session."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("sqlserver-cdc-tests")
        .config("spark.jars", iceberg_runtime_jar())
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
    )
    for key, value in iceberg_spark_conf(spark_warehouse).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    # py4j logs at INFO while closing, after pytest has closed its captured streams.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    session.stop()
