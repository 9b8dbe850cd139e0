"""Which capture instance a name stands for, and the errors when none does."""

from __future__ import annotations

import pytest

from airflow_provider_sqlserver_cdc.capture_instance import CaptureInstance
from airflow_provider_sqlserver_cdc.errors import CaptureInstanceNotFoundError, CdcNotEnabledError
from airflow_provider_sqlserver_cdc.hooks.capture_instance_names import find_capture_instance
from airflow_provider_sqlserver_cdc.lsn import Lsn

OLD = CaptureInstance("dbo_orders", "dbo", "orders", Lsn.from_hex("0x00000010000000100001"))
NEW = CaptureInstance("orders_v2", "dbo", "orders", Lsn.from_hex("0x00000020000000100001"))
INSTANCES = [OLD, NEW]


def find(name, tracked=None):
    return find_capture_instance(
        name, INSTANCES, is_tracked=lambda schema, table: tracked, database="shop", server="db:1433"
    )


def test_by_instance_name_and_by_table_newest_first():
    assert find("dbo_orders") is OLD
    assert find("dbo.orders") is NEW


def test_unknown_instance_lists_the_visible_ones():
    with pytest.raises(CaptureInstanceNotFoundError, match="visible: dbo_orders, orders_v2"):
        find("dbo_lines")


def test_untracked_table_says_how_to_enable_it():
    with pytest.raises(CdcNotEnabledError, match="Table dbo.lines is not tracked"):
        find("dbo.lines", tracked=False)
    with pytest.raises(CdcNotEnabledError, match="@source_name = N'lines'"):
        find("dbo_lines", tracked=False)
