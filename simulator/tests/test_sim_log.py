"""The transaction log's LSN arithmetic, ordering, scanning and truncation (no server needed)."""

from __future__ import annotations

from sqlserver_cdc_simulator.log import (
    CommittedTransaction,
    RowOperation,
    TransactionLog,
    lsn_from_numeric,
    lsn_hex,
    lsn_parts,
    lsn_to_numeric,
    make_lsn,
)


def test_lsn_layout_and_sql_server_numeric_form() -> None:
    lsn = make_lsn(0x14, 0x61, 1)
    assert lsn == bytes.fromhex("00000014000000610001")
    assert lsn_parts(lsn) == (20, 97, 1)
    assert lsn_to_numeric(lsn) == 20000000009700001  # vlf * 10^15 + block * 10^5 + slot
    assert lsn_from_numeric(20000000009700001) == lsn
    assert lsn_hex(lsn) == "0x00000014000000610001"


def test_allocated_lsns_strictly_increase_across_blocks_and_vlfs() -> None:
    log = TransactionLog()
    seen = [log.allocate_lsn() for _ in range(10)]
    seen.append(log.allocate_lsn(new_block=True))
    log.new_vlf()
    seen.append(log.allocate_lsn())
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert lsn_parts(seen[-1])[0] == lsn_parts(seen[0])[0] + 1
    log.advance_to(make_lsn(0x7777, 5, 5))
    assert log.allocate_lsn() > make_lsn(0x7777, 5, 5)


def _xact(log: TransactionLog, n_ops: int) -> CommittedTransaction:
    begin = log.allocate_lsn(new_block=True)
    ops = [
        RowOperation(log.allocate_lsn(), "dbo", "t", 1, "insert", ("id",), None, (i,), i)
        for i in range(n_ops)
    ]
    x = CommittedTransaction(len(log) + 1, begin, log.allocate_lsn(), 0, 0, list(ops))
    log.append(x)
    return x


def test_scan_after_lsn_truncate_and_trim() -> None:
    log = TransactionLog()
    xs = [_xact(log, 2) for _ in range(6)]
    assert list(log.scan()) == xs
    assert list(log.scan(after_lsn=xs[2].commit_lsn)) == xs[3:]
    assert log.truncate_before(xs[2].commit_lsn) == 2
    assert list(log.scan()) == xs[2:]
    assert list(log.scan(after_lsn=xs[3].commit_lsn)) == xs[4:]
    assert log.trim(max_transactions=100, max_operations=4) == 3  # 8 ops > 4: keep at most half (2 ops)
    assert list(log.scan()) == xs[5:]
    assert xs[0].operations[1].after_row == {"id": 1} and xs[0].operations[1].before_row is None
