"""The PostgreSQL target's type mapping, names and credentials (no database needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError, SchemaEvolutionError
from airflow_provider_sqlserver_cdc.spark.merge.targets.jdbc_connection import (
    PASSWORD_ENV,
    USER_ENV,
    JdbcCredentials,
    check_jdbc_url,
)
from airflow_provider_sqlserver_cdc.spark.merge.targets.postgres_sql import (
    lsn_literal,
    postgres_type,
    quote_table,
    sibling_table,
    value_expression,
)


@pytest.mark.parametrize(
    ("column", "spark_type", "expected"),
    [
        ({"sql_type": "decimal", "precision": 38, "scale": 6}, "DECIMAL(38,6)", "numeric(38,6)"),
        ({"sql_type": "int"}, "BIGINT", "bigint"),  # widened by an earlier window
        ({"sql_type": "nvarchar", "max_length": 200}, "STRING", "character varying(100)"),
        ({"sql_type": "varchar", "max_length": 200}, "STRING", "character varying(200)"),
        ({"sql_type": "nvarchar", "max_length": -1}, "STRING", "text"),
        ({"sql_type": "uniqueidentifier"}, "STRING", "uuid"),
        ({"sql_type": "varbinary", "max_length": -1}, "BINARY", "bytea"),
        ({"sql_type": "datetime2", "scale": 7}, "TIMESTAMP_NTZ", "timestamp(6) without time zone"),
        ({"sql_type": "datetime2", "scale": 3}, "TIMESTAMP_NTZ", "timestamp(3) without time zone"),
        ({"sql_type": "datetimeoffset", "scale": 7}, "STRING", "timestamp(6) with time zone"),
        ({"sql_type": "time", "scale": 0}, "STRING", "time(0) without time zone"),
        ({"sql_type": "float", "precision": 24}, "FLOAT", "real"),
        ({"sql_type": "money"}, "DECIMAL(19,4)", "numeric(19,4)"),
        ({"sql_type": "tinyint"}, "INT", "smallint"),
    ],
)
def test_sql_server_types_map_exactly(column: dict, spark_type: str, expected: str) -> None:
    assert postgres_type({"name": "c", **column}, spark_type) == expected


def test_seventh_fraction_digits_are_floored_before_the_cast() -> None:
    expression = value_expression({"sql_type": "datetimeoffset"}, "timestamp(6) with time zone", 's."x"')
    assert expression == "regexp_replace(s.\"x\", '(\\.[0-9]{6})[0-9]+', '\\1')::timestamp(6) with time zone"


def test_names_are_quoted_and_kept_within_63_bytes() -> None:
    assert quote_table('My"Schema.Orders') == '"My""Schema"."Orders"'
    assert quote_table("orders") == '"public"."orders"'
    long = sibling_table("cdc." + "x" * 80, prefix="_cdc_stage_", suffix="_0123abcd")
    assert len(long.split(".")[1].strip('"')) == 63
    with pytest.raises(SchemaEvolutionError, match="schema.table"):
        quote_table("lake.cdc.orders")
    assert lsn_literal("0x0000002A000001F00003") == "'\\x0000002A000001F00003'::bytea"
    with pytest.raises(ValueError):
        lsn_literal("0x00'; DROP TABLE x; --")


def test_urls_with_credentials_or_other_databases_are_refused() -> None:
    assert check_jdbc_url("jdbc:postgresql://h:5432/db?sslmode=require") == "org.postgresql.Driver"
    for url in (
        "jdbc:postgresql://u:p@h/db",
        "jdbc:postgresql://h/db?password=p",
        "jdbc:postgresql://h/db?user=u",
    ):
        with pytest.raises(MergeJobError, match="carries credentials"):
            check_jdbc_url(url)
    with pytest.raises(MergeJobError, match="supports jdbc:postgresql"):
        check_jdbc_url("jdbc:sqlserver://h;user=u")


def test_credentials_come_from_the_environment_or_a_private_file(tmp_path: Path) -> None:
    assert JdbcCredentials.from_environment({}) is None
    found = JdbcCredentials.from_environment({USER_ENV: "u", PASSWORD_ENV: "p w"})
    assert found == JdbcCredentials("u", "p w") and "p w" not in repr(found)
    file = tmp_path / "login"
    file.write_text("user=replicator\npassword=a=b c\n")
    file.chmod(0o644)
    with pytest.raises(MergeJobError, match="mode 0644: others may read it; chmod 600"):
        JdbcCredentials.from_file(str(file))
    file.chmod(0o600)
    assert JdbcCredentials.from_file(str(file)) == JdbcCredentials("replicator", "a=b c")
    with pytest.raises(MergeJobError, match="must exist where the Spark driver runs"):
        JdbcCredentials.from_file(str(tmp_path / "missing"))
