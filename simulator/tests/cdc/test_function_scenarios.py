"""The CDC functions and query functions, with ``?`` binary(10) parameters and in plain batches."""

from __future__ import annotations

import datetime as dt

import pyodbc
import pytest
from cdc_scenario_support import error_number, lsn

TABLE = """CREATE TABLE dbo.accounts (
    id int NOT NULL PRIMARY KEY,
    owner nvarchar(40) NOT NULL,
    balance decimal(18,2) NULL,
    opened date NULL
)"""
ACCOUNT_COLUMNS = ["id", "owner", "balance", "opened"]


@pytest.fixture
def accounts(cdc_db):
    """dbo.accounts with net changes, a few committed transactions, captured."""
    cdc_db.track(TABLE, "accounts", supports_net_changes=1)
    cdc_db.run(
        "INSERT INTO dbo.accounts VALUES (1, N'ann', 10.00, '2024-01-02'), (2, N'bob', 20.00, NULL)",
        "UPDATE dbo.accounts SET balance = 11.50 WHERE id = 1",
        "INSERT INTO dbo.accounts VALUES (3, N'cy', 0, NULL)",
        "DELETE FROM dbo.accounts WHERE id = 3",
        "DELETE FROM dbo.accounts WHERE id = 2",
    )
    cdc_db.capture()
    return cdc_db


def _bounds(db):
    return lsn(db.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_accounts')")), lsn(
        db.scalar("SELECT sys.fn_cdc_get_max_lsn()")
    )


def test_all_changes_columns_types_and_rows_with_parameters(accounts):
    low, high = _bounds(accounts)
    cursor = accounts.execute(
        "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_accounts(?, ?, N'all update old')", low, high
    )
    description = cursor.description
    assert [d[0] for d in description] == [
        "__$start_lsn",
        "__$seqval",
        "__$operation",
        "__$update_mask",
        *ACCOUNT_COLUMNS,
    ]
    assert description[0][1] is bytearray and description[0][3] == 10
    assert description[1][3] == 10
    assert description[2][1] is int
    assert description[3][1] is bytearray and description[3][3] == 128
    rows = cursor.fetchall()
    assert [(r[2], r[4]) for r in rows] == [(2, 1), (2, 2), (3, 1), (4, 1), (2, 3), (1, 3), (1, 2)]
    assert rows[3].balance == pytest.approx(11.5) and rows[0].opened == dt.date(2024, 1, 2)
    starts = [lsn(r[0]) for r in rows]
    assert starts == sorted(starts)
    plain = accounts.rows(
        f"SELECT __$operation FROM cdc.fn_cdc_get_all_changes_dbo_accounts(0x{low.hex()}, 0x{high.hex()}, N'all')"
    )
    assert [r[0] for r in plain] == [2, 2, 4, 2, 1, 1]


def test_net_changes_all_mask_and_merge(accounts):
    low, high = _bounds(accounts)
    sql = "SELECT * FROM cdc.fn_cdc_get_net_changes_dbo_accounts(?, ?, ?) ORDER BY id"
    cursor = accounts.execute(sql, low, high, "all")
    assert [d[0] for d in cursor.description] == [
        "__$start_lsn",
        "__$operation",
        "__$update_mask",
        *ACCOUNT_COLUMNS,
    ]
    rows = cursor.fetchall()
    # id 1: inserted then updated -> one insert with the final values; ids 2 and 3: inserted then deleted -> nothing
    assert [(r.id, r[1], r[2]) for r in rows] == [(1, 2, None)]
    assert rows[0].balance == pytest.approx(11.5)
    merged = accounts.execute(sql, low, high, "all with merge").fetchall()
    assert [(r.id, r[1]) for r in merged] == [(1, 5)]
    masked = accounts.execute(sql, low, high, "all with mask").fetchall()
    assert [(r.id, r[1]) for r in masked] == [(1, 2)]


def test_net_changes_for_rows_that_existed_before_the_window(accounts):
    _, high = _bounds(accounts)
    accounts.execute("UPDATE dbo.accounts SET owner = N'anne' WHERE id = 1").close()
    accounts.execute("UPDATE dbo.accounts SET balance = 1 WHERE id = 1").close()
    accounts.capture()
    start = accounts.scalar("SELECT sys.fn_cdc_increment_lsn(?)", high)
    end = accounts.scalar("SELECT sys.fn_cdc_get_max_lsn()")
    rows = accounts.execute(
        "SELECT __$operation, __$update_mask, id, owner FROM cdc.fn_cdc_get_net_changes_dbo_accounts(?, ?, N'all with mask')",
        start,
        end,
    ).fetchall()
    assert [(r[0], r[2], r[3]) for r in rows] == [(4, 1, "anne")]
    ordinal_owner = accounts.scalar("SELECT sys.fn_cdc_get_column_ordinal(N'dbo_accounts', N'owner')")
    ordinal_balance = accounts.scalar("SELECT sys.fn_cdc_get_column_ordinal(N'dbo_accounts', N'balance')")
    ordinal_opened = accounts.scalar("SELECT sys.fn_cdc_get_column_ordinal(N'dbo_accounts', N'opened')")
    assert (ordinal_owner, ordinal_balance, ordinal_opened) == (2, 3, 4)
    mask = rows[0][1]
    assert accounts.scalar("SELECT sys.fn_cdc_is_bit_set(?, ?)", ordinal_owner, mask) in (1, True)
    assert accounts.scalar("SELECT sys.fn_cdc_is_bit_set(?, ?)", ordinal_balance, mask) in (1, True)
    assert accounts.scalar("SELECT sys.fn_cdc_is_bit_set(?, ?)", ordinal_opened, mask) in (0, False)
    assert accounts.scalar("SELECT sys.fn_cdc_has_column_changed(N'dbo_accounts', N'owner', ?)", mask) in (
        1,
        True,
    )
    assert accounts.scalar("SELECT sys.fn_cdc_has_column_changed(N'dbo_accounts', N'opened', ?)", mask) in (
        0,
        False,
    )


