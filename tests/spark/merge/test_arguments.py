"""The job's command line: manifests, targets, table properties."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.spark.merge.arguments import parse_args, parse_table_properties
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError


def test_parse_args_builds_settings_from_uris_and_window_directories() -> None:
    settings = parse_args(
        [
            "--manifest",
            "/w/a",
            "--manifest",
            "/w/a/_manifest.json",
            "--namespace",
            "lake.cdc",
            "--target",
            "dbo_x=lake.o.x",
        ]
    )
    assert settings.manifests == ("/w/a/_manifest.json",)
    assert settings.targets == {"dbo_x": "lake.o.x"}
    assert settings.delete_mode == "soft"
    assert settings.table_properties == {}


def test_parse_args_collects_table_properties() -> None:
    settings = parse_args(
        [
            "--manifest",
            "/w/a",
            "--table-property",
            "write.merge.distribution-mode=none",
            "--table-property",
            "comment=a=b",
        ]
    )
    assert settings.table_properties == {"write.merge.distribution-mode": "none", "comment": "a=b"}


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("write.merge.mode=copy-on-write", "set by the merge job itself"),
        ("Format-Version=3", "set by the merge job itself"),
        ("sqlserver-cdc.max-applied-lsn.dbo_x=0x00", "set by the merge job itself"),
        ("no-value", "expected KEY=VALUE"),
        ("=x", "expected KEY=VALUE"),
        ("comment=it's", "quotes and backslashes"),
    ],
)
def test_table_properties_refused(item: str, problem: str) -> None:
    with pytest.raises(MergeJobError, match=problem):
        parse_table_properties([item])


def test_parse_args_refuses_xcom_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--manifest", '[{"manifest_uri": "/w/a"}]'])
    assert "not the extract task's XCom JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "buckets"),
    [([], 0), (["--partition-buckets", "auto"], None), (["--partition-buckets", "16"], 16)],
)
def test_partition_buckets_default_to_unpartitioned_tables(given: list[str], buckets: int | None) -> None:
    settings = parse_args(["--manifest", "/w/a", "--namespace", "lake.cdc", *given])
    assert settings.partition_buckets == buckets
    assert settings.concurrent_tables == 1


def test_negative_buckets_and_no_concurrency_are_refused() -> None:
    for given in (["--partition-buckets", "-1"], ["--concurrent-tables", "0"]):
        with pytest.raises(SystemExit):
            parse_args(["--manifest", "/w/a", "--namespace", "lake.cdc", *given])


def test_merge_strategy_defaults_to_auto_and_takes_merge_or_rewrite() -> None:
    assert parse_args(["--manifest", "/w/a", "--namespace", "lake.cdc"]).merge_strategy == "auto"
    given = parse_args(["--manifest", "/w/a", "--namespace", "lake.cdc", "--merge-strategy", "rewrite"])
    assert given.merge_strategy == "rewrite"
    with pytest.raises(SystemExit):
        parse_args(["--manifest", "/w/a", "--namespace", "lake.cdc", "--merge-strategy", "fast"])


def test_the_command_line_the_settings_dataclass_and_the_operator_share_their_defaults() -> None:
    """Each default is stated once: argparse, ``MergeJobSettings`` and CdcSparkMergeOperator read it alike."""
    from airflow_provider_sqlserver_cdc.operators.spark_merge import CdcSparkMergeOperator
    from airflow_provider_sqlserver_cdc.pipeline.settings import operator_default
    from airflow_provider_sqlserver_cdc.spark.merge.arguments import MergeJobSettings

    parsed = parse_args(["--manifest", "/w/a"])
    assert parsed == MergeJobSettings(manifests=("/w/a/_manifest.json",))
    for name in ("table_name_template", "delete_mode", "write_mode", "target_kind", "jdbc_connections"):
        assert operator_default(CdcSparkMergeOperator, name) == getattr(parsed, name), name
    assert parse_args(
        ["--manifest", "/w/a", "--target-kind", "postgres", "--jdbc-url", "jdbc:postgresql://h/d"]
    )
    with pytest.raises(SystemExit):
        parse_args(["--manifest", "/w/a", "--target-kind", "jdbc", "--jdbc-url", "jdbc:postgresql://h/d"])
