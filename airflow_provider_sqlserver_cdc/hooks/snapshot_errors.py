"""Errors of the snapshot: each names the table, what is missing and how to fix it."""

from __future__ import annotations

from airflow_provider_sqlserver_cdc.errors import SqlServerCdcError


class SnapshotError(SqlServerCdcError):
    """The consistent snapshot of a table could not be taken."""


class SnapshotIsolationNotAllowedError(SnapshotError):
    """The database does not allow SNAPSHOT isolation (ALLOW_SNAPSHOT_ISOLATION is OFF)."""


class SnapshotPermissionError(SnapshotError):
    """The login lacks a permission the snapshot needs (VIEW SERVER STATE, SELECT on the table)."""


class SnapshotLockTimeoutError(SnapshotError):
    """The shared table lock that fixes the snapshot point was not granted in time."""
