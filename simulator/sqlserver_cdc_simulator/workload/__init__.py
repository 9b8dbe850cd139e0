"""
Sample database and seeded random workload for SQL Server CDC, applied through a real client (pyodbc).

The demo, the end-to-end tests and the benchmarks use it against the simulator or a real SQL
Server 2022::

    conn = pyodbc.connect(odbc_connection_string, autocommit=True)
    sample = SampleDatabase.create(conn, database="cdc_sample")
    workload = Workload(seed=7)
    stats = workload.run(conn, transactions=500)
    workload.model["dbo.orders"]          # expected current rows, keyed by primary key

The sample database has four tables: ``dbo.customers`` (integer key plus a unique secondary key
on ``email``), ``dbo.orders`` (bigint key), ``dbo.order_lines`` (composite primary key) and
``dbo.type_zoo`` (one column of every data type the provider supports). CDC is enabled on the
database and on each table (net changes on, so both query functions exist).

The workload draws a seeded mix of inserts, updates (including primary-key and unique-key
updates), deletes and multi-statement transactions (some rolled back), and keeps a model of the
rows it expects each table to hold, so a test can compare a replica with the source without
reading the source.

Command line (connection string from ``--odbc`` or ``$SQLSERVER_CDC_ODBC``)::

    python -m sqlserver_cdc_simulator.workload create --database cdc_sample --initial-rows 100
    python -m sqlserver_cdc_simulator.workload run --database cdc_sample \\
        --transactions 1000 --rate 50 --seed 7

Modules: ``schema`` (how a table is described), ``sample_tables`` (the four tables),
``value_generators`` (seeded values per type), ``sample_database`` (create it and enable CDC),
``change_generator`` (the workload and its model), ``statements`` (the DML it sends),
``keyed_rows`` (the model's index), ``captured_changes`` (read and replay what CDC captured),
``odbc_client`` (pyodbc conversions), ``command_line``.
"""

from __future__ import annotations

from sqlserver_cdc_simulator.workload.captured_changes import (
    CHANGE_COLUMNS,
    read_all_changes,
    replay_changes,
)
from sqlserver_cdc_simulator.workload.change_generator import (
    STATEMENT_KINDS,
    Workload,
    WorkloadMix,
    WorkloadStats,
)
from sqlserver_cdc_simulator.workload.command_line import main
from sqlserver_cdc_simulator.workload.sample_database import SampleDatabase
from sqlserver_cdc_simulator.workload.sample_tables import SAMPLE_TABLES
from sqlserver_cdc_simulator.workload.schema import ColumnSpec, Key, Row, SampleTable

__all__ = [
    "CHANGE_COLUMNS",
    "SAMPLE_TABLES",
    "STATEMENT_KINDS",
    "ColumnSpec",
    "Key",
    "Row",
    "SampleDatabase",
    "SampleTable",
    "Workload",
    "WorkloadMix",
    "WorkloadStats",
    "main",
    "read_all_changes",
    "replay_changes",
]
