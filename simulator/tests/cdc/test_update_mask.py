"""The update mask layout (measured on SQL Server: bit = column_ordinal - 1, last byte first)."""

from __future__ import annotations

import pytest

from sqlserver_cdc_simulator.cdc.update_mask import (
    full_mask,
    is_bit_set,
    mask_from_ordinals,
    or_masks,
    ordinals_in_mask,
)


def test_five_columns_all_set_is_0x1f_and_third_column_is_0x04():
    # measured on SQL Server: insert/delete 0x1F, UPDATE ... SET <3rd column> 0x04
    assert full_mask(5) == b"\x1f"
    assert mask_from_ordinals([3], 5) == b"\x04"


def test_more_than_eight_columns_puts_ordinal_one_in_last_byte():
    assert mask_from_ordinals([1], 10) == b"\x00\x01"
    assert mask_from_ordinals([9], 10) == b"\x01\x00"
    assert full_mask(10) == b"\x03\xff"
    assert full_mask(16) == b"\xff\xff"
    assert len(full_mask(17)) == 3


def test_is_bit_set_reads_the_same_layout():
    mask = mask_from_ordinals([2, 9, 12], 12)
    assert [p for p in range(1, 13) if is_bit_set(p, mask)] == [2, 9, 12]
    assert ordinals_in_mask(mask) == [2, 9, 12]


def test_is_bit_set_outside_the_mask_or_null():
    assert is_bit_set(20, b"\xff") is False
    assert is_bit_set(0, b"\xff") is False
    assert is_bit_set(None, b"\xff") is None
    assert is_bit_set(1, None) is None


def test_or_masks():
    assert or_masks(b"\x01", b"\x04") == b"\x05"
    assert or_masks(None, b"\x04") == b"\x04"


def test_ordinal_out_of_range_is_refused():
    with pytest.raises(ValueError):
        mask_from_ordinals([6], 5)
