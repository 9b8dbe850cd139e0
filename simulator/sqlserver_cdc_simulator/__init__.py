"""SQL Server simulator: a TDS server with a T-SQL engine that real drivers (pyodbc + FreeTDS, pymssql) talk to.

Modules by role:

* :mod:`.tds` -- the TDS wire protocol (packets, requests, tokens, row encoders, TLS);
* :mod:`.version` -- the one SQL Server version every answer reports;
* :mod:`.types` and :mod:`.values` -- SQL Server data types, value representation, conversions;
* :mod:`.sql` -- T-SQL parsing (sqlglot ``tsql``), expressions, queries, DML, DDL, catalogs; it
  runs against :mod:`.sql.context` (the session and engine as protocols), never imports back;
* :mod:`.storage` -- MVCC tables, transactions and locks; :mod:`.log` -- LSNs and the transaction log;
* :mod:`.engine` -- server state and the write path; :mod:`.session` -- per-connection execution;
  :mod:`.events` -- what a batch yields; :mod:`.login` -- server logins; :mod:`.collation` -- ``ci_key``;
* :mod:`.server` -- the TCP listener; :mod:`.clock` -- the controllable server clock;
* :mod:`.extensions` -- the registry other modules (CDC) add procedures, functions and views to;
* :mod:`.persistence` -- durable state in a data directory.

Start one in-process with :func:`start_simulator`, from the command line with
``python -m sqlserver_cdc_simulator``, or in pytest with the
``sqlserver_simulator`` fixture.
"""

from __future__ import annotations

from .engine import Engine
from .errors import SqlError
from .server import SimulatorServer


def start_simulator(
    password: str,
    host: str = "127.0.0.1",
    port: int = 0,
    timezone: str = "UTC",
    data_dir: str | None = None,
    tls: str = "on",
) -> SimulatorServer:
    """Create an engine and serve it on *host*:*port* in a background thread.

    :param tls: ``on`` (SQL Server's default), ``force`` or ``off`` (see :class:`SimulatorServer`)
    """
    engine = Engine(password, timezone=timezone, data_dir=data_dir)
    return SimulatorServer(engine, host, port, tls=tls).start()


__all__ = ["Engine", "SimulatorServer", "SqlError", "start_simulator"]
