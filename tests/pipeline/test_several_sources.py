"""Several sources in one DAG (issue 35 item 5): the ``sources`` settings, their checks, one task group per source."""

from __future__ import annotations

import datetime as dt
import inspect
from typing import Any

import pytest

from airflow_provider_sqlserver_cdc.pipeline import (
    ReplicationSettings,
    SettingsError,
    cdc_continuous_apply_dag,
    cdc_replication_dag,
    cdc_replication_task_group,
    retention_headroom_dag,
)
from airflow_provider_sqlserver_cdc.pipeline.run_outcome import failure_lines, outcome_message
from airflow_provider_sqlserver_cdc.pipeline.source_settings import source_pipeline_settings

EU = {"name": "eu", "database": "shop_eu", "tables": ["dbo_orders", "dbo_customers"]}
US = {"name": "us", "conn_id": "us_server", "database": "shop", "tables": ["dbo_orders"]}
BASE: dict[str, Any] = {
    "staging_path": "s3://bucket/staging/",
    "source": {"conn_id": "shop", "server_time_zone": "Europe/Berlin"},
    "merge": {"namespace": "lake.cdc"},
    "spark": {"jars": "/jars/iceberg.jar"},
}


def settings(*sources: dict[str, Any], **overrides: Any) -> ReplicationSettings:
    return ReplicationSettings.from_mapping(
        {**BASE, "sources": list(sources or (EU, US)), **overrides}, environ={}
    )


def test_each_source_gets_its_own_connection_staging_namespace_and_tables() -> None:
    s = settings()
    eu, us = (source_pipeline_settings(s, source) for source in s.sources)
    # Connection and time zone default to the top-level source's; the database is the source's own.
    assert (eu.source.conn_id, eu.source.database, eu.source.server_time_zone) == (
        "shop",
        "shop_eu",
        "Europe/Berlin",
    )
    assert (us.source.conn_id, us.source.database) == ("us_server", "shop")
    assert (eu.staging_path, us.staging_path) == ("s3://bucket/staging/eu", "s3://bucket/staging/us")
    assert (eu.merge.namespace, us.merge.namespace) == ("lake.cdc_eu", "lake.cdc_us")
    assert (eu.tables, us.tables) == (("dbo_orders", "dbo_customers"), ("dbo_orders",))
    assert eu.sources == () and us.sources == ()
    # A source may name its own namespace and staging path: those a single-source pipeline used before.
    own = settings({**EU, "namespace": "lake.cdc", "staging_path": "s3://bucket/staging"}, US)
    eu, us = (source_pipeline_settings(own, source) for source in own.sources)
    assert (eu.merge.namespace, eu.staging_path) == ("lake.cdc", "s3://bucket/staging")
    assert (us.merge.namespace, us.staging_path) == ("lake.cdc_us", "s3://bucket/staging/us")


def test_the_single_source_form_is_unchanged() -> None:
    s = ReplicationSettings.from_mapping({**BASE, "tables": ["dbo_orders"]}, environ={})
    assert s.sources == () and s.tables == ("dbo_orders",)
    assert "eu.plan" not in cdc_replication_dag(s, dag_id="one").task_dict


@pytest.mark.parametrize(
    ("sources", "overrides", "message"),
    [
        ([EU, {**US, "name": "eu"}], {}, r"^sources: names a source twice: eu"),
        (
            [EU, {**US, "conn_id": None, "database": "shop_eu"}],
            {},
            r"^sources\['us'\]\.tables: dbo_orders of connection 'shop', database 'shop_eu' is listed by "
            r"source 'eu' too: both would keep its watermark Variable",
        ),
        (
            [{**EU, "namespace": "lake.sales"}, {**US, "namespace": "lake.sales"}],
            {},
            r"^sources\['us'\]: its target table lake\.sales\.dbo_orders is also the target of source 'eu'",
        ),
        (
            [{**EU, "staging_path": "/x"}, {**US, "staging_path": "/x/"}],
            {},
            r"^sources\['us'\]\.staging_path: /x/dbo_orders is also the staging directory of source 'eu'",
        ),
        ([{**EU, "staging_path": "/x"}, {**US, "staging_path": "/x", "tables": ["dbo_lines"]}], {}, None),
        (
            [{**EU, "namespace": "lake; drop"}],
            {},
            r"^sources\['eu'\]\.namespace: 'lake; drop' is not a valid name",
        ),
        ([{**EU, "name": "e u"}], {}, r"^sources\['e u'\]\.name: 'e u' is not a source name"),
        ([{**EU, "name": "x" * 65}], {}, r"is not a source name: .* at most 64 characters"),
        ([{"name": "eu"}], {}, r"^sources\['eu'\]\.tables: required"),
        (
            [{**EU, "databse": "x"}],
            {},
            r"^sources\['eu'\]\.databse: unknown setting; known here: name, tables",
        ),
        ([{"tables": ["a"]}], {}, r"^sources\[0\]\.name: required"),
        (["eu"], {}, r"^sources\[0\]: expected a mapping of settings"),
        ([{**EU, "tables": ["a", "a"]}], {}, r"^sources\['eu'\]\.tables: lists a name twice"),
        ([{**EU, "tables": ["dbo/orders"]}], {}, r"^sources\['eu'\]\.tables\[0\]: .* path separator"),
        ([{**EU, "targets": {"dbo_orders": "x y"}}], {}, r"^sources\['eu'\]\.targets\['dbo_orders'\]: 'x y'"),
        ([EU], {"tables": ["dbo_orders"]}, r"^tables: must be empty when sources are listed"),
        ([EU], {"change_tracking": {"tables": ["dbo.x"]}}, r"^change_tracking\.tables: must be empty"),
        ([EU], {"merge": {"namespace": "n", "tables": {"a": "n.a"}}}, r"^merge\.tables: must be empty"),
        (
            [EU],
            {"merge": {"namespace": "lake.cdc", "mode": "continuous"}},
            r"^sources: merge\.mode 'continuous' takes one source",
        ),
    ],
)
def test_bad_sources_are_refused_naming_the_source(
    sources: list[Any], overrides: dict[str, Any], message: str | None
) -> None:
    if message is None:  # accepted: sources that share a staging path with other capture instances
        settings(*sources, **overrides)
        return
    with pytest.raises(SettingsError, match=message):
        settings(*sources, **overrides)


