"""Target and table names are checked where the settings are read, naming the key (issue 36, item 4).

Before, ``merge.namespace: "lake; DROP"`` was accepted and failed only inside the Spark job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_sqlserver_cdc.pipeline import ReplicationSettings, SettingsError

REQUIRED: dict[str, Any] = {
    "tables": ["dbo_orders"],
    "staging_path": "/tmp/w",
    "merge": {"namespace": "lake.cdc"},
}
JDBC = {"kind": "postgres", "conn_id": "pg"}


def settings(**overrides: Any) -> ReplicationSettings:
    return ReplicationSettings.from_mapping({**REQUIRED, **overrides}, environ={})


@pytest.mark.parametrize(
    ("merge", "message"),
    [
        (
            {"namespace": "lake; DROP"},
            r"^merge\.namespace: 'lake; DROP' is not a valid name: .*'_', '\$' and '-', not ' ' ';'",
        ),
        ({"namespace": "lake..cdc"}, r"^merge\.namespace: 'lake\.\.cdc' has an empty part"),
        ({"namespace": "lake.`cdc`"}, r"^merge\.namespace: .* not '`'"),
        (
            {"namespace": "lake.cdc", "target": JDBC},
            r"^merge\.namespace: 'lake\.cdc' has 2 dotted part\(s\), expected 1",
        ),
        (
            {"namespace": "c" * 64, "target": JDBC},
            r"^merge\.namespace: 'c{64}' is 64 bytes: PostgreSQL keeps only",
        ),
        (
            {"namespace": "lake.cdc", "table_name_template": "{schema}.{table}"},
            r"^merge\.table_name_template: .* not '\.'",
        ),
        (
            {"namespace": "lake.cdc", "table_name_template": "{owner}_{table}"},
            r"^merge\.table_name_template: .* unknown field \{owner\}",
        ),
        (
            {"namespace": "lake.cdc", "table_name_template": "{table!r}"},
            r"takes no format spec or conversion",
        ),
        (
            {"namespace": "lake.cdc", "table_name_template": "{table"},
            r"^merge\.table_name_template: '\{table' is not a valid template",
        ),
        (
            {"namespace": "lake.cdc", "tables": {"dbo_orders": "lake.x; y"}},
            r"^merge\.tables\['dbo_orders'\]: 'lake\.x; y' is not a valid name",
        ),
        (
            {"namespace": "cdc", "tables": {"dbo_orders": "a.b.c"}, "target": JDBC},
            r"^merge\.tables\['dbo_orders'\]: .* expected 1 to 2",
        ),
        (
            {"namespace": "lake.cdc", "tables": {"dbo/orders": "lake.x.y"}},
            r"^merge\.tables\['dbo/orders'\]: .*path separator",
        ),
        (
            {"namespace": "lake.cdc", "table_properties": {"comment": "it's"}},
            r"^merge\.table_properties: .*quotes and backslashes",
        ),
    ],
)
def test_bad_target_names_are_refused_naming_the_key_and_what_is_allowed(merge: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings(merge=merge)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tables": ["dbo_orders", "../etc"]}, r"^tables\[1\]: '\.\./etc' holds a path separator"),
        ({"tables": [" dbo_orders"]}, r"^tables\[0\]: ' dbo_orders' has blanks around it"),
        (
            {"change_tracking": {"tables": ["dbo.a\tb"]}},
            r"^change_tracking\.tables\[0\]: .*control character",
        ),
    ],
)
def test_bad_source_names_are_refused(overrides: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings(**overrides)


@pytest.mark.parametrize(
    "merge",
    [
        {"namespace": "lake.cdc"},
        {"namespace": "n"},
        {"namespace": "my-catalog.cdc_2", "table_name_template": "{database}__{schema}_{table}"},
        {"namespace": "läke.ünicode", "tables": {"dbo_orders": "lake.other.orders$1"}},
        {"namespace": "lake.cdc", "table_name_template": "{capture_instance}"},
        {"namespace": "cdc", "tables": {"dbo_users": "crm.users"}, "target": JDBC},
        {"namespace": "cdc", "tables": {"dbo_users": "users"}, "target": JDBC},
    ],
)
def test_names_users_use_are_accepted(merge: dict) -> None:
    assert settings(merge=merge).merge.namespace == merge["namespace"]
    # and Change Tracking tables, capture instances with the characters SQL Server allows
    settings(
        merge=merge, tables=["dbo_Order Details", "sales.orders"], change_tracking={"tables": ["dbo.x-y"]}
    )


def test_the_example_dags_settings_pass() -> None:
    config = Path(__file__).resolve().parents[2] / "dags" / "sqlserver_cdc_config.yaml"
    assert ReplicationSettings.from_yaml(config, environ={}).merge.namespace == "lake.cdc"


def test_a_bad_namespace_from_the_environment_names_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "cdc.yaml"
    config.write_text(yaml.safe_dump({**REQUIRED, "merge": {"namespace": "${NS:-lake.cdc}"}}))
    assert ReplicationSettings.from_yaml(config, environ={}).merge.namespace == "lake.cdc"
    with pytest.raises(
        SettingsError, match=r"^cdc\.yaml: merge\.namespace: 'lake; DROP' is not a valid name"
    ):
        ReplicationSettings.from_yaml(config, environ={"NS": "lake; DROP"})


def test_the_tables_variable_is_held_to_the_same_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``<dag_id>__tables`` Variable replaces ``tables`` at run time: its names are checked alike."""
    import json

    from airflow.sdk import Variable

    from airflow_provider_sqlserver_cdc.pipeline.table_list import run_tables

    stored = {"d__tables": json.dumps(["dbo_orders", "dbo/x"])}
    monkeypatch.setattr(Variable, "get", staticmethod(lambda key, default=None: stored.get(key, default)))
    with pytest.raises(
        SettingsError, match=r"^Airflow Variable d__tables\[1\]: 'dbo/x' holds a path separator"
    ):
        run_tables(("a",), "d__tables")
