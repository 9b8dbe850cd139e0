"""
date parameters before 1600-03-01: the day number on the wire decides, and the simulator reads it as MS-TDS says.

MS-TDS 2.2.5.5.1.8 (DATE): "the number of days since January 1, year 1" in three bytes, proleptic
Gregorian. Microsoft's ODBC Driver 18 writes that number and every date round-trips. FreeTDS 1.3 writes a
day number off by one for many dates before 1600-03-01 (measured on the wire: 0001-01-02 as day 0,
0100-03-01 as 36217 instead of 36218, 1582-10-15 as 577736 instead of 577735; 0001-01-01 as day -1, which
the simulator refuses with 8023 as SQL Server does): the client is wrong, not the simulator. docs/simulator.md
and docs/type-mapping.md say so; send such dates as text through FreeTDS.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyodbc
import pytest

from sqlserver_cdc_simulator.connections import FREETDS_DRIVER, MS_ODBC_DRIVER

DATES = [
    dt.date(1, 1, 1),
    dt.date(100, 3, 1),
    dt.date(1000, 3, 1),
    dt.date(1582, 10, 4),
    dt.date(1582, 10, 15),
]
ROUND_TRIP = "SELECT CAST(? AS date), DATEDIFF(day, '0001-01-01', ?)"


@pytest.mark.skipif(
    MS_ODBC_DRIVER not in pyodbc.drivers(), reason="Microsoft's ODBC Driver 18 is not registered"
)
@pytest.mark.parametrize("value", DATES, ids=str)
def test_driver18_date_parameters_round_trip(sqlserver_simulator: Any, value: dt.date) -> None:
    sqlserver_simulator.driver = MS_ODBC_DRIVER
    try:
        cursor = sqlserver_simulator.connect().cursor()
        assert tuple(cursor.execute(ROUND_TRIP, value, value).fetchone()) == (
            value,
            (value - dt.date(1, 1, 1)).days,
        )
    finally:
        sqlserver_simulator.driver = FREETDS_DRIVER


@pytest.mark.skipif(FREETDS_DRIVER not in pyodbc.drivers(), reason="needs the FreeTDS ODBC driver")
def test_freetds_writes_a_wrong_day_number_before_1600(sqlserver_simulator: Any) -> None:
    """The client's limitation this documents (if FreeTDS fixes it, update docs/simulator.md and type-mapping.md)."""
    cursor = sqlserver_simulator.connect().cursor()
    value = dt.date(1000, 3, 1)
    assert tuple(cursor.execute(ROUND_TRIP, value, value).fetchone()) == (dt.date(1000, 2, 28), 364935)
    literal = cursor.execute("SELECT CAST('1000-03-01' AS date)").fetchone()[0]
    assert literal == value  # the same date as text arrives right
    with pytest.raises(pyodbc.Error, match=r"\(8023\)"):
        cursor.execute(ROUND_TRIP, dt.date(1, 1, 1), dt.date(1, 1, 1))
