"""The reconcile's key-range query: bounds as nested comparisons cast to the key types, in key order."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc import tsql
from airflow_provider_sqlserver_cdc.capture_instance import CapturedColumn

ORDER = CapturedColumn("order_id", 1, "bigint", 8, 19, 0, False)
LINE = CapturedColumn("li]ne", 2, "smallint", 2, 5, 0, False)


def test_key_range_query_bounds_a_composite_key_lower_inclusive_upper_exclusive():
    sql = tsql.key_range_query("dbo", "lines", [ORDER, LINE], [ORDER, LINE], lower=True, upper=True)
    o, n = "[src].[order_id]", "[src].[li]]ne]"
    assert sql == (
        f"SELECT [order_id], [li]]ne] FROM [dbo].[lines] AS [src] WHERE "
        f"({o} > CAST(? AS bigint) OR ({o} = CAST(? AS bigint) AND ({n} >= CAST(? AS smallint)))) AND "
        f"({o} < CAST(? AS bigint) OR ({o} = CAST(? AS bigint) AND ({n} < CAST(? AS smallint)))) "
        f"ORDER BY {o}, {n}"
    )
    assert tsql.keyset_parameters((7, 2)) + tsql.keyset_parameters((9, 1)) == [7, 7, 2, 9, 9, 1]
    whole = tsql.key_range_query("dbo", "lines", [ORDER], [ORDER], lower=False, upper=False)
    assert whole == "SELECT [order_id] FROM [dbo].[lines] AS [src] ORDER BY [src].[order_id]"
    # the snapshot's keyset predicate is unchanged by the shared helper
    assert tsql.keyset_predicate([ORDER]) == "[src].[order_id] > CAST(? AS bigint)"
    with pytest.raises(ValueError, match="key columns"):
        tsql.key_range_query("dbo", "lines", [ORDER], [], lower=True, upper=False)