@pytest.mark.parametrize("case", ["below_min", "above_max", "from_after_to", "null_from", "bad_option"])
def test_invalid_ranges_raise_313(accounts, case):
    low, high = _bounds(accounts)
    below = accounts.scalar("SELECT sys.fn_cdc_decrement_lsn(?)", low)
    above = accounts.scalar("SELECT sys.fn_cdc_increment_lsn(?)", high)
    args = {
        "below_min": (below, high, "all"),
        "above_max": (low, above, "all"),
        "from_after_to": (high, low, "all"),
        "null_from": (None, high, "all"),
        "bad_option": (low, high, "everything"),
    }[case]
    sql = "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_accounts(CAST(? AS binary(10)), CAST(? AS binary(10)), ?)"
    with pytest.raises(pyodbc.Error) as excinfo:
        accounts.execute(sql, *args).fetchall()
    assert error_number(excinfo) == 313
    assert "cdc.fn_cdc_get_all_changes_ ..." in str(excinfo.value)


def test_net_changes_invalid_range_raises_313(accounts):
    low, high = _bounds(accounts)
    with pytest.raises(pyodbc.Error) as excinfo:
        accounts.execute(
            "SELECT * FROM cdc.fn_cdc_get_net_changes_dbo_accounts(?, ?, N'all')", high, low
        ).fetchall()
    assert error_number(excinfo) == 313


def test_min_lsn_of_unknown_instance_is_all_zeros(accounts):
    assert lsn(accounts.scalar("SELECT sys.fn_cdc_get_min_lsn(N'no_such_instance')")) == bytes(10)
    assert lsn(accounts.scalar("SELECT sys.fn_cdc_get_min_lsn(?)", "no_such_instance")) == bytes(10)


def test_increment_and_decrement_lsn(accounts):
    value = bytes.fromhex("0000002D000005900005")
    assert lsn(accounts.scalar("SELECT sys.fn_cdc_increment_lsn(?)", value)) == bytes.fromhex(
        "0000002D000005900006"
    )
    assert lsn(accounts.scalar("SELECT sys.fn_cdc_decrement_lsn(0x0000002D000005900005)")) == bytes.fromhex(
        "0000002D000005900004"
    )
    assert accounts.scalar("SELECT sys.fn_cdc_increment_lsn(NULL)") is None


def test_map_time_to_lsn_with_the_four_operators(accounts):
    rows = accounts.rows("SELECT start_lsn, tran_end_time FROM cdc.lsn_time_mapping ORDER BY start_lsn")
    first_lsn, first_time = lsn(rows[0][0]), rows[0][1]
    last_lsn, last_time = lsn(rows[-1][0]), rows[-1][1]
    sql = "SELECT sys.fn_cdc_map_time_to_lsn(?, ?)"
    same_first = [lsn(r[0]) for r in rows if r[1] == first_time]
    same_last = [lsn(r[0]) for r in rows if r[1] == last_time]
    assert lsn(accounts.scalar(sql, "smallest greater than or equal", first_time)) == min(same_first)
    assert lsn(accounts.scalar(sql, "largest less than or equal", last_time)) == max(same_last) == last_lsn
    assert accounts.scalar(sql, "largest less than", first_time) is None
    assert accounts.scalar(sql, "smallest greater than", last_time) is None
    later = last_time + dt.timedelta(days=1)
    assert lsn(accounts.scalar(sql, "largest less than", later)) == last_lsn
    earlier = first_time - dt.timedelta(days=1)
    assert lsn(accounts.scalar(sql, "smallest greater than", earlier)) == first_lsn
    assert lsn(
        accounts.scalar("SELECT sys.fn_cdc_map_time_to_lsn('largest less than or equal', GETDATE())")
    ) == lsn(accounts.scalar("SELECT sys.fn_cdc_get_max_lsn()"))


def test_max_lsn_in_a_database_without_cdc_is_error_208(plain_db):
    with pytest.raises(pyodbc.Error) as excinfo:
        plain_db.scalar("SELECT sys.fn_cdc_get_max_lsn()")
    assert error_number(excinfo) == 208


def test_change_tables_are_readable_directly_in_their_column_order(accounts):
    cursor = accounts.execute("SELECT * FROM cdc.dbo_accounts_CT")
    assert [d[0] for d in cursor.description] == [
        "__$start_lsn",
        "__$end_lsn",
        "__$seqval",
        "__$operation",
        "__$update_mask",
        *ACCOUNT_COLUMNS,
        "__$command_id",
    ]
    assert len(cursor.fetchall()) == 7
    (row,) = accounts.rows(
        "SELECT start_lsn, tran_begin_time, tran_end_time, tran_id, tran_begin_lsn FROM cdc.lsn_time_mapping WHERE start_lsn = (SELECT MIN(start_lsn) FROM cdc.lsn_time_mapping)"
    )
    assert len(row[0]) == 10 and isinstance(row[2], dt.datetime)
