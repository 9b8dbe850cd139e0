"""The throw-away PostgreSQL cluster of the relational-target tests."""

from __future__ import annotations

import os
import stat

import pytest

from airflow_provider_sqlserver_cdc.testing.postgres_server import PostgresServer


def test_session_server_serves_password_logins_on_loopback(postgres_server: PostgresServer) -> None:
    database = postgres_server.create_database("server_check")
    with postgres_server.connect(database) as conn:
        assert conn.execute("SELECT current_database(), current_user").fetchone() == (database, "cdc")
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    psycopg = pytest.importorskip("psycopg")
    wrong = postgres_server.conninfo(database).replace(postgres_server.password, "not-the-password")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong)
    # The data directory is private to the server's account (PostgreSQL insists on it).
    assert stat.S_IMODE(os.stat(postgres_server.data_dir).st_mode) & 0o077 == 0


def test_a_stopped_server_leaves_nothing_behind(postgres_server: PostgresServer) -> None:
    server = PostgresServer.start()
    directory = server.directory
    with server.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    server.stop()
    assert not directory.exists()
    assert server.port != postgres_server.port
