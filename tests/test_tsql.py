from __future__ import annotations

import re

import pytest

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn
from airflow_provider_sqlserver_cdc.errors import InvalidIdentifierError


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("orders", "[orders]"),
        ("order]s", "[order]]s]"),
        ("]]", "[]]]]]"),
        ("[x]", "[[x]]]"),
        ("a b'c\"d", "[a b'c\"d]"),
        ("Ünïcødé_表", "[Ünïcødé_表]"),
    ],
)
def test_quote_name_follows_quotename(name, quoted):
    assert tsql.quote_name(name) == quoted


def test_quote_name_limits():
    assert tsql.quote_name("x" * 128) == "[" + "x" * 128 + "]"
    with pytest.raises(InvalidIdentifierError, match="at most 128"):
        tsql.quote_name("x" * 129)
    with pytest.raises(InvalidIdentifierError):
        tsql.quote_name("")
    with pytest.raises(InvalidIdentifierError, match="NUL"):
        tsql.quote_name("a\x00b")


def test_capture_instance_validation():
    assert tsql.validate_capture_instance("dbo_orders") == "dbo_orders"
    assert tsql.validate_capture_instance("x" * 100)
    for bad in ("", " ", "x" * 101, "a\nb", " lead", "trail "):
        with pytest.raises(InvalidIdentifierError, match="capture instance"):
            tsql.validate_capture_instance(bad)


def test_row_filter_option_validation():
    assert tsql.validate_row_filter_option("all update old") == "all update old"
    with pytest.raises(ValueError, match="row_filter_option"):
        tsql.validate_row_filter_option("all with merge")


def _cols():
    return [
        CapturedColumn("id", 1, "int", 4, 10, 0, False),
        CapturedColumn("when", 2, "datetime2", 8, 27, 7, True),
        CapturedColumn("guid", 3, "uniqueidentifier", 16, 0, 0, True),
        CapturedColumn("odd]name", 4, "nvarchar", 20, 0, 0, True),
        CapturedColumn("dto", 5, "datetimeoffset", 10, 34, 7, True),
    ]


def test_all_changes_query_quotes_names_and_only_uses_parameters():
    sql = tsql.all_changes_query("dbo_or]ders", _cols())
    assert "[cdc].[fn_cdc_get_all_changes_dbo_or]]ders](?, ?, ?)" in sql
    assert "CAST([when] AS varchar(40)) AS [when]" in sql
    assert "CAST([guid] AS char(36)) AS [guid]" in sql
    assert "[odd]]name]" in sql
    assert "CAST([dto] AS varchar(40)) AS [dto]" in sql
    assert sql.index("[__$start_lsn]") < sql.index("[__$seqval]") < sql.index("[__$operation]")
    assert sql.rstrip().endswith("ORDER BY [__$start_lsn], [__$seqval], [__$operation]")
    assert sql.count("?") == 3


def test_all_changes_query_rejects_injection_in_capture_instance():
    with pytest.raises(InvalidIdentifierError):
        tsql.all_changes_query("x" * 101, _cols())
    # A hostile but valid name stays inside one bracketed identifier.
    sql = tsql.all_changes_query("x](?,?,?); DROP TABLE t; --", _cols())
    assert re.search(r"\[fn_cdc_get_all_changes_x\]\]\(\?,\?,\?\); DROP TABLE t; --\]\(\?, \?, \?\)", sql)


def test_fixed_queries_take_values_as_parameters():
    assert tsql.MIN_LSN.count("?") == 1
    assert tsql.MAP_TIME_TO_LSN.count("?") == 2
    assert tsql.INCREMENT_LSN.count("?") == 1
    assert tsql.CAPTURED_COLUMNS.count("?") == 1
    assert "'" not in tsql.CAPTURED_COLUMNS + tsql.INDEX_COLUMNS + tsql.CAPTURE_INSTANCES
