"""
Local Apache Iceberg for tests, the demo and benchmarks: the runtime jar, a Hadoop catalog's Spark
settings, and a local SparkSession built from them.

The settings are one plain dict so that the same values feed ``SparkSession.builder`` and
``SparkSubmitOperator`` / ``CdcSparkMergeOperator`` (``conf=``, with the jar as ``jars=``)::

    conf = iceberg_spark_conf(warehouse, catalog="lake")
    CdcSparkMergeOperator(..., jars=iceberg_runtime_jar(), conf=conf)
    spark = local_spark_session(conf, shuffle_partitions=8, driver_memory="6g")

The jar comes from the ``snowpark-connect-deps-iceberg`` wheel of the ``dev`` extra; a deployment
gets Iceberg from its cluster (or ``--packages``) instead.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_JAR_PACKAGE = "snowpark_connect_deps_iceberg"
"""The Python package (``snowpark-connect-deps-iceberg`` wheel, ``dev`` extra) that ships the jar."""

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
"""Iceberg 1.10.2 for Spark 3.5 / Scala 2.12, the Spark of pyspark 3.5."""

ICEBERG_SQL_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


def iceberg_runtime_jar() -> str:
    """
    Return the path of the Iceberg Spark runtime jar shipped by the ``dev`` extra.

    :raises FileNotFoundError: the wheel is not installed, or does not hold the expected jar.
    """
    spec = importlib.util.find_spec(ICEBERG_JAR_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"the Iceberg Spark runtime jar ships in the Python package {ICEBERG_JAR_PACKAGE}, which is "
            "not installed: install the dev extra (pip install -e '.[dev]', or `make venv`)"
        )
    jars = Path(spec.origin).parent / "jars"
    jar = jars / ICEBERG_RUNTIME_JAR
    if not jar.is_file():
        found = sorted(p.name for p in jars.glob("iceberg-spark-runtime-*.jar")) if jars.is_dir() else []
        raise FileNotFoundError(
            f"{ICEBERG_RUNTIME_JAR} is missing from {jars} (found: {', '.join(found) or 'none'}); "
            "reinstall the dev extra, whose pin of snowpark-connect-deps-iceberg ships it"
        )
    return str(jar)


def iceberg_spark_conf(
    warehouse: Path | str, catalog: str = "lake", *, cache_enabled: bool = True
) -> dict[str, str]:
    """
    Return the Spark settings for Iceberg's SQL extensions and a Hadoop catalog on ``warehouse``.

    The jar is not among them: give it as ``spark.jars`` (:func:`local_spark_session` does) or as
    the ``jars=`` of a spark-submit operator.

    :param warehouse: the catalog's warehouse directory (local path or Hadoop URI).
    :param catalog: the catalog's name in Spark SQL (tables are ``<catalog>.<namespace>.<table>``).
    :param cache_enabled: False makes every read load the table's current metadata, for a reader
        of tables that other processes commit to.
    """
    if not catalog or not catalog.replace("_", "").isalnum():
        raise ValueError(f"catalog name must be letters, digits and underscores, got {catalog!r}")
    conf = {
        "spark.sql.extensions": ICEBERG_SQL_EXTENSIONS,
        f"spark.sql.catalog.{catalog}": ICEBERG_SPARK_CATALOG,
        f"spark.sql.catalog.{catalog}.type": "hadoop",
        f"spark.sql.catalog.{catalog}.warehouse": str(warehouse),
    }
    if not cache_enabled:
        conf[f"spark.sql.catalog.{catalog}.cache-enabled"] = "false"
    return conf


def _relational_target_jars() -> list[str]:
    """The PostgreSQL JDBC driver when installed: one local session serves the relational target too."""
    from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresUnavailable, postgres_jdbc_jar

    try:
        return [postgres_jdbc_jar()]
    except PostgresUnavailable:
        return []


def local_spark_session(
    conf: Mapping[str, str],
    *,
    master: str = "local[2]",
    app_name: str = "sqlserver-cdc-local",
    shuffle_partitions: int = 2,
    driver_memory: str = "1g",
    log_level: str = "ERROR",
) -> SparkSession:
    """
    Build a local SparkSession with the Iceberg runtime jar (and the PostgreSQL JDBC driver when
    installed), the web UI off and ``conf``.

    Spark runs one context per process: when one is running already, this returns a new session on
    it (``newSession``: catalogs and SQL settings of its own, so a catalog named like another
    session's points where ``conf`` says) and only the runtime settings of ``conf`` take effect (the
    jar, master and memory do not). Give it back with :func:`release_local_spark_session`.

    :param conf: settings applied last, e.g. :func:`iceberg_spark_conf` or a DAG's ``spark.conf``.
    :param master: the Spark master.
    :param app_name: the application name.
    :param shuffle_partitions: ``spark.sql.shuffle.partitions``.
    :param driver_memory: ``spark.driver.memory`` (only before the JVM starts).
    :param log_level: the log level of the Spark context (py4j's Python logger stays at WARNING or above).
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        session = SparkSession.builder.getOrCreate().newSession()
        _SHARING.append(id(session))
        for key, value in {"spark.sql.shuffle.partitions": str(shuffle_partitions), **conf}.items():
            _set_runtime_conf(session, key, value)
        return session
    # Python workers run in this interpreter (the venv), not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", ",".join([iceberg_runtime_jar(), *_relational_target_jars()]))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    _STARTED[id(session)] = len(_SHARING)
    session.sparkContext.setLogLevel(log_level)
    # py4j logs at INFO while closing, possibly after pytest has closed its captured streams.
    py4j_log = logging.getLogger("py4j")
    if py4j_log.getEffectiveLevel() < logging.WARNING:
        py4j_log.setLevel(logging.WARNING)
    return session


# Sessions that started the process's Spark context (id -> sessions shared before), and sessions
# handed out on a context that was running already.
_STARTED: dict[int, int] = {}
_SHARING: list[int] = []


def _set_runtime_conf(session: SparkSession, key: str, value: str) -> None:
    """Set one setting on a session of a running context; static and core settings stay as they are."""
    try:
        session.conf.set(key, value)
    except Exception as err:  # static SQL or Spark core settings: fixed when the context started
        if "CANNOT_MODIFY_CONFIG" not in str(err) and "static" not in str(err).lower():
            raise


def release_local_spark_session(session: SparkSession) -> None:
    """
    Stop the Spark context if ``session`` started it and no session was handed out on it since.

    A session on a context that was running already (another fixture's) leaves it running, as does
    the starter when other sessions still share the context (the process's exit stops it).

    :param session: a session from :func:`local_spark_session`.
    """
    shared_before = _STARTED.pop(id(session), None)
    if shared_before is not None and len(_SHARING) == shared_before:
        session.stop()
