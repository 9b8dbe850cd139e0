"""
A CDC-enabled database on the simulator whose transactions commit at server-local times the test picks.

With the capture job stopped, the test decides when changes are captured, and so which LSN maps
to which time: exactly what a sensor or an interval window depends on::

    db = ClockedCdcDatabase(sqlserver_simulator, "shop", {"orders": "id int NOT NULL PRIMARY KEY"},
                            time_zone="Asia/Kolkata", start=dt.datetime(2026, 3, 2, 9, 0))
    db.commit_at(dt.datetime(2026, 3, 2, 10, 1), ("INSERT INTO dbo.orders VALUES (?)", 1))
    db.capture(until=dt.datetime(2026, 3, 2, 10, 10))  # the max LSN now maps to 10:10
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlserver_cdc_simulator.pytest_plugin import SimulatorHandle


class ClockedCdcDatabase:
    """
    Create ``database`` with CDC on ``tables`` (schema ``dbo``), the capture job stopped, the clock frozen.

    :param simulator: the ``sqlserver_simulator`` fixture value.
    :param database: the database to create.
    :param tables: column definitions by table name, e.g. ``{"orders": "id int NOT NULL PRIMARY KEY"}``.
    :param time_zone: the server's IANA time zone.
    :param start: the server-local time the clock stands at while the tables are created.
    """

    def __init__(
        self,
        simulator: SimulatorHandle,
        database: str,
        tables: Mapping[str, str],
        *,
        time_zone: str,
        start: dt.datetime,
    ) -> None:
        self.simulator = simulator
        self.database = database
        simulator.clock.set_timezone(time_zone)
        simulator.clock.set(start, frozen=True)
        self.cursor: Any = simulator.connect().cursor()
        statements = [f"CREATE DATABASE {database}", f"USE {database}", "EXEC sys.sp_cdc_enable_db"]
        statements += [f"CREATE TABLE dbo.{name} ({columns})" for name, columns in tables.items()]
        statements += [
            f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{name}', @role_name = NULL"
            for name in tables
        ]
        statements.append("EXEC sys.sp_cdc_stop_job @job_type = N'capture'")
        for sql in statements:
            self.cursor.execute(sql)

    def commit_at(self, when: dt.datetime, *statements: tuple[Any, ...]) -> None:
        """
        Commit one transaction of ``statements`` at server-local time ``when`` (the clock stays there).

        :param when: the server-local commit time.
        :param statements: ``(sql, *params)`` tuples, run in order.
        """
        self.simulator.clock.set(when, frozen=True)
        self.cursor.execute("BEGIN TRANSACTION")
        for sql, *params in statements:
            self.cursor.execute(sql, *params)
        self.cursor.execute("COMMIT TRANSACTION")

    def capture(self, until: dt.datetime | None = None) -> None:
        """
        Let the capture job read every committed transaction; with ``until``, then a quiet scan at that time.

        The quiet scan writes the ``cdc.lsn_time_mapping`` row that carries the max LSN's time up
        to ``until``: without it nothing tells a reader that the interval up to then is complete.

        :param until: the server-local time the max LSN should map to afterwards.
        """
        self.simulator.run_capture_scan(self.database)
        if until is not None:
            self.simulator.clock.set(until, frozen=True)
            self.simulator.run_capture_scan(self.database)
