"""connectorx 0.4.6 (Rust, tiberius underneath) reading from the simulator into Arrow.

connectorx reads each query twice (once for its schema), has no query parameters (binary values go
in as ``0x`` literals) and no transactions: the battery is login with and without TLS, types,
errors, CDC functions and a 400,000-row result.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import pytest
from client_battery_support import DATABASE, ClientSimulator

cx = pytest.importorskip("connectorx", reason="connectorx is in the dev extra")


@pytest.fixture(scope="module", params=["plain", "tls"])
def read(request: pytest.FixtureRequest, client_simulator: ClientSimulator) -> Callable[[str], Any]:
    """``read(sql)`` -> an Arrow table, over a connection without TLS or with full TLS."""
    sim = client_simulator
    options = "?encrypt=true&trust_server_certificate=true" if request.param == "tls" else ""
    url = f"mssql://sa:{quote(sim.password)}@{sim.host}:{sim.port}/{DATABASE}{options}"
    return lambda sql: cx.read_sql(url, sql, return_type="arrow")


def test_login_and_a_query(read: Callable[[str], Any]) -> None:
    rows = read("SELECT id, name FROM dbo.items WHERE id <= 2 ORDER BY id").to_pylist()
    assert rows == [{"id": 1, "name": "one"}, {"id": 2, "name": "TWO"}]


def test_types_at_their_edges(read: Callable[[str], Any]) -> None:
    """Within what connectorx reads: it rescales decimals to scale 10 in 28 digits (a limit of the client)."""
    row = read(
        "SELECT CAST(-2147483648 AS int) AS i, CAST(-9223372036854775808 AS bigint) AS b,"
        " CAST(255 AS tinyint) AS t, CAST(-32768 AS smallint) AS s,"
        " CAST(123456789012345.678 AS decimal(18,3)) AS d, CAST(1.5E308 AS float) AS f,"
        " CAST(N'\u00e9\U0001f600' AS nvarchar(10)) AS n, CAST(0x00FF AS varbinary(10)) AS v,"
        " CAST(1 AS bit) AS bit, CAST(NULL AS int) AS nothing,"
        " CAST('9999-12-31 23:59:59.9999999' AS datetime2(7)) AS dt2, CAST('0001-01-01' AS date) AS day"
    ).to_pylist()[0]
    assert row["i"] == -2147483648 and row["b"] == -9223372036854775808
    assert (row["t"], row["s"]) == (255, -32768)
    assert row["d"] == Decimal("123456789012345.678")
    assert row["f"] == 1.5e308
    assert row["n"] == "\u00e9\U0001f600" and row["v"] == b"\x00\xff"
    assert row["bit"] is True and row["nothing"] is None
    assert str(row["dt2"]).startswith("9999-12-31 23:59:59.999999")
    assert str(row["day"]) == "0001-01-01"


def test_an_error_names_the_problem_and_the_next_query_works(read: Callable[[str], Any]) -> None:
    with pytest.raises(Exception, match="Invalid object name 'dbo.no_such_table'"):
        read("SELECT * FROM dbo.no_such_table")
    assert read("SELECT 42 AS answer").to_pylist() == [{"answer": 42}]


def test_cdc_functions_with_binary10_literals(read: Callable[[str], Any]) -> None:
    bounds = read(
        "SELECT sys.fn_cdc_get_min_lsn('dbo_items') AS lo, sys.fn_cdc_get_max_lsn() AS hi"
    ).to_pylist()[0]
    assert len(bounds["lo"]) == len(bounds["hi"]) == 10
    rows = read(
        f"SELECT __$operation AS op, id FROM cdc.fn_cdc_get_all_changes_dbo_items(0x{bounds['lo'].hex()},"
        f" 0x{bounds['hi'].hex()}, N'all') WHERE id <= 3 ORDER BY __$seqval"
    ).to_pylist()
    assert [(r["op"], r["id"]) for r in rows] == [(2, 3), (4, 2), (1, 3)]


def test_a_400k_row_result(read: Callable[[str], Any]) -> None:
    table = read(
        "SELECT a.i * 1000 + b.i AS n FROM dbo.numbers AS a CROSS JOIN dbo.numbers AS b WHERE a.i < 400"
    )
    assert table.num_rows == 400000
    assert sum(table.column("n").to_pylist()) == sum(range(400000))
