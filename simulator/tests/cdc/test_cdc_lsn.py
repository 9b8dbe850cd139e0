"""LSN arithmetic and the textual forms SQL Server uses for LSNs."""

from __future__ import annotations

import pytest

from sqlserver_cdc_simulator.cdc.lsn import (
    MAX_LSN,
    ZERO_LSN,
    coerce_lsn,
    decrement_lsn,
    increment_lsn,
    lsn_parts,
    lsn_to_dmv_text,
    lsn_to_hex,
    make_lsn,
)
from sqlserver_cdc_simulator.log import lsn_from_numeric as numeric_to_lsn
from sqlserver_cdc_simulator.log import lsn_to_numeric


def test_make_lsn_lays_out_vlf_block_slot_big_endian():
    assert make_lsn(0x2D, 0x580, 0x1D) == bytes.fromhex("0000002D00000580001D")
    assert lsn_parts(bytes.fromhex("0000002D00000580001D")) == (0x2D, 0x580, 0x1D)


def test_increment_is_next_value_with_carry_across_fields():
    # measured on SQL Server: 0x...05900005 -> 0x...05900006
    assert increment_lsn(bytes.fromhex("0000002D000005900005")) == bytes.fromhex("0000002D000005900006")
    assert increment_lsn(make_lsn(1, 2, 0xFFFF)) == make_lsn(1, 3, 0)
    assert increment_lsn(make_lsn(1, 0xFFFFFFFF, 0xFFFF)) == make_lsn(2, 0, 0)


def test_decrement_is_previous_value_with_borrow():
    assert decrement_lsn(make_lsn(1, 3, 0)) == make_lsn(1, 2, 0xFFFF)
    assert decrement_lsn(make_lsn(2, 0, 0)) == make_lsn(1, 0xFFFFFFFF, 0xFFFF)


def test_increment_and_decrement_are_inverse_and_ordered():
    lsn = make_lsn(0x2A, 0x1F0, 3)
    assert increment_lsn(lsn) > lsn > decrement_lsn(lsn)
    assert decrement_lsn(increment_lsn(lsn)) == lsn


def test_bounds_saturate():
    assert decrement_lsn(ZERO_LSN) == ZERO_LSN
    assert increment_lsn(MAX_LSN) == MAX_LSN


def test_wrong_length_is_refused():
    with pytest.raises(ValueError, match="10 bytes"):
        increment_lsn(b"\x00" * 9)


def test_coerce_pads_and_truncates_like_cast_to_binary_10():
    assert coerce_lsn(b"\x01") == b"\x01" + bytes(9)
    assert coerce_lsn(bytes(range(12))) == bytes(range(10))


def test_numeric_form_round_trips():
    lsn = make_lsn(42, 336, 1)
    assert lsn_to_numeric(lsn) == 42000000033600001
    assert numeric_to_lsn(42000000033600001) == lsn


def test_text_forms():
    lsn = make_lsn(0x2D, 0x580, 0x1D)
    assert lsn_to_hex(lsn) == "0x0000002D00000580001D"
    assert lsn_to_dmv_text(lsn) == "0000002d:00000580:001d"
    assert lsn_to_hex(None) is None
