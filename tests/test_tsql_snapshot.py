from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn
from airflow_provider_sqlserver_cdc.errors import InvalidIdentifierError

ID = CapturedColumn("id", 1, "int", 4, 10, 0, False)
LINE = CapturedColumn("li]ne", 2, "nvarchar", 40, 0, 0, False)
AT = CapturedColumn("at", 3, "datetime2", 8, 27, 7, False)


def test_lock_statement_takes_a_held_shared_table_lock_on_the_quoted_table():
    sql = tsql.lock_table_statement("sales", "or]ders")
    assert sql == "SELECT TOP (1) 1 FROM [sales].[or]]ders] WITH (TABLOCK, HOLDLOCK)"


def test_lock_timeout_accepts_only_integers():
    assert tsql.set_lock_timeout(1500) == "SET LOCK_TIMEOUT 1500"
    for bad in (1.5, "1; DROP TABLE x", True, -2):
        with pytest.raises(ValueError):
            tsql.set_lock_timeout(bad)


def test_source_names_are_validated():
    with pytest.raises(InvalidIdentifierError):
        tsql.fix_snapshot_statement("dbo", "")
    with pytest.raises(InvalidIdentifierError):
        tsql.lock_table_statement("x" * 129, "t")


def test_keyset_predicate_is_lexicographic_with_typed_parameters():
    assert tsql.keyset_predicate([ID]) == "[src].[id] > CAST(? AS int)"
    three = tsql.keyset_predicate([ID, LINE, AT])
    assert three == (
        "[src].[id] > CAST(? AS int) OR ([src].[id] = CAST(? AS int) AND "
        "([src].[li]]ne] > CAST(? AS nvarchar(20)) OR ([src].[li]]ne] = CAST(? AS nvarchar(20)) AND "
        "([src].[at] > CAST(? AS datetime2(7))))))"
    )
    assert three.count("?") == len(tsql.keyset_parameters([1, "a", "t"])) == 5
    assert tsql.keyset_parameters([1, "a", "t"]) == [1, 1, "a", "a", "t"]


def test_keyset_predicate_orders_like_a_tuple_comparison():
    """Evaluate the generated predicate's logic in Python against tuple ordering."""
    import itertools

    def predicate(row, last):
        # same nesting as tsql.keyset_predicate
        result = row[-1] > last[-1]
        for i in range(len(row) - 2, -1, -1):
            result = row[i] > last[i] or (row[i] == last[i] and result)
        return result

    values = list(itertools.product(range(3), repeat=3))
    for row in values:
        for last in values:
            assert predicate(row, last) == (row > last)


def test_chunk_query_reads_columns_as_windows_do_and_orders_by_the_real_key():
    first = tsql.snapshot_chunk_query("dbo", "t", [ID, LINE, AT], [ID, LINE], after_key=False)
    assert first.startswith(
        "SELECT TOP (?) [id], [li]]ne], CAST([at] AS varchar(40)) AS [at] FROM [dbo].[t] AS [src]"
    )
    assert first.endswith(" ORDER BY [src].[id], [src].[li]]ne]")
    assert "WHERE" not in first
    later = tsql.snapshot_chunk_query("dbo", "t", [ID, LINE, AT], [ID, LINE], after_key=True)
    assert " WHERE [src].[id] > CAST(? AS int)" in later
    whole = tsql.snapshot_chunk_query("dbo", "t", [ID], [], after_key=False)
    assert whole == "SELECT [id] FROM [dbo].[t] AS [src]"


def test_begin_lsn_query_reads_the_current_transaction_in_this_database():
    assert "sys.dm_tran_database_transactions" in tsql.TRANSACTION_BEGIN_LSN
    assert (
        "CURRENT_TRANSACTION_ID()" in tsql.TRANSACTION_BEGIN_LSN and "DB_ID()" in tsql.TRANSACTION_BEGIN_LSN
    )
