"""The SQL Server version the simulator reports, in one place.

``@@VERSION``, ``SERVERPROPERTY('ProductVersion')``, ``sp_server_info``, the PRELOGIN VERSION option
and the LOGINACK token all derive from :data:`PRODUCT_VERSION`, so a client sees one version.
"""

from __future__ import annotations

import struct

# SQL Server 2022 CU12: 16.0.4120.1
PRODUCT_VERSION = (16, 0, 4120, 1)
MAJOR, MINOR, BUILD, REVISION = PRODUCT_VERSION
VERSION_TEXT = ".".join(map(str, PRODUCT_VERSION))
UPDATE_LEVEL = "CU12"

VERSION_STRING = (
    f"Microsoft SQL Server 2022 (RTM-{UPDATE_LEVEL}) (KB5033663) - {VERSION_TEXT} (X64) \n"
    "\tSQL Server CDC simulator (airflow-provider-sqlserver-cdc) \n"
    "\tDeveloper Edition (64-bit) on Linux"
)


def prelogin_version() -> bytes:
    """The PRELOGIN VERSION option: major, minor, build (big-endian), sub-build."""
    return struct.pack(">BBHH", MAJOR, MINOR, BUILD, REVISION)


def loginack_version() -> bytes:
    """The LOGINACK server version: major, minor, build high byte, build low byte."""
    return struct.pack(">BBH", MAJOR, MINOR, BUILD)
