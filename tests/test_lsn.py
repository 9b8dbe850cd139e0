from __future__ import annotations

import pickle

import pytest

from airflow_provider_sqlserver_cdc.lsn import Lsn


def test_hex_round_trip_is_upper_case_with_20_digits():
    lsn = Lsn.from_hex("0x0000002a000001f00003")
    assert lsn.hex == "0x0000002A000001F00003"
    assert str(lsn) == lsn.hex
    assert Lsn.from_hex(lsn.hex) == lsn
    assert lsn.value == bytes.fromhex("0000002A000001F00003")


def test_orders_as_unsigned_big_endian():
    low = Lsn(bytes.fromhex("0000002A000001F00003"))
    mid = Lsn(bytes.fromhex("0000002A000001F00100"))
    high = Lsn(bytes.fromhex("0000002B000000000001"))
    top = Lsn(b"\xff" * 10)
    assert sorted([top, high, low, mid]) == [low, mid, high, top]
    assert low < mid <= mid < high
    assert Lsn.zero() < low and Lsn.zero().is_zero and not low.is_zero


def test_immutable_hashable_and_picklable():
    lsn = Lsn.from_hex("0x00000001000000010001")
    with pytest.raises(AttributeError):
        lsn._value = b"x" * 10  # type: ignore[misc]
    assert {lsn: 1}[Lsn(lsn.value)] == 1
    assert pickle.loads(pickle.dumps(lsn)) == lsn


@pytest.mark.parametrize(
    "bad", ["", "0x123", "0000002A000001F00003", "0x0000002A000001F0000G", "0x" + "0" * 22]
)
def test_rejects_malformed_text(bad):
    with pytest.raises(ValueError, match="Not an LSN"):
        Lsn.from_hex(bad)


def test_rejects_wrong_length_bytes_and_types():
    with pytest.raises(ValueError, match="10 bytes"):
        Lsn(b"\x00" * 9)
    with pytest.raises(TypeError):
        Lsn.parse(42)  # type: ignore[arg-type]
    assert Lsn.parse(bytearray(10)) == Lsn.zero()
    assert Lsn.parse("0x" + "0" * 20) == Lsn.zero()


def test_not_equal_to_raw_bytes():
    lsn = Lsn.zero()
    assert lsn != bytes(10)
    with pytest.raises(TypeError):
        _ = lsn < bytes(10)  # type: ignore[operator]


def test_int_form_round_trip_orders_as_the_bytes_do():
    lsn = Lsn.from_hex("0x0000002A000001F00003")
    assert int(lsn) == 0x2A000001F00003
    assert Lsn.from_int(int(lsn)) == lsn
    assert Lsn.from_int(0) == Lsn.zero() and Lsn.from_int(2**80 - 1).hex == "0x" + "F" * 20
    with pytest.raises(ValueError, match="Not an LSN value"):
        Lsn.from_int(2**80)
    with pytest.raises(ValueError, match="Not an LSN value"):
        Lsn.from_int(-1)
