"""One continuous apply application per staging path: a lock file with a heartbeat.

The application creates ``{staging}/_continuous_apply/lock.json`` exclusively when it starts and
rewrites its heartbeat every poll. A second application finds a fresh lock and refuses to start,
naming the holder. A lock whose heartbeat is older than its ``stale_after_seconds`` (the holder was
killed or hangs), or whose holder's process is gone from this same host, is taken over.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import TYPE_CHECKING

from airflow_provider_sqlserver_cdc.spark.continuous.published_state import ApplyLock, lock_uri, utc_now
from airflow_provider_sqlserver_cdc.spark.merge.errors import MergeJobError
from airflow_provider_sqlserver_cdc.spark.merge.published_files import (
    create_new,
    delete,
    read_text,
    write_text,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG = logging.getLogger("sqlserver_cdc.continuous_apply")


class ApplyLockError(MergeJobError):
    """Another continuous apply application holds the staging path."""


def _process_gone(lock: ApplyLock) -> bool:
    """Whether the lock's holder ran on this host and its process no longer exists."""
    if lock.host != socket.gethostname():
        return False
    try:
        os.kill(lock.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def acquire(spark: SparkSession, staging: str, application_id: str, stale_after_seconds: float) -> ApplyLock:
    """Take the staging path's lock, or raise ``ApplyLockError`` naming the application that holds it.

    :param staging: the staging path.
    :param application_id: this application's id.
    :param stale_after_seconds: how long without a heartbeat counts as down.
    """
    uri = lock_uri(staging)
    now = utc_now().isoformat()
    mine = ApplyLock(application_id, socket.gethostname(), os.getpid(), now, now, stale_after_seconds)
    text = read_text(spark, uri)
    if text is not None:
        held = ApplyLock.from_json(text)
        if not held.is_stale() and not _process_gone(held):
            raise ApplyLockError(
                f"another continuous apply application holds staging path {staging}: {held.describe()}, "
                f"heartbeat {held.age():.0f} s ago ({uri}). Two applications would merge the same windows; stop "
                f"the other one first. If it is gone, this one may start once its heartbeat is "
                f"{held.stale_after_seconds:.0f} s old"
            )
        LOG.warning(
            "taking over the lock of %s: it is gone (heartbeat %.0f s ago)", held.describe(), held.age()
        )
        delete(spark, uri)
    if not create_new(spark, uri, mine.to_json()):
        raise ApplyLockError(
            f"another continuous apply application took the lock {uri} of staging path {staging} at the same "
            "time; stop one of them"
        )
    LOG.info("holding %s as %s", uri, mine.describe())
    return mine


def heartbeat(spark: SparkSession, staging: str, lock: ApplyLock) -> ApplyLock:
    """Rewrite the lock with a new heartbeat; raise ``ApplyLockError`` if another application took it over.

    :param staging: the staging path.
    :param lock: the lock this application holds.
    """
    uri = lock_uri(staging)
    text = read_text(spark, uri)
    if text is not None and ApplyLock.from_json(text).application_id != lock.application_id:
        raise ApplyLockError(
            f"the lock {uri} now names {ApplyLock.from_json(text).describe()}: this application's heartbeat "
            "went stale (a long pause?) and another one took over; stopping"
        )
    renewed = ApplyLock(
        lock.application_id,
        lock.host,
        lock.pid,
        lock.started_at,
        utc_now().isoformat(),
        lock.stale_after_seconds,
    )
    write_text(spark, uri, renewed.to_json())
    return renewed


def release(spark: SparkSession, staging: str, lock: ApplyLock) -> None:
    """Remove the lock if this application still holds it."""
    uri = lock_uri(staging)
    text = read_text(spark, uri)
    if text is not None and ApplyLock.from_json(text).application_id == lock.application_id:
        delete(spark, uri)