def test_without_tables_or_sources_the_settings_say_what_is_missing() -> None:
    with pytest.raises(
        SettingsError, match=r"^tables: required \(it has no default\); or list several sources"
    ):
        ReplicationSettings.from_mapping(BASE, environ={})


def test_one_task_group_per_source_with_nothing_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import Variable

    dag = cdc_replication_dag(settings(maintenance={"enabled": True}), dag_id="shops")
    tasks = dag.task_dict
    for name in ("eu", "us"):
        ids = {t for t in tasks if t.startswith(f"{name}.")}
        assert {
            f"{name}.{t}" for t in ("plan", "extract", "merge", "commit_watermarks", "run_outcome")
        } <= ids
        # Nothing of one source waits for another's: a failing source leaves the others' merge and commit.
        for task_id in ids:
            assert tasks[task_id].upstream_task_ids <= ids, task_id
            assert tasks[task_id].downstream_task_ids <= ids, task_id
        assert tasks[f"{name}.extract"].is_mapped  # per table, as with one source
        assert tasks[f"{name}.run_outcome"].trigger_rule == "all_done"
    assert {t for t in tasks if "." not in t} == set()
    eu, us = (tasks[f"{n}.extract"].partial_kwargs for n in ("eu", "us"))
    assert (eu["sqlserver_cdc_conn_id"], eu["database"], eu["base_path"]) == (
        "shop",
        "shop_eu",
        "s3://bucket/staging/eu",
    )
    assert (us["sqlserver_cdc_conn_id"], us["database"], us["base_path"]) == (
        "us_server",
        "shop",
        "s3://bucket/staging/us",
    )
    assert tasks["us.plan"].sqlserver_cdc_conn_id == "us_server"
    merge = tasks["us.merge"]
    assert (merge.namespace, merge.extract_task_ids) == ("lake.cdc_us", ["us.snapshot", "us.extract"])
    assert [a.uri for a in merge.outlets] == ["iceberg://lake/cdc_us/dbo_orders"]
    assert tasks["us.maintain_tables"].namespace == "lake.cdc_us"
    assert tasks["us.retention_headroom"].database == "shop"
    # Each group's run_outcome names its source in the run's failure message.
    outcome = inspect.getclosurevars(tasks["us.run_outcome"].python_callable).nonlocals
    assert outcome["source_label"] == "source 'us' (connection 'us_server', database 'shop')"
    # Each source's own tables Variable.
    asked: list[str] = []
    monkeypatch.setattr(Variable, "get", staticmethod(lambda key, default=None: asked.append(key)))
    assert tasks["us.tables"].python_callable() == ["dbo_orders"]
    assert asked == ["shops__us__tables"]


def test_sources_in_the_pipelines_task_group() -> None:
    from airflow.sdk import DAG

    with DAG("mine", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:
        cdc_replication_task_group(settings(), group_id="cdc")
    assert {"cdc.eu.merge", "cdc.us.merge", "cdc.us.run_outcome"} <= set(dag.task_dict)


def test_the_headroom_dag_checks_every_source() -> None:
    dag = retention_headroom_dag(settings(), dag_id="headroom")
    assert set(dag.task_dict) == {"eu.retention_headroom", "us.retention_headroom"}
    assert dag.task_dict["eu.retention_headroom"].capture_instances == ["dbo_orders", "dbo_customers"]


def test_the_runs_failure_message_names_the_source_and_the_plans_error() -> None:
    record = {
        "capture_instances": ["dbo_orders"],
        "error": "SourceConnectionError",
        "message": "There is no database 'gone' on SQL Server sim",
    }
    lines = failure_lines([("us.plan", None, "failed")], {("us.plan", None): record}, {})
    assert lines[0].startswith(
        "dbo_orders: us.plan failed with SourceConnectionError: There is no database 'gone'"
    )
    message = outcome_message(lines, [], source="source 'us' (connection 'us_server', database 'gone')")
    assert message.startswith(
        "Not every capture instance of source 'us' (connection 'us_server', database 'gone') was replicated"
    )


def test_the_continuous_apply_application_takes_one_source() -> None:
    with pytest.raises(ValueError, match="apply: the continuous apply application takes one source"):
        cdc_continuous_apply_dag(settings(), dag_id="apply")
